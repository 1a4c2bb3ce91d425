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
a percentile-bootstrap 95% interval of the mean: the costs are skewed, mostly zero, and a normal
interval would run below zero). The ordering the issue asks for: cost(cheap) < cost(balanced) <
cost(best), best the most accurate, fast the quickest, each checked as a paired bootstrap over the
questions both levels answered (the difference's 95% interval wholly past zero). The per-question
rows are saved too, so the figures can be checked again without rerunning. The figures are
reported as measured, met or not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from stiva_cli import run  # noqa: E402

sys.path.insert(0, str(HERE.parent))
from stiva_tui.bench.report import bootstrap_difference, bootstrap_mean, wilson  # noqa: E402

LEVELS = ("best", "balanced", "cheap", "fast")


def accuracy_ci(rows: list[dict]) -> tuple[float, float, float]:
    """(accuracy, low, high): the Wilson 95% interval, as the bench's own reports give it."""
    correct = sum(1 for r in rows if r["correct"])
    low, high = wilson(correct, len(rows))
    return ((correct / len(rows)) if rows else 0.0, low, high)


def levels_of(items: list[dict], prefix: str) -> dict[str, dict]:
    out = {}
    for level in LEVELS:
        rows = [r for r in items if r["system"] == f"{prefix}@{level}"]
        if not rows:
            continue
        out[level] = {"n": len(rows), "accuracy": [round(v, 4) for v in accuracy_ci(rows)],
                      "cost_per_question": [round(v, 8) for v in bootstrap_mean([r["cost_usd"] for r in rows])],
                      "latency_per_question_s": [round(v, 4) for v in bootstrap_mean([r["latency_s"] for r in rows])]}
    return out


def paired(items: list[dict], prefix: str, low: str, high: str, field: str) -> list[tuple[float, float]]:
    """(low level's value, high level's value) for each question both levels answered."""
    by = {}
    for r in items:
        by.setdefault(r["system"], {})[r["id"]] = float(r[field])
    a, b = by.get(f"{prefix}@{low}", {}), by.get(f"{prefix}@{high}", {})
    return [(a[q], b[q]) for q in sorted(a.keys() & b.keys())]


def above(items: list[dict], prefix: str, low: str, high: str, field: str) -> dict:
    """Is `high`'s `field` above `low`'s, beyond the 95% interval of the paired difference?"""
    mean, lo, hi = bootstrap_difference(paired(items, prefix, low, high, field))
    return {"difference": round(mean, 8), "ci95": [round(lo, 8), round(hi, 8)], "holds": lo > 0}


def ordering(items: list[dict], prefix: str, levels: dict[str, dict]) -> dict[str, dict]:
    """The promises, each a paired bootstrap over the questions both levels answered: the
    difference's 95% interval must lie wholly on the promised side of zero."""
    if not all(level in levels for level in ("best", "balanced", "cheap")):
        return {}
    out = {"cheap_costs_less_than_balanced": above(items, prefix, "cheap", "balanced", "cost_usd"),
           "balanced_costs_less_than_best": above(items, prefix, "balanced", "best", "cost_usd")}
    for level in levels:
        if level != "best":
            out[f"best_is_more_accurate_than_{level}"] = above(items, prefix, level, "best", "correct")
    if "fast" in levels:
        for level in levels:
            if level != "fast":
                out[f"fast_is_quicker_than_{level}"] = above(items, prefix, "fast", level, "latency_s")
    return out


def short_system(system: str) -> str:
    """"conductor@cheap" as it is; "adapter:/a/path@cheap" as "adapter@cheap"."""
    kind, level = system.rsplit("@", 1)
    return f"{kind.split(':', 1)[0]}@{level}"


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
    (home / "config").mkdir()
    (home / "config" / "config.toml").write_text("[sim]\nlatency_scale = 1.0\n")  # latency is a figure here: keep the profiles'
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
    figures["prompted_ordering"] = ordering(report["items"], "conductor", figures["prompted"])
    if adapter is not None:
        figures["trained"] = levels_of(report["items"], f"adapter:{adapter}")
        figures["trained_ordering"] = ordering(report["items"], f"adapter:{adapter}", figures["trained"])
        figures["training"] = {"steps": args.train, "train_s": train_s, "adapter": str(adapter)}
    figures["items"] = [{"system": short_system(r["system"]), "id": r["id"], "correct": bool(r["correct"]),
                         "cost_usd": r["cost_usd"], "latency_s": r["latency_s"]}
                        for r in report["items"] if "@" in r["system"]]
    figures |= {"bench_s": bench_s, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    for kind in ("prompted", "trained"):
        for level, row in figures.get(kind, {}).items():
            print(f"  {kind:<8} {level:<9} accuracy {row['accuracy'][0]:.3f}  cost/q ${row['cost_per_question'][0]:.6f}"
                  f"  latency/q {row['latency_per_question_s'][0]:.2f} s  (n={row['n']})")
        if f"{kind}_ordering" in figures:
            print(f"  {kind} ordering: " + ", ".join(f"{k}={'yes' if v['holds'] else 'NO'}"
                                                   for k, v in figures[f"{kind}_ordering"].items()))
    if not args.no_save:
        (HERE / "preferences.json").write_text(json.dumps(figures, indent=2) + "\n")
        print(f"saved {HERE / 'preferences.json'}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
