"""Seconds per `stiva train` step on the CPU, and where they go (run by hand; prints and saves
train_step.json beside itself).

    .venv/bin/python -m benchmarks.perf.train_step                 # 3 steps, before vs after
    .venv/bin/python -m benchmarks.perf.train_step --steps 4

The embedded Gemma-3 270M learns the built-in `skills` suite (train split) on the simulated pool,
with the options of the learning run (benchmarks/experiments/learning.py): --prompt compact --shuffle-pool
--lora-targets all, batch 2 x group 4, through the real command in a fresh STIVA_HOME (the
embedded model's converted weights are shared with the usual cache). Each configuration runs in
a process of its own, one after the other, so that their ratio is from one run of this machine:

- "before": the step's 8 plans, each under its own order of the pool, so its own prompt, sampled
  one generation each, and TRL's fused LM head projecting every position of the batch, prompts
  and padding too, as it does without Triton. The product has no switch for these: this script
  starts the command with both undone in its process (BEFORE below: the conductor's batched
  sampler hidden, TRL's head left as TRL has it);
- "after": the command as it is: the 8 plans in one left-padded generation, and the head projects
  the completions' positions only (train/common.py, score_valid_positions_only).

Per step (train_log.jsonl): generate_s (sampling the plans under the grammar), rollout_s (running
them on the simulated pool, grading), update_s (the rest of the step: TRL's loss, forward and
backward, the optimiser). Medians over the steps after the first (the first warms caches up).
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

PARTS = ("generate_s", "rollout_s", "update_s")

# `stiva ...` with the "before" configuration applied in its own process (argv: the command's)
BEFORE = """
import sys
from stiva_tui.conductor.local import HFConductor
from stiva_tui.train import common
del HFConductor.sample_each_sync  # the rollout then samples one generation per plan
common.score_valid_positions_only = lambda: False  # TRL's fused head as TRL has it
from stiva_tui.cli import entry
sys.argv[0] = "stiva"
entry()
"""


def one_run(name: str, before: bool, args, work: Path) -> dict:
    env = stiva_env(work / f"home-{name}", "[sim]\nlatency_scale = 0.0\n") | {"PYTHONPATH": str(ROOT)}
    out = work / f"out-{name}"
    start = ["-c", BEFORE] if before else ["-m", "stiva_tui.cli"]
    command = [
        sys.executable,
        *start,
        *cli_args(
            "train",
            "grpo",
            "skills",
            pool="sim",
            split="train",
            base="embedded",
            prompt="compact",
            shuffle_pool=True,
            lora_targets="all",
            lora_r=8,
            lr="1e-3",
            steps=args.steps,
            batch=args.batch,
            group=args.group,
            seed=args.seed,
            save_every=args.steps,
            out=out,
            json=True,
        ),
    ]
    started = time.monotonic()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}")
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines() if line.strip()]
    steps = [{k: row[k] for k in ("step", *PARTS, "reward_mean", "loss", "valid_plan_rate")} for row in log]
    for row in steps:
        row["step_s"] = round(sum(row[k] for k in PARTS), 3)
    later = steps[1:] or steps
    median = {k: round(statistics.median(r[k] for r in later), 3) for k in (*PARTS, "step_s")}
    print(
        f"{name}: {median['step_s']:.1f} s a step (generate {median['generate_s']:.1f}, rollouts "
        f"{median['rollout_s']:.1f}, update {median['update_s']:.1f}); wall {wall:.0f} s",
        flush=True,
    )
    return {"name": name, "wall_s": round(wall, 1), "median": median, "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=["before", "after"], help="one configuration only")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    import torch

    work = Path(tempfile.mkdtemp(prefix="stiva-train-step-"))
    configs = {"before": True, "after": False}
    runs = [one_run(name, before, args, work) for name, before in configs.items() if args.only in (None, name)]
    result = {
        "what": "seconds per `stiva train grpo skills --pool sim --base embedded --prompt compact --shuffle-pool "
        "--lora-targets all --lora-r 8` step, median of the steps after the first",
        "batch": args.batch,
        "group": args.group,
        "steps": args.steps,
        "cpu_threads": torch.get_num_threads(),
        "machine": machine(),
        "runs": runs,
    }
    by_name = {r["name"]: r["median"] for r in runs}
    if len(by_name) == 2:
        before, after = by_name["before"], by_name["after"]
        result["speedup"] = {k: round(before[k] / after[k], 2) if after[k] else None for k in (*PARTS, "step_s")}
        print("speedup (before / after):", result["speedup"])
    if not args.no_save:
        print(f"saved {save_json(HERE / 'train_step.json', result)}")


if __name__ == "__main__":
    main()
