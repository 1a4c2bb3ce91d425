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

from benchmarks.harness import ROOT, machine, save_json, update_json
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

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda needs a CUDA GPU (torch.cuda.is_available() is False)")
    folder = Path(args.workdir) / f"{args.shape}-random"
    start = time.monotonic()
    built_random_model(folder, args.shape, args.device)
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


# The fast paths of issue 44, each with the grammar on (inference/decode.py, [conductor] decode and quant):
# (name, 4-bit format, decode option): one format loaded at a time, the most telling paths first.
FAST_PATHS = (
    ("nf4 hf", "nf4", "hf"),
    ("nf4 compiled+jump", "nf4", "compiled+jump"),
    ("nf4 compiled", "nf4", "compiled"),
    ("nf4 eager+jump", "nf4", "eager+jump"),
    ("int4 compiled+jump", "int4", "compiled+jump"),
    ("int4 compiled", "int4", "compiled"),
    ("int4 eager", "int4", "eager"),
)


def mask_ms_per_token(conductor, loaded, request, ids) -> float:
    """The grammar mask's CPU cost per token: a fresh plan processor replays `ids` (mask filled,
    applied to a logits row on the model's device, token accepted), no model involved."""
    import torch

    setup = conductor._prepare(request, loaded)
    mask = setup.processor.mask
    if mask is None:
        return float("nan")
    width = setup.processor.vocab_size
    device = next(loaded.model.parameters()).device
    scores = torch.zeros((1, width), device=device)
    start = time.perf_counter()
    for token in ids:
        mask(scores)
        mask.accept(int(token))
    if device.type == "cuda":
        torch.cuda.synchronize()
    return round(1000 * (time.perf_counter() - start) / max(1, len(ids)), 3)


async def fast_path(folder: Path, args, name: str, quant: str, decode: str) -> dict:
    """One fast path: the `local` backend in `quant` decoding with `decode`, grammar on, greedy, a
    base-style prompt (its static prefix's KV cache kept on the device): a warm-up plan (the compile,
    the prefix's cache), then timed 5-step plans."""
    from stiva_tui.conductor.local import LocalConductor

    conductor = LocalConductor(
        str(folder),
        device=args.device,
        max_subtask_chars=args.subtask_chars,
        temperature=0.0,
        prompt_style="base",
        decode=decode,
        quant=quant,
    )
    started = time.monotonic()
    loaded = await conductor.load()
    load_s = time.monotonic() - started
    requests = [PlanRequest(q, WORKERS, max_steps=5) for q in QUESTIONS]
    started = time.monotonic()
    await conductor.plan(requests[0])
    warmup_s = time.monotonic() - started
    rows = []
    for request in requests[1 : 1 + args.runs]:
        plan = await conductor.plan(request)
        stats = dict(conductor.last_stats)
        n = stats["completion_tokens"]
        decode_s = stats["generate_s"] - (stats["first_token_s"] or 0)
        rows.append(
            {
                "plan_s": plan.latency_s,
                "generate_s": stats["generate_s"],
                "tokens": n,
                "tokens_per_s": (n - 1) / decode_s if decode_s > 0 and n > 1 else float("nan"),
                "forced": stats.get("forced_tokens") or 0,
                "passes": stats.get("forward_passes"),
                "prompt_tokens": stats["prompt_tokens"],
                "steps": len(plan.workflow),
                "ids": plan.raw_text,
                "request": request,
            }
        )
    med = statistics.median
    last = rows[-1]
    ids = loaded.tokenizer(last["ids"], add_special_tokens=False)["input_ids"]
    return {
        "quant": loaded.quantization,
        "decode": decode,
        "load_s": round(load_s, 2),
        "warmup_plan_s": round(warmup_s, 2),
        "plans": len(rows),
        "decode_tokens_per_s": round(med(r["tokens_per_s"] for r in rows), 2),
        "plan_s": round(med(r["plan_s"] for r in rows), 3),
        "generate_s": round(med(r["generate_s"] for r in rows), 3),  # plan_s less the grammar's compile, the prompt
        "completion_tokens_median": med(r["tokens"] for r in rows),
        "prompt_tokens": last["prompt_tokens"],
        "forced_share": round(sum(r["forced"] for r in rows) / max(1, sum(r["tokens"] for r in rows)), 3),
        "forward_passes_median": med(r["passes"] for r in rows) if rows[0]["passes"] is not None else None,
        "steps": [r["steps"] for r in rows],
        "mask_ms_per_token": mask_ms_per_token(conductor, loaded, last["request"], ids),
        "memory_mb_reported": conductor.describe().get("memory_mb"),
    }


