"""Does the conductor follow the preference it is told? Run by hand; saves benchmarks/preferences.json.

    .venv/bin/python benchmarks/preferences.py                     # the prompted conductor only
    .venv/bin/python benchmarks/preferences.py --adapter DIR       # and an adapter trained with --prefer-levels
    .venv/bin/python benchmarks/preferences.py --train 40          # train one first (GRPO on the CPU), then bench it
    .venv/bin/python benchmarks/preferences.py --limit 40          # fewer held-out questions

Everything on the SIMULATED POOL (stiva_tui/sim: four cheap specialists and one dear generalist)
and the built-in `skills` suite's held-out split, through the real `stiva bench` in a fresh
STIVA_HOME, with the systems `conductor@LEVEL` (and `adapter:DIR@LEVEL`) for every level. The
conductor on this pool is the embedded Gemma-3 270M (a sim: model cannot plan), as it is for a
user with no keys and no GPU.

For each level: accuracy (with its Wilson 95% interval), cost and latency per question (each with
a normal 95% interval of the mean over the questions). The ordering the issue asks for, checked
with non-overlapping intervals: cost(cheap) < cost(balanced) < cost(best), and best the most
accurate. The figures are reported as measured, met or not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from stiva_cli import run  # noqa: E402
LEVELS = ("best", "balanced", "cheap", "fast")


def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """(mean, low, high): a normal 95% interval of the mean."""
    if not values:
        return (0.0, 0.0, 0.0)
    mean = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return (mean, mean - half, mean + half)


def wilson(correct: int, n: int) -> tuple[float, float, float]:
    if not n:
        return (0.0, 0.0, 0.0)
    p, z = correct / n, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (p, centre - half, centre + half)


def below(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """a is below b beyond both 95% intervals."""
    return a[2] < b[1]


def levels_of(items: list[dict], prefix: str) -> dict[str, dict]:
    out = {}
    for level in LEVELS:
        rows = [r for r in items if r["system"] == f"{prefix}@{level}"]
        if not rows:
            continue
        accuracy = wilson(sum(r["correct"] for r in rows), len(rows))
        cost = mean_ci([r["cost_usd"] for r in rows])
        latency = mean_ci([r["latency_s"] for r in rows])
        out[level] = {"n": len(rows), "accuracy": [round(v, 4) for v in accuracy],
                      "cost_per_question": [round(v, 8) for v in cost],
                      "latency_per_question_s": [round(v, 4) for v in latency]}
    return out


def ordering(rows: dict[str, dict]) -> dict[str, bool]:
    if not all(level in rows for level in ("best", "balanced", "cheap")):
        return {}
    cost = {k: tuple(v["cost_per_question"]) for k, v in rows.items()}
    accuracy = {k: tuple(v["accuracy"]) for k, v in rows.items()}
    return {
        "cheap_costs_less_than_balanced": below(cost["cheap"], cost["balanced"]),
        "balanced_costs_less_than_best": below(cost["balanced"], cost["best"]),
        "best_is_the_most_accurate": all(below(accuracy[k], accuracy["best"]) for k in accuracy if k != "best"),
        **({"fast_is_the_quickest": all(below(tuple(rows["fast"]["latency_per_question_s"]),
                                              tuple(v["latency_per_question_s"])) for k, v in rows.items() if k != "fast")}
           if "fast" in rows else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adapter", metavar="DIR", help="also bench this adapter (trained with --prefer-levels)")
    parser.add_argument("--train", type=int, metavar="STEPS", help="train an adapter for STEPS steps first")
    parser.add_argument("--limit", type=int, help="at most this many held-out questions")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="stiva-prefs-"))
    home = work / "home"
    home.mkdir()
    (home / "config.toml").write_text("[sim]\nlatency_scale = 1.0\n")  # latency is a figure here: keep the profiles'
    from stiva_tui import paths

    env = {**os.environ, "STIVA_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "STIVA_MODEL_CACHE": str(paths.model_cache_dir())}
    adapter = Path(args.adapter).resolve() if args.adapter else None
    train_s = None
    if args.train:
        adapter = work / "adapter"
        started = time.monotonic()
        run(["train", "skills", "--pool", "sim", "--split", "train", "--base", "embedded", "--out", str(adapter),
             "--steps", str(args.train), "--group", "4", "--batch", "4", "--lr", "3e-4", "--lora-r", "8",
             "--lora-targets", "all", "--prompt", "compact", "--subtask-chars", "30", "--shuffle-pool",
             "--prefer-levels", ",".join(LEVELS), "--save-every", str(args.train), "--json"], env, "training")
        train_s = round(time.monotonic() - started, 1)
    systems = [f"conductor@{level}" for level in LEVELS]
    if adapter is not None:
        systems += [f"adapter:{adapter}@{level}" for level in LEVELS]
    started = time.monotonic()
    bench = run(["bench", "skills", "--pool", "sim", "--split", "heldout", "--concurrency", "4", "--json",
                 *(["--limit", str(args.limit)] if args.limit else []), "--systems", ",".join(systems)], env, "bench")
    bench_s = round(time.monotonic() - started, 1)
    summary = json.loads(bench.stdout)
    report = json.loads((home / "data" / "bench" / summary["bench_id"] / "report.json").read_text())
    figures = {"pool": "simulated pool", "suite": summary["suite"], "split": "heldout",
               "conductor": "embedded Gemma-3 270M, prompted", "prompted": levels_of(report["items"], "conductor")}
    figures["prompted_ordering"] = ordering(figures["prompted"])
    if adapter is not None:
        figures["trained"] = levels_of(report["items"], f"adapter:{adapter}")
        figures["trained_ordering"] = ordering(figures["trained"])
        figures["training"] = {"steps": args.train, "train_s": train_s, "adapter": str(adapter)}
    figures |= {"bench_s": bench_s, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    for kind in ("prompted", "trained"):
        for level, row in figures.get(kind, {}).items():
            print(f"  {kind:<8} {level:<9} accuracy {row['accuracy'][0]:.3f}  cost/q ${row['cost_per_question'][0]:.6f}"
                  f"  latency/q {row['latency_per_question_s'][0]:.2f} s  (n={row['n']})")
        if f"{kind}_ordering" in figures:
            print(f"  {kind} ordering: " + ", ".join(f"{k}={'yes' if v else 'NO'}"
                                                   for k, v in figures[f"{kind}_ordering"].items()))
    if not args.no_save:
        (HERE / "preferences.json").write_text(json.dumps(figures, indent=2) + "\n")
        print(f"saved {HERE / 'preferences.json'}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    main()
