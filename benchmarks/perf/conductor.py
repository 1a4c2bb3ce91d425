"""Benchmark of the local conductor backends (run by hand; prints and saves conductor.json beside itself).

    .venv/bin/python -m benchmarks.perf.conductor            # embedded Gemma-3 270M on the CPU
    .venv/bin/python -m benchmarks.perf.conductor --cuda     # Qwen2.5-7B-shaped random model, 4-bit, CUDA
    .venv/bin/python -m benchmarks.perf.conductor --random tiny --no-save   # the same code path, CPU smoke run
    .venv/bin/python -m benchmarks.perf.conductor --formats  # embedded model in bf16 / fp32 / nf4 on the CPU

CPU: time to first token, plan latency, tokens/s and peak RSS, with and without the grammar
(the grammar should cost under 10% of tokens/s). CUDA: a Qwen2.5-7B architecture with random
weights and a locally trained byte-level BPE tokenizer (`tests/support/model_builders.py`, no hub),
loaded by the real `local` backend in nf4; tokens/s, VRAM, and plans of up to 5 steps (random
weights: the grammar alone makes the plan parse). Targets there: >= 60 tok/s, <= 6 GB, a 5-step
plan in < 3 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from benchmarks.harness import ROOT, machine, update_json
from stiva_tui.conductor.base import ConductorError, PlanRequest, WorkerInfo
from stiva_tui.core.workflow import parse_workflow

HERE = Path(__file__).resolve().parent
WORKERS = [
    WorkerInfo("gpt-5", "strongest reasoning, expensive"),
    WorkerInfo("claude-sonnet-4", "careful writer and coder"),
    WorkerInfo("gemini-2.5-pro", "long context, good at math"),
    WorkerInfo("qwen3-32b", "cheap open model"),
    WorkerInfo("local/gemma-3-270m", "tiny, offline"),
]
QUESTIONS = [
    "Prove that there are infinitely many primes.",
    "Write a Python function that checks whether a string is a palindrome.",
    "What were the main causes of the fall of the Western Roman Empire?",
    "How many ways can 8 rooks be placed on a chessboard so that none attack each other?",
]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def bench_plans(conductor, runs: int, max_steps: int = 5) -> dict:
    ttft, latency, tps, tokens, parsed, steps = [], [], [], [], [], []
    for i in range(runs):
        request = PlanRequest(QUESTIONS[i % len(QUESTIONS)], WORKERS, max_steps=max_steps)
        start = time.monotonic()
        first: list[float] = []

        def on_delta(text: str, first: list[float] = first, start: float = start) -> None:
            if not first:
                first.append(time.monotonic() - start)

        conductor.last_stats, error = {}, None
        try:
            plan = await conductor.plan(request, on_delta)
        except ConductorError as exc:  # without the grammar a base model often writes no valid plan
            plan, error = None, exc
        stats = conductor.last_stats
        if not stats:  # it failed before generating anything: nothing to measure, so say why
            raise SystemExit(f"the conductor failed before generating: {error}")
        parsed.append(plan is not None)
        ttft.append(first[0] if first else float("nan"))
        latency.append(plan.latency_s if plan else stats["generate_s"])
        decode_s = stats["generate_s"] - (stats["first_token_s"] or 0)
        n = stats["completion_tokens"]
        tps.append((n - 1) / decode_s if decode_s > 0 and n > 1 else float("nan"))
        tokens.append(n)
        if plan is not None:
            parse_workflow(plan.raw_text, len(WORKERS), max_steps)
            steps.append(len(plan.workflow))
    return {
        "runs": runs,
        "ttft_s": round(statistics.median(ttft), 3),
        "plan_latency_s": round(statistics.median(latency), 3),
        "decode_tokens_per_s": round(statistics.median(tps), 2),
        "completion_tokens_median": statistics.median(tokens),
        "prompt_tokens": stats["prompt_tokens"],
        "plans_parsed": f"{sum(parsed)}/{runs}",
        "steps": steps,
    }


def bench_raw_decode(loaded, tokens: int = 64) -> dict:
    """Plain greedy decoding speed, no logits processor (the baseline the grammar is compared to)."""
    from stiva_tui.inference.generation import generate_sync

    prompt = loaded.tokenizer("The history of the river begins", add_special_tokens=True)["input_ids"]
    generate_sync(loaded, prompt, max_new_tokens=4)  # warm up
    result = generate_sync(loaded, prompt, max_new_tokens=tokens, eos_ids=[])
    decode_s = result.seconds - (result.first_token_s or 0)
    return {
        "tokens": result.completion_tokens,
        "decode_tokens_per_s": round((result.completion_tokens - 1) / decode_s, 2),
        "ttft_s": round(result.first_token_s or 0, 3),
    }


def bench_grammar_decode(loaded, tokens: int = 64, grammar: bool = True) -> dict:
    """Same forced length, through the plan processor (grammar phase only) or without it."""
    from stiva_tui.conductor.grammar import compiled_lists_grammar
    from stiva_tui.conductor.local import PlanLogitsProcessor
    from stiva_tui.inference.generation import generate_sync

    tok = loaded.tokenizer
    vocab = loaded.model.config.vocab_size
    prompt = tok("Plan:", add_special_tokens=True)["input_ids"]
    # wide bounds so that the grammar does not end before `tokens` tokens
    compiled = compiled_lists_grammar(tok, 5, 5, 400, False, vocab_size=vocab, stop_token_ids=[1])
    times = []
    for _ in range(3):
        processors = [PlanLogitsProcessor(tok, compiled, vocab, 1, 0, prompt)] if grammar else []
        result = generate_sync(
            loaded,
            prompt,
            max_new_tokens=tokens,
            eos_ids=[1] if grammar else [],
            logits_processors=processors,
            temperature=1.0,
        )
        decode_s = result.seconds - (result.first_token_s or 0)
        times.append((result.completion_tokens - 1) / decode_s)
    return {"tokens": result.completion_tokens, "decode_tokens_per_s": round(statistics.median(times), 2)}


async def cpu(args) -> dict:
    from stiva_tui.conductor.embedded import EmbeddedConductor
    from stiva_tui.inference.embedded import load_embedded

    start = time.monotonic()
    loaded = await asyncio.to_thread(load_embedded)
    load_s = time.monotonic() - start
    out: dict = {
        "device": "cpu",
        "machine": machine(),
        "model": "google/gemma-3-270m",
        "format": loaded.quantization,
        "load_s_this_process": round(load_s, 2),
        "memory_footprint_mb": round(loaded.memory_bytes / 2**20, 1),
    }
    out["raw_decode"] = bench_raw_decode(loaded)
    out["forced_64_tokens_no_grammar"] = bench_grammar_decode(loaded, grammar=False)
    out["forced_64_tokens_grammar"] = bench_grammar_decode(loaded, grammar=True)
    with_grammar = EmbeddedConductor(max_reasoning_tokens=args.reasoning, max_subtask_chars=args.subtask_chars)
    without = EmbeddedConductor(
        max_reasoning_tokens=args.reasoning, max_subtask_chars=args.subtask_chars, grammar=False
    )
    out["plan_with_grammar"] = await bench_plans(with_grammar, args.runs)
    out["plan_without_grammar"] = await bench_plans(without, args.runs)
    a = out["forced_64_tokens_no_grammar"]["decode_tokens_per_s"]
    b = out["forced_64_tokens_grammar"]["decode_tokens_per_s"]
    out["grammar_cost_pct_of_tokens_per_s"] = round(100 * (a - b) / a, 1)
    a = out["plan_without_grammar"]["decode_tokens_per_s"]
    b = out["plan_with_grammar"]["decode_tokens_per_s"]
    out["grammar_cost_pct_in_plans"] = round(100 * (a - b) / a, 1)
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return out


FORMATS = ("bfloat16", "float32", "nf4")


def one_format(fmt: str) -> dict:
    """The embedded model in one format, in this (fresh) process: load, then answer once.

    Prefill: one forward pass over 400 prompt tokens. Decode: greedy tokens with the KV cache, as
    `generate` makes them (64 after a 20-token prompt). Memory: RSS after the load, and the peak
    RSS while answering (the kernel's high-water mark is reset after the load, so the load's own
    transient copies do not count)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    from stiva_tui.inference.embedded import ensure_embedded_checkpoint

    def status(key: str) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
        return float("nan")

    folder = str(ensure_embedded_checkpoint())
    start = time.monotonic()
    tok = AutoTokenizer.from_pretrained(folder)
    kwargs: dict = {"dtype": torch.float32 if fmt == "nf4" else getattr(torch, fmt)}
    if fmt == "nf4":
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32
        )
    model = AutoModelForCausalLM.from_pretrained(folder, device_map="cpu", **kwargs).eval()
    load_s = time.monotonic() - start
    rss_loaded = status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    ids = tok("The history of the river begins in the mountains. " * 60, return_tensors="pt").input_ids[:, :400]
    with torch.inference_mode():
        model(ids[:, :32])  # warm up
        prefill = []
        for _ in range(3):
            t = time.monotonic()
            model(ids)
            prefill.append(time.monotonic() - t)
        t = time.monotonic()
        model.generate(ids[:, :20], max_new_tokens=64, min_new_tokens=64, do_sample=False)
        decode_s = time.monotonic() - t
    return {
        "format": fmt,
        "load_s": round(load_s, 2),
        "prefill_tokens_per_s": round(400 / statistics.median(prefill), 1),
        "decode_tokens_per_s": round(64 / decode_s, 1),
        "weights_mb": round(model.get_memory_footprint() / 2**20),
        "rss_after_load_mb": round(rss_loaded),
        "peak_rss_answering_mb": round(status("VmHWM")),
    }


