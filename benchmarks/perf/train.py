"""Benchmark of `stiva train` (run by hand; prints and saves train.json beside itself).

    .venv/bin/python -m benchmarks.perf.train            # the embedded Gemma-3 270M on the CPU
    .venv/bin/python -m benchmarks.perf.train --cuda     # a Qwen2.5-7B-shaped random model, QLoRA, group 8

Real GRPO steps through TRL with Stiva's rollouts on a scripted pool (a real HTTP server on
127.0.0.1, two models, one always right). Reported: steps per minute, peak memory (RSS; on CUDA
the peak allocated GPU memory, target <= 24 GB at group 8), and each step's time split between
generation (sampling the plans under the grammar), rollouts (running them on the pool) and the
update (TRL's forward/backward/optimiser step), medians over the steps after the first.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.harness import ROOT, machine, update_json

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuda", action="store_true", help="a 7B-shaped random model in 4-bit on CUDA")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--group", type=int, default=None, help="plans per question (default: 4 CPU, 8 CUDA)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--workdir", default=str(Path.home() / ".cache" / "stiva" / "bench"))
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    group = args.group or (8 if args.cuda else 4)

    import torch

    from stiva_tui.config import parse_config
    from stiva_tui.evals.suite import parse_suite
    from stiva_tui.train.trainer import TrainOptions, train
    from tests.support.fakeprovider import FakeProvider, Reply

    if args.cuda and not torch.cuda.is_available():
        raise SystemExit("--cuda needs a CUDA GPU")
    if args.cuda:
        from tests.support.model_builders import build_random_model

        base = Path(args.workdir) / "qwen2.5-7b-random"
        if not (base / "config.json").exists():
            corpus = [p.read_text() for p in sorted((ROOT / "stiva_tui").rglob("*.py"))]
            build_random_model(base, "qwen2.5-7b", device="cuda", dtype="bfloat16", tokenizer_vocab=8000, corpus=corpus)
        base_name = str(base)
        torch.cuda.reset_peak_memory_stats()
    else:
        base_name = "embedded"
    reports = []
    with FakeProvider() as fake, tempfile.TemporaryDirectory() as tmp:
        os.environ["STIVA_HOME"] = str(Path(tmp) / "home")
        fake.default("right", Reply("It is 42.", usage=(200, 20)))
        fake.default("wrong", Reply("It is 41.", usage=(200, 20)))
        config = parse_config(
            {
                "providers": [{"name": "lab", "base_url": fake.base_url}],
                "models": [
                    {"id": m, "provider": "lab", "model": m, "price_in": 1.0, "price_out": 2.0}
                    for m in ("right", "wrong")
                ],
                "catalog": False,
                "embedded_worker": False,
                "discovery": {"enabled": False},
                "conductor": {"max_steps": 3, "max_reasoning_tokens": 32 if args.cuda else 64},
            }
        )
        suite = parse_suite(
            "\n".join(
                json.dumps({"id": f"q{i}", "question": f"What is {i} + {42 - i}?", "answer": "42", "grader": "numeric"})
                for i in range(8)
            ),
            name="b",
        )
        started = time.monotonic()
        summary = train(
            config,
            suite,
            TrainOptions(
                base=base_name,
                out=Path(tmp) / "adapter",
                steps=args.steps,
                group=group,
                batch=args.batch,
                lr=1e-4,
                save_every=1000,
                device="cuda" if args.cuda else "cpu",
            ),
            on_step=reports.append,
            progress=lambda m: print(m, file=sys.stderr, flush=True),
        )
        wall = time.monotonic() - started
    later = reports[1:] or reports
    med = lambda key: round(statistics.median(getattr(r, key) for r in later), 2)  # noqa: E731
    step_s = med("generate_s") + med("rollout_s") + med("update_s")
    result = {
        "device": torch.cuda.get_device_name(0) if args.cuda else f"cpu ({os.cpu_count()} cores)",
        "machine": machine(),
        "base": "Qwen2.5-7B architecture, random weights, nf4 QLoRA"
        if args.cuda
        else "embedded Gemma-3 270M, fp32 LoRA",
        "steps": summary.steps,
        "group": group,
        "batch": args.batch,
        "wall_s_with_load": round(wall, 1),
        "steps_per_min": round(60 / step_s, 2) if step_s else None,
        "step_split_s": {"generation": med("generate_s"), "rollouts": med("rollout_s"), "update": med("update_s")},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "valid_plan_rate": [r.valid_plan_rate for r in reports],
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if args.cuda:
        result["gpu_peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        result["targets"] = {"gpu_peak_gb<=24_at_group_8": result["gpu_peak_gb"] <= 24 and group >= 8}
    print(json.dumps(result, indent=2))
    if not args.no_save:
        print(f"saved {update_json(HERE / 'train.json', 'cuda' if args.cuda else 'cpu', result)}")


if __name__ == "__main__":
    main()
