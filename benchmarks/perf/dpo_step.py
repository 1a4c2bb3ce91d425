"""Seconds per `stiva train dpo` step on the CPU, with and without scoring only the
plans' positions through the LM head (run by hand; prints and saves dpo_step.json beside itself).

    .venv/bin/python -m benchmarks.perf.dpo_step                 # 4 steps of 8 pairs, before vs after
    .venv/bin/python -m benchmarks.perf.dpo_step --steps 6 --batch 8

The embedded Gemma-3 270M learns graded pairs of the built-in `skills` suite on the SIMULATED
POOL, with the options of `benchmarks/experiments/learning.py --method graded-dpo`: a bench of every
single model on the train split (`direct:*`), then `stiva train dpo --bench ID --bench-pairs
best --prompt compact --lora-targets all --lora-r 8 --plan-steps 1`, through the real command in a
fresh STIVA_HOME (the embedded model's converted weights are shared with the usual cache). Each
configuration runs in a process of its own, one after the other, so that their ratio is from one
run of this machine:

- "before": TRL's fused LM head projects every position of the batch (prompts and padding too)
  through Gemma's 262k-wide head, as it does without Triton. The product has no switch for it:
  this script starts the command with TRL's head left as TRL has it (BEFORE below);
- "after": the command as it is: the plans' positions only (train/common.py,
  score_valid_positions_only), for the policy's pass and the reference's.

The seconds are train_log.jsonl's per step (forward and backward of 2 x batch sequences, the
reference pass, the optimiser); medians over the steps after the first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import ROOT, cli_args, machine, save_json, stiva_env

HERE = Path(__file__).resolve().parent

# `stiva ...` with TRL's fused head left as TRL has it, in its own process (argv: the command's)
BEFORE = """
import sys
from stiva_tui.train import common
common.score_valid_positions_only = lambda: False
from stiva_tui.cli import entry
sys.argv[0] = "stiva"
entry()
"""


def stiva_module(args: list[str], env: dict, what: str, before: bool = False) -> subprocess.CompletedProcess:
    start = ["-c", BEFORE] if before else ["-m", "stiva_tui.cli"]
    done = subprocess.run([sys.executable, *start, *args], env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{what}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return done


def one_run(name: str, before: bool, bench_id: str, env: dict, args, work: Path) -> dict:
    out = work / f"out-{name}"
    started = time.monotonic()
    stiva_module(
        cli_args(
            "train",
            "dpo",
            pool="sim",
            bench=bench_id,
            bench_pairs="best",
            base="embedded",
            out=out,
            steps=args.steps,
            batch=args.batch,
            lr="5e-4",
            lora_r=8,
            lora_targets="all",
            plan_steps=1,
            subtask_chars=16,
            save_every=args.steps,
            seed=args.seed,
            json=True,
        ),
        env,
        name,
        before,
    )
    wall = time.monotonic() - started
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines() if line.strip()]
    steps = [{k: row[k] for k in ("step", "seconds", "loss")} for row in log]
    median = round(statistics.median(r["seconds"] for r in (steps[1:] or steps)), 3)
    print(f"{name}: {median:.1f} s a step; wall {wall:.0f} s", flush=True)
    return {"name": name, "wall_s": round(wall, 1), "median_step_s": median, "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8, help="pairs a step (2 x batch sequences)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    import torch

    work = Path(tempfile.mkdtemp(prefix="stiva-dpo-step-"))
    env = stiva_env(work / "home", "[sim]\nlatency_scale = 0.0\n") | {"PYTHONPATH": str(ROOT)}
    bench = json.loads(
        stiva_module(
            cli_args(
                "bench", "skills", pool="sim", split="train", limit=40, systems="direct:*", concurrency=4, json=True
            ),
            env,
            "graded bench",
        ).stdout
    )
    configs = {"before": True, "after": False}
    runs = [one_run(name, before, bench["bench_id"], env, args, work) for name, before in configs.items()]
    by_name = {r["name"]: r["median_step_s"] for r in runs}
    result = {
        "what": "seconds per `stiva train dpo --bench ID --bench-pairs best --base embedded --prompt compact "
        "--lora-targets all --lora-r 8 --plan-steps 1` step on the simulated pool's graded train split "
        "(40 items), median of the steps after the first",
        "batch_pairs": args.batch,
        "steps": args.steps,
        "cpu_threads": torch.get_num_threads(),
        "machine": machine(),
        "runs": runs,
        "speedup": round(by_name["before"] / by_name["after"], 2) if by_name["after"] else None,
    }
    print("speedup (before / after):", result["speedup"])
    if not args.no_save:
        print(f"saved {save_json(HERE / 'dpo_step.json', result)}")


if __name__ == "__main__":
    main()
