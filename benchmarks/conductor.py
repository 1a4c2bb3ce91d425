"""Benchmark of the local conductor backends (run by hand; prints and saves conductor.json).

    .venv/bin/python benchmarks/conductor.py            # embedded Gemma-3 270M on the CPU
    .venv/bin/python benchmarks/conductor.py --cuda     # Qwen2.5-7B-shaped random model, 4-bit, CUDA

CPU: time to first token, plan latency, tokens/s and peak RSS, with and without the grammar
(the grammar should cost under 10% of tokens/s). CUDA: a Qwen2.5-7B architecture with random
weights built from a hand-written config (no hub), quantised to nf4; tokens/s, VRAM, and the
latency of a 5-step plan (random weights: the grammar alone makes the plan parse).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stiva_tui.conductor.base import ConductorError, PlanRequest, WorkerInfo  # noqa: E402
from stiva_tui.conductor.workflow import parse_workflow  # noqa: E402

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
    ttft, latency, tps, tokens, parsed = [], [], [], [], []
    for i in range(runs):
        request = PlanRequest(QUESTIONS[i % len(QUESTIONS)], WORKERS, max_steps=max_steps)
        start = time.monotonic()
        first: list[float] = []

        def on_delta(text: str) -> None:
            if not first:
                first.append(time.monotonic() - start)

        try:
            plan = await conductor.plan(request, on_delta)
        except ConductorError:  # without the grammar a base model often writes no valid plan
            plan = None
        stats = conductor.last_stats
        parsed.append(plan is not None)
        ttft.append(first[0] if first else float("nan"))
        latency.append(plan.latency_s if plan else stats["generate_s"])
        decode_s = stats["generate_s"] - (stats["first_token_s"] or 0)
        n = stats["completion_tokens"]
        tps.append((n - 1) / decode_s if decode_s > 0 and n > 1 else float("nan"))
        tokens.append(n)
        if plan is not None:
            parse_workflow(plan.raw_text, len(WORKERS), max_steps)
    return {
        "runs": runs,
        "ttft_s": round(statistics.median(ttft), 3),
        "plan_latency_s": round(statistics.median(latency), 3),
        "decode_tokens_per_s": round(statistics.median(tps), 2),
        "completion_tokens_median": statistics.median(tokens),
        "prompt_tokens": stats["prompt_tokens"],
        "plans_parsed": f"{sum(parsed)}/{runs}",
    }


def bench_raw_decode(loaded, tokens: int = 64) -> dict:
    """Plain greedy decoding speed, no logits processor (the baseline the grammar is compared to)."""
    from stiva_tui.conductor.local import generate_sync

    prompt = loaded.tokenizer("The history of the river begins", add_special_tokens=True)["input_ids"]
    generate_sync(loaded, prompt, max_new_tokens=4)  # warm up
    result = generate_sync(loaded, prompt, max_new_tokens=tokens, eos_ids=[])
    decode_s = result.seconds - (result.first_token_s or 0)
    return {"tokens": result.completion_tokens,
            "decode_tokens_per_s": round((result.completion_tokens - 1) / decode_s, 2),
            "ttft_s": round(result.first_token_s or 0, 3)}


def bench_grammar_decode(loaded, tokens: int = 64, grammar: bool = True) -> dict:
    """Same forced length, through the plan processor (grammar phase only) or without it."""
    from stiva_tui.conductor.grammar import compiled_lists_grammar
    from stiva_tui.conductor.local import PlanLogitsProcessor, generate_sync

    tok = loaded.tokenizer
    vocab = loaded.model.config.vocab_size
    prompt = tok("Plan:", add_special_tokens=True)["input_ids"]
    # wide bounds so that the grammar does not end before `tokens` tokens
    compiled = compiled_lists_grammar(tok, 5, 5, 400, False, vocab_size=vocab, stop_token_ids=[1])
    times = []
    for _ in range(3):
        processors = [PlanLogitsProcessor(tok, compiled, vocab, 1, 0, prompt)] if grammar else []
        result = generate_sync(loaded, prompt, max_new_tokens=tokens, eos_ids=[1] if grammar else [],
                               logits_processors=processors, temperature=1.0)
        decode_s = result.seconds - (result.first_token_s or 0)
        times.append((result.completion_tokens - 1) / decode_s)
    return {"tokens": result.completion_tokens, "decode_tokens_per_s": round(statistics.median(times), 2)}


async def cpu(args) -> dict:
    from stiva_tui.conductor.embedded import EmbeddedConductor, load_embedded

    start = time.monotonic()
    loaded = await asyncio.to_thread(load_embedded)
    load_s = time.monotonic() - start
    out: dict = {"device": "cpu", "cpus": os.cpu_count(), "machine": platform.machine(), "model": "google/gemma-3-270m",
                 "quantization": "nf4", "load_s_this_process": round(load_s, 2),
                 "memory_footprint_mb": round(loaded.memory_bytes / 2**20, 1)}
    out["raw_decode"] = bench_raw_decode(loaded)
    out["forced_64_tokens_no_grammar"] = bench_grammar_decode(loaded, grammar=False)
    out["forced_64_tokens_grammar"] = bench_grammar_decode(loaded, grammar=True)
    with_grammar = EmbeddedConductor(max_reasoning_tokens=args.reasoning, max_subtask_chars=args.subtask_chars)
    without = EmbeddedConductor(max_reasoning_tokens=args.reasoning, max_subtask_chars=args.subtask_chars,
                                grammar=False)
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


async def cuda(args) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, Qwen2Config

    from stiva_tui.conductor.loader import LoadedModel, ModelSpec
    from stiva_tui.conductor.local import HFConductor, generate_sync

    assert torch.cuda.is_available(), "--cuda needs a CUDA GPU"
    config = Qwen2Config(
        hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
        intermediate_size=18944, vocab_size=152064, max_position_embeddings=32768, rope_theta=1e6,
        rms_norm_eps=1e-6, tie_word_embeddings=False, hidden_act="silu",
    )
    folder = Path(args.workdir) / "qwen2.5-7b-random"
    start = time.monotonic()
    if not (folder / "config.json").exists():
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        model.save_pretrained(str(folder))
        del model
    build_s = time.monotonic() - start
    torch.cuda.reset_peak_memory_stats()
    start = time.monotonic()
    model = AutoModelForCausalLM.from_pretrained(
        str(folder), device_map={"": 0}, dtype=torch.bfloat16,
        quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                               bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16))
    load_s = time.monotonic() - start
    # Any tokenizer with a byte-level vocab will do for random weights; the embedded one is local.
    from stiva_tui.conductor.loader import ensure_embedded_checkpoint

    tok_dir = ensure_embedded_checkpoint()
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    spec = ModelSpec(source=str(folder), device="cuda", quantize=True, double_quant=True, compute_dtype="bfloat16",
                     label="qwen2.5-7b-random")
    loaded = LoadedModel(model=model, tokenizer=tokenizer, spec=spec, device="cuda", quantization="nf4",
                         load_s=load_s, memory_bytes=torch.cuda.memory_allocated())
    prompt = tokenizer("The history of the river begins", add_special_tokens=True)["input_ids"]
    generate_sync(loaded, prompt, max_new_tokens=4, eos_ids=[])
    result = generate_sync(loaded, prompt, max_new_tokens=128, eos_ids=[])
    decode_s = result.seconds - (result.first_token_s or 0)
    conductor = HFConductor(spec, max_reasoning_tokens=args.reasoning, max_subtask_chars=args.subtask_chars,
                            temperature=1.0)
    conductor._loaded = loaded
    plans = await bench_plans(conductor, args.runs, max_steps=5)
    return {
        "device": torch.cuda.get_device_name(0), "model": "Qwen2.5-7B architecture, random weights",
        "quantization": "nf4 (double quant, bf16 compute)", "build_s": round(build_s, 1), "load_s": round(load_s, 1),
        "vram_allocated_gb": round(torch.cuda.memory_allocated() / 2**30, 2),
        "vram_peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "decode_tokens_per_s": round((result.completion_tokens - 1) / decode_s, 1),
        "ttft_s": round(result.first_token_s or 0, 3),
        "plan_5_steps": plans,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuda", action="store_true", help="benchmark a 7B-shaped random model on CUDA")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--reasoning", type=int, default=64, help="max reasoning tokens")
    parser.add_argument("--subtask-chars", type=int, default=160)
    parser.add_argument("--workdir", default=str(Path.home() / ".cache" / "stiva" / "bench"))
    parser.add_argument("--out", default=str(HERE / "conductor.json"))
    args = parser.parse_args()
    results = asyncio.run(cuda(args) if args.cuda else cpu(args))
    results["when"] = time.strftime("%Y-%m-%d %H:%M:%S")
    text = json.dumps(results, indent=2)
    print(text)
    out = Path(args.out)
    existing = json.loads(out.read_text()) if out.exists() else {}
    existing["cuda" if args.cuda else "cpu"] = results
    out.write_text(json.dumps(existing, indent=2) + "\n")
    print(f"saved to {out}")


if __name__ == "__main__":
    main()