async def fast_paths(args, out_dir: Path | None) -> dict:
    """Every fast path of FAST_PATHS on one random-weight model, each reported as it finishes (and
    written to `out_dir`/fast_paths.json, so that a run cut short keeps what it measured)."""
    import gc

    import torch

    from stiva_tui.inference import checkpoints

    cuda = args.device == "cuda"
    folder = Path(args.workdir) / f"{args.shape}-random"
    built_random_model(folder, args.shape, args.device)
    out: dict = {
        "device": torch.cuda.get_device_name(0) if cuda else f"cpu ({os.cpu_count()} cores)",
        "machine": machine(),
        "model": f"{args.shape} architecture (Qwen2), random weights",
        "torch": torch.__version__,
        "prompt": "base style (few-shot), its static prefix's KV cache reused; grammar on; greedy",
        "paths": {},
    }
    wanted = [p for p in FAST_PATHS if not args.paths or p[0] in args.paths]
    loaded_quant = None
    for name, quant, decode in wanted:
        if loaded_quant is not None and quant != loaded_quant:  # one model in memory at a time
            checkpoints.clear_cache()
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
        loaded_quant = quant
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        try:
            row = await fast_path(folder, args, name, quant, decode)
            if cuda:
                row["vram_peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        except BaseException as exc:  # noqa: BLE001 - each path is reported, not fatal (a missing wheel, a compile error)
            if isinstance(exc, KeyboardInterrupt):
                raise
            row = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        out["paths"][name] = row
        print(name, json.dumps(row), flush=True)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            save_json(out_dir / "fast_paths.json", out)
    try:
        import hqq  # noqa: F401

        out["paths"]["hqq"] = {"skipped": "hqq installs, but Stiva has no HQQ loading path yet"}
    except ImportError:
        out["paths"]["hqq"] = {"skipped": "hqq is not installed"}
    ok = {k: v for k, v in out["paths"].items() if "decode_tokens_per_s" in v}
    if ok:
        best = max(ok, key=lambda k: ok[k]["decode_tokens_per_s"])
        out["fastest"] = best
        if cuda:
            out["targets"] = {
                "tokens_per_s>=100": ok[best]["decode_tokens_per_s"] >= 100,
                "plan_s<=3": ok[best]["plan_s"] <= 3,
            }
    return out


def append_run(path: Path | str, key: str, figures: dict) -> Path:
    """`figures` appended to the list under `key` of the JSON at `path` (every run kept, with its
    date; none replaced)."""
    path = Path(path)
    existing = json.loads(path.read_text()) if path.exists() else {}
    runs = existing.get(key)
    existing[key] = (runs if isinstance(runs, list) else []) + [figures]
    return save_json(path, existing)


def built_random_model(folder: Path, shape: str, device: str) -> Path:
    """The random-weight model of `shape` in `folder`, built there once (bf16 on CUDA, else fp32),
    with a tokenizer trained on Stiva's own source (no hub)."""
    from tests.support.model_builders import build_random_model

    if not (folder / "config.json").exists():
        corpus = [p.read_text() for p in sorted((ROOT / "stiva_tui").rglob("*.py"))]
        build_random_model(
            folder,
            shape,
            device=device,
            dtype="bfloat16" if device == "cuda" else "float32",
            tokenizer_vocab=8000,
            corpus=corpus,
        )
    return folder


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
    parser.add_argument(
        "--fast-paths",
        action="store_true",
        help="issue 44's decode paths (nf4/int4 x hf/eager/compiled, jump-forward) on the --random model",
    )
    parser.add_argument("--paths", nargs="*", help="with --fast-paths: only these (names of FAST_PATHS)")
    parser.add_argument("--out-dir", help="with --fast-paths: also write fast_paths.json here as each path ends")
    args = parser.parse_args()
    if args.fast_paths:
        if args.cuda:
            args.shape, args.device = "qwen2.5-7b", "cuda"
        args.shape = args.shape or "tiny"
        results = asyncio.run(fast_paths(args, Path(args.out_dir) if args.out_dir else None))
        results["when"] = time.strftime("%Y-%m-%d %H:%M:%S")
        print(json.dumps(results, indent=2))
        if not args.no_save:
            key = "fast_paths_runs" if args.device == "cuda" else f"fast_paths_runs_{args.shape}_{args.device}"
            print(f"appended to {append_run(args.out, key, results)}")
        return
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
    print(f"appended to {append_run(args.out, key + '_runs', results)}")  # every run kept, with its date


if __name__ == "__main__":
    main()