def formats() -> dict:
    """Every format, each in a fresh process (honest memory), and the one the embedded model uses."""
    import subprocess

    from stiva_tui.inference.embedded import EMBEDDED_DTYPE

    rows = []
    for fmt in FORMATS:
        result = subprocess.run(
            [sys.executable, "-m", __spec__.name, "--one-format", fmt],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=ROOT,
        )
        if result.returncode != 0:
            raise SystemExit(f"{fmt}: {result.stderr[-2000:]}")
        rows.append(json.loads(result.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    fitting = [r for r in rows if r["peak_rss_answering_mb"] <= 2048]
    fastest = max(fitting, key=lambda r: r["decode_tokens_per_s"])["format"] if fitting else None
    return {
        "machine": machine(),
        "rows": rows,
        "rule": "the fastest decode whose peak RSS while answering stays within 2 GB",
        "fastest_within_2gb": fastest,
        "embedded_uses": EMBEDDED_DTYPE,
    }


# Tokens of a typical 5-step plan by a 7B conductor: ~100 of reasoning and ~150 for the lists
# (five subtasks of a sentence each). Random weights write as long as the bounds allow, so the
# plans measured below are longer; this figure turns the measured speed into the target's terms.
TYPICAL_5_STEP_PLAN_TOKENS = 250


async def random_model(args) -> dict:
    """A random-weight model of a real shape, loaded and planned with by the real `local` backend."""
    import torch

    from stiva_tui.conductor.local import LocalConductor
    from tests.support.model_builders import build_random_model

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda needs a CUDA GPU (torch.cuda.is_available() is False)")
    folder = Path(args.workdir) / f"{args.shape}-random"
    start = time.monotonic()
    if not (folder / "config.json").exists():
        corpus = [p.read_text() for p in sorted((ROOT / "stiva_tui").rglob("*.py"))]
        build_random_model(
            folder,
            args.shape,
            device=args.device,
            dtype="bfloat16" if cuda else "float32",
            tokenizer_vocab=8000,
            corpus=corpus,
        )
    build_s = time.monotonic() - start
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    conductor = LocalConductor(
        str(folder),
        device=args.device,
        max_reasoning_tokens=args.reasoning,
        max_subtask_chars=args.subtask_chars,
        temperature=1.0,
    )
    progress: list[str] = []
    loaded = await conductor.load(lambda fraction, message: progress.append(f"{fraction}: {message}"))
    info = conductor.describe()
    raw = bench_raw_decode(loaded, tokens=128)
    plans = await bench_plans(conductor, args.runs, max_steps=5)
    tps = raw["decode_tokens_per_s"]
    out = {
        "device": torch.cuda.get_device_name(0) if cuda else f"cpu ({os.cpu_count()} cores)",
        "machine": machine(),
        "model": f"{args.shape} architecture (Qwen2), random weights, byte-level BPE of {len(loaded.tokenizer)} tokens",
        "quantization": "nf4" + (" (double quant, bf16 compute)" if cuda else " (fp32 compute)"),
        "build_s": round(build_s, 1),
        "load_s": info["load_s"],
        "memory_mb_reported": info["memory_mb"],
        "load_progress_messages": len(progress),
        "raw_decode": raw,
        "plan_5_steps_max": plans,
        "typical_5_step_plan_s_estimate": round(raw["ttft_s"] + TYPICAL_5_STEP_PLAN_TOKENS / tps, 2),
    }
    if cuda:
        out["vram_allocated_gb"] = round(torch.cuda.memory_allocated() / 2**30, 2)
        out["vram_peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        out["targets"] = {
            "tokens_per_s>=60": tps >= 60,
            "vram_peak_gb<=6": out["vram_peak_gb"] <= 6,
            "typical_5_step_plan_s<3": out["typical_5_step_plan_s_estimate"] < 3,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--cuda",
        action="store_true",
        help="a Qwen2.5-7B-shaped random model on CUDA (= --random qwen2.5-7b --device cuda)",
    )
    parser.add_argument(
        "--random",
        dest="shape",
        choices=["qwen2.5-7b", "tiny"],
        help="benchmark a random-weight model of this shape instead of the embedded one",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--no-save", action="store_true", help="print only (e.g. a smoke run of --random tiny)")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--reasoning", type=int, default=64, help="max reasoning tokens")
    parser.add_argument("--subtask-chars", type=int, default=160)
    parser.add_argument("--workdir", default=str(Path.home() / ".cache" / "stiva" / "bench"))
    parser.add_argument("--out", default=str(HERE / "conductor.json"))
    parser.add_argument(
        "--formats", action="store_true", help="the embedded model in bf16, fp32 and nf4 on the CPU: speed and memory"
    )
    parser.add_argument("--one-format", choices=FORMATS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_format:
        print(json.dumps(one_format(args.one_format)))
        return
    if args.formats:
        results = formats()
        results["when"] = time.strftime("%Y-%m-%d %H:%M:%S")
        print(json.dumps(results, indent=2))
        if not args.no_save:
            print(f"saved to {update_json(args.out, 'cpu_formats', results)}")
        return
    if args.cuda:
        args.shape, args.device = "qwen2.5-7b", "cuda"
    results = asyncio.run(random_model(args) if args.shape else cpu(args))
    results["when"] = time.strftime("%Y-%m-%d %H:%M:%S")
    text = json.dumps(results, indent=2)
    print(text)
    if args.no_save:
        return
    key = (
        "cpu"
        if not args.shape
        else ("cuda" if args.shape == "qwen2.5-7b" and args.device == "cuda" else f"random-{args.shape}-{args.device}")
    )
    print(f"saved to {update_json(args.out, key, results)}")


if __name__ == "__main__":
    main()
