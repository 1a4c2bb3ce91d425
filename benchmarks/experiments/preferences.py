"""Does the conductor follow the preference it is told? Run by hand; saves preferences.json beside itself.

    .venv/bin/python -m benchmarks.experiments.preferences                # the prompted conductor only
    .venv/bin/python -m benchmarks.experiments.preferences --adapter DIR  # and an adapter trained with --prefer-levels
    .venv/bin/python -m benchmarks.experiments.preferences --train 40     # train one first (GRPO on the CPU), then bench it
    .venv/bin/python -m benchmarks.experiments.preferences --limit 40     # fewer held-out questions
    .venv/bin/python -m benchmarks.experiments.preferences --pool tiers --train 64 --method graded-dpo \\
        --graded-seeds 24 --graded-latency-scale 0.5 --sft-weight 0.5 --prompted-limit 16 --keep \\
        --name preferences_tiers                                         # DPO on graded pairs under every level
    .venv/bin/python -m benchmarks.experiments.preferences --reread HOME --name preferences_tiers  # figures again

Everything on the SIMULATED POOL (stiva_tui/sim: four cheap specialists and one dear generalist,
or with `--pool tiers` a small, a mid and a large model that trade accuracy for price) and the
built-in `skills` suite's held-out split, through the real `stiva bench` in a fresh STIVA_HOME
(`stiva train grpo` or `stiva train graded` first, with --train; the commands' argument lists are
built in experiments/common.py), with the systems `conductor@LEVEL` (and `adapter:DIR@LEVEL`) for
every level. The
conductor on this pool is the embedded Gemma-3 270M (a sim: model cannot plan), as it is for a
user with no keys and no GPU.

For each level: accuracy (with its Wilson 95% interval), cost and latency per question (each with
a percentile-bootstrap 95% interval of the mean: the costs are skewed, mostly zero, and a normal
interval would run below zero). The ordering the issue asks for: cost(cheap) < cost(balanced) <
cost(best), best the most accurate, fast the quickest, each checked as a paired bootstrap over the
questions both levels answered (the difference's 95% interval wholly past zero). `fast` is checked
twice: on the whole run's time, and on the workers' own (each plan's critical path through its
steps, from the stored traces), since the local planner's seconds, the same under every level,
swamp the workers' on a CPU. The per-question
rows are saved too, so the figures can be checked again without rerunning. The figures are
reported as measured, met or not.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.experiments import common
from benchmarks.harness import machine, save_json, stiva_env
from stiva_tui.bench.report import bootstrap_difference, bootstrap_mean, wilson

HERE = Path(__file__).resolve().parent

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
        out[level] = {
            "n": len(rows),
            "accuracy": [round(v, 4) for v in accuracy_ci(rows)],
            "cost_per_question": [round(v, 8) for v in bootstrap_mean([r["cost_usd"] for r in rows])],
            "latency_per_question_s": [round(v, 4) for v in bootstrap_mean([r["latency_s"] for r in rows])],
        }
        workers = [r["workers_latency_s"] for r in rows if r.get("workers_latency_s") is not None]
        if workers:
            out[level]["workers_latency_per_question_s"] = [round(v, 4) for v in bootstrap_mean(workers)]
    return out


def paired(items: list[dict], prefix: str, low: str, high: str, field: str) -> list[tuple[float, float]]:
    """(low level's value, high level's value) for each question both levels answered."""
    by = {}
    for r in items:
        if r.get(field) is not None:
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
    out = {
        "cheap_costs_less_than_balanced": above(items, prefix, "cheap", "balanced", "cost_usd"),
        "balanced_costs_less_than_best": above(items, prefix, "balanced", "best", "cost_usd"),
    }
    for level in levels:
        if level != "best":
            out[f"best_is_more_accurate_than_{level}"] = above(items, prefix, level, "best", "correct")
    if "fast" in levels:
        for level in levels:
            if level != "fast":
                out[f"fast_is_quicker_than_{level}"] = above(items, prefix, "fast", level, "latency_s")
        if any(r.get("workers_latency_s") is not None for r in items):  # the plans' own time, planning left out
            for level in levels:
                if level != "fast":
                    out[f"fast_workers_are_quicker_than_{level}"] = above(
                        items, prefix, "fast", level, "workers_latency_s"
                    )
    return out


def short_system(system: str) -> str:
    """ "conductor@cheap" as it is; "adapter:/a/path@cheap" as "adapter@cheap"."""
    kind, level = system.rsplit("@", 1)
    return f"{kind.split(':', 1)[0]}@{level}"


# A simulated pool whose models trade accuracy for price (the default pool's specialists are both
# the most accurate and the cheapest on their domains, so no level can trade one for the other
# there): under the levels' rewards (core/preference.py), `best` earns most on `large`, `balanced`
# on `mid` (0.5 x its 0.34 more accuracy than small's outweighs 0.2 x its cost, half of large's) and
# `cheap` on `small` (0.45 x that cost does not). Same words of answer, so cost follows price.
TIERS = """
[[sim.models]]
name = "small"
other = 0.45
price_in = 0.1
price_out = 0.4
latency_s = 0.15
words = 40
description = "small and cheap, right about half the time"

[[sim.models]]
name = "mid"
other = 0.79
price_in = 2.5
price_out = 10.0
latency_s = 0.3
words = 40
description = "mid-sized, right about four times in five"

[[sim.models]]
name = "large"
other = 0.93
price_in = 5.0
price_out = 20.0
latency_s = 0.6
words = 40
description = "large and dear, almost always right"
"""
POOLS = {"default": "", "tiers": TIERS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adapter", metavar="DIR", help="also bench this adapter (trained with --prefer-levels)")
    parser.add_argument("--train", type=int, metavar="STEPS", help="train an adapter for STEPS steps first")
    parser.add_argument(
        "--method",
        choices=["grpo", "graded-dpo"],
        default="grpo",
        help="with --train: GRPO with sampled preferences (the default), or DPO on the train "
        "split's graded pairs under every level (stiva train --from-votes --bench ... "
        "--prefer-levels)",
    )
    parser.add_argument(
        "--pool",
        choices=sorted(POOLS),
        default="default",
        help="the default simulated pool, or `tiers`: small, mid and large models that trade "
        "accuracy for price (TIERS above)",
    )
    parser.add_argument(
        "--graded-seeds",
        type=int,
        default=8,
        metavar="K",
        help="graded-dpo: grade the train split under sim seeds 0..K-1 (by default answering at once, "
        "so K benches take seconds; see --graded-latency-scale)",
    )
    parser.add_argument(
        "--graded-latency-scale",
        type=float,
        default=0.0,
        metavar="S",
        help="graded-dpo: the sim's latency_scale while grading (default 0: no latency signal). "
        "The reward weighs each arm's latency relative to the slowest, so a scale below 1 "
        "keeps the signal and takes less time; 0.5 is enough for `fast` to learn from",
    )
    parser.add_argument(
        "--levels",
        default=",".join(LEVELS),
        help="graded-dpo: the levels the pairs are graded under (default every level; without "
        "the latency signal, fast is the balanced rule with other weights)",
    )
    parser.add_argument("--batch", type=int, default=8, help="graded-dpo: pairs a step")
    parser.add_argument("--lr", type=float, default=1e-3, help="graded-dpo: learning rate")
    parser.add_argument("--sft-weight", type=float, default=0.0, help="graded-dpo: RPO's weight (default 0)")
    parser.add_argument("--limit", type=int, help="at most this many held-out questions")
    parser.add_argument(
        "--prompted-limit",
        type=int,
        help="at most this many for the prompted conductor (its long prompt is slow on a CPU)",
    )
    parser.add_argument("--name", default="preferences", help="save NAME.json beside this script (default preferences)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (STIVA_HOME and adapter)")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument(
        "--reread",
        metavar="HOME",
        help="bench and train nothing: read the held-out benches again from a --keep run's STIVA_HOME "
        "(figures added since are computed; the training's record is kept from NAME.json)",
    )
    args = parser.parse_args()
    if args.reread:
        return reread(Path(args.reread), args.name, args.no_save)

    work = Path(tempfile.mkdtemp(prefix="stiva-prefs-"))
    home = work / "home"
    env = stiva_env(home, "[sim]\nlatency_scale = 1.0\n" + POOLS[args.pool])  # latency is a figure here
    adapter = Path(args.adapter).resolve() if args.adapter else None
    train_s = None
    training: dict = {}
    if args.train:
        adapter = work / "adapter"
        started = time.monotonic()
        lora = {"lora_r": 8, "subtask_chars": 30}
        if args.method == "grpo":
            common.train(
                env,
                "grpo",
                adapter,
                args.train,
                what="training",
                group=4,
                batch=4,
                lr=3e-4,
                prompt="compact",
                shuffle_pool=True,
                prefer_levels=",".join(LEVELS),
                **lora,
            )
        else:
            # `stiva train graded`: the train split graded under sim seeds 0..K-1 on the same pool,
            # answering at once or at a scaled latency (its own config), then DPO under every level
            grading = work / "grading.toml"
            grading.write_text(f"[sim]\nlatency_scale = {args.graded_latency_scale}\n" + POOLS[args.pool])
            summary = common.train(
                env,
                "graded",
                adapter,
                args.train,
                what="grading and training (DPO on the graded pairs under every level)",
                config=grading,
                graded_seeds=args.graded_seeds,
                bench_pairs="best",
                batch=args.batch,
                lr=args.lr,
                plan_steps=1,
                sft_weight=args.sft_weight,
                prefer_levels=args.levels,
                **lora,
            )
            log = common.train_log(adapter)
            marker = json.loads((adapter / "stiva_adapter.json").read_text())  # what the trainer wrote of the run
            training = {
                "pairs": summary["pairs"],
                "levels": args.levels.split(","),
                "graded_seeds": args.graded_seeds,
                "graded_latency_scale": args.graded_latency_scale,
                "batch": args.batch,
                "lr": args.lr,
                "sft_weight": args.sft_weight,
                "train_benches": marker.get("benches") or [],
                "loss_first5": common.mean([r["loss"] for r in log[:5]]),
                "loss_last5": common.mean([r["loss"] for r in log[-5:]]),
                "chosen_logp_last5": common.mean([r["chosen_logp"] for r in log[-5:]]),
            }
        train_s = round(time.monotonic() - started, 1)
    started = time.monotonic()
    items = bench(env, [f"conductor@{level}" for level in LEVELS], args.prompted_limit or args.limit, home)
    if adapter is not None:
        items += bench(env, [f"adapter:{adapter}@{level}" for level in LEVELS], args.limit, home)
    bench_s = round(time.monotonic() - started, 1)
    figures = build_figures(
        items,
        None if adapter is None else f"adapter:{adapter}",
        "simulated pool" + (f" ({args.pool}: {POOL_WORDS})" if args.pool == "tiers" else ""),
        {"method": args.method, "steps": args.train, "train_s": train_s, "adapter": str(adapter)} | training,
        bench_s,
    )
    show_and_save(figures, args.name, args.no_save)
    if args.keep:
        print(f"kept {work} (STIVA_HOME {home}, adapter {adapter})")
    else:
        shutil.rmtree(work, ignore_errors=True)


def build_figures(items: list[dict], adapter: str | None, pool: str, training: dict, bench_s: float | None) -> dict:
    """The saved figures of the benched `items` (the prompted conductor's, and `adapter`'s)."""
    figures = {
        "pool": pool,
        "suite": "skills:heldout",
        "split": "heldout",
        "conductor": "embedded Gemma-3 270M, prompted",
        "prompted": levels_of(items, "conductor"),
    }
    figures["prompted_ordering"] = ordering(items, "conductor", figures["prompted"])
    if adapter is not None:
        figures["trained"] = levels_of(items, adapter)
        figures["trained_ordering"] = ordering(items, adapter, figures["trained"])
        figures["training"] = training
        figures["trained_picks"] = picks(items)
    figures["items"] = [
        {
            "system": short_system(r["system"]),
            "id": r["id"],
            "correct": bool(r["correct"]),
            "cost_usd": r["cost_usd"],
            "latency_s": r["latency_s"],
            "workers_latency_s": r.get("workers_latency_s"),
            "route": r.get("route"),
        }
        for r in items
        if "@" in r["system"]
    ]
    figures |= {
        "bench_s": bench_s,
        "machine": machine(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    return figures


def show_and_save(figures: dict, name: str, no_save: bool) -> None:
    for kind in ("prompted", "trained"):
        for level, row in figures.get(kind, {}).items():
            workers = row.get("workers_latency_per_question_s")
            print(
                f"  {kind:<8} {level:<9} accuracy {row['accuracy'][0]:.3f}  cost/q ${row['cost_per_question'][0]:.6f}"
                f"  latency/q {row['latency_per_question_s'][0]:.2f} s"
                + (f"  workers {workers[0]:.3f} s" if workers else "")
                + f"  (n={row['n']})"
            )
        if f"{kind}_ordering" in figures:
            print(
                f"  {kind} ordering: "
                + ", ".join(f"{k}={'yes' if v['holds'] else 'NO'}" for k, v in figures[f"{kind}_ordering"].items())
            )
    if not no_save:
        print(f"saved {save_json(HERE / f'{name}.json', figures)}")


def reread(home: Path, name: str, no_save: bool) -> None:
    """The figures again from the held-out benches kept in `home`: the prompted conductor's bench and
    the adapter's (the benches of `conductor@…` and `adapter:…@…` systems), and the training's
    record, pool and bench time from NAME.json beside this script."""
    from stiva_tui.store import Store

    with Store.open(home / "data" / "stiva.db", reads_only=True) as store:
        benches = [b for b in store.list_benches() if any("@" in s for s in b.systems)]
    items: list[dict] = []
    adapter = None
    for bench in benches:
        items += read_items(home, bench.id)
        adapter = adapter or next((s.rsplit("@", 1)[0] for s in bench.systems if s.startswith("adapter:")), None)
    before = json.loads((HERE / f"{name}.json").read_text())
    figures = build_figures(items, adapter, before["pool"], before.get("training", {}), before.get("bench_s"))
    figures["when"] = before["when"] + f" (figures read again {time.strftime('%Y-%m-%d %H:%M:%S')})"
    show_and_save(figures, name, no_save)


POOL_WORDS = "small, mid and large models trading accuracy for price"


def bench(env: dict, systems: list[str], limit: int | None, home: Path) -> list[dict]:
    """The held-out split benched on `systems`; its report's items, each with the model its plan used."""
    summary = common.bench(env, "heldout", ",".join(systems), limit=limit)
    return read_items(home, summary["bench_id"])


def read_items(home: Path, bench_id: str) -> list[dict]:
    """A bench's report items from `home` (STIVA_HOME), each with `route` (the models its plan used)
    and `workers_latency_s` (the plan's own time: its steps' critical path, the planner's left out)."""
    report = json.loads((home / "data" / "bench" / bench_id / "report.json").read_text())
    from stiva_tui.store import Store
    from stiva_tui.train.votes import trace_plan

    with Store.open(home / "data" / "stiva.db", reads_only=True) as store:
        for item in report["items"]:
            try:
                trace = store.get_trace(item["run_id"]) if item.get("run_id") else None
                plan = trace_plan(trace) if trace is not None else "no run"
            except Exception:  # noqa: BLE001 - a run that cannot be read is counted as such
                trace, plan = None, "unreadable"
            item["route"] = plan if isinstance(plan, str) else ">".join(plan.models)
            item["workers_latency_s"] = workers_latency(trace) if trace is not None else None
    return report["items"]


def workers_latency(trace) -> float:
    """The seconds a run's workers took: per round, the longest path through its steps (a step starts
    when the steps it reads are done), summed over the rounds. What `fast` promises to shorten; the
    planning time beside it is the same planner's under every level."""
    total = 0.0
    for round_ in trace.rounds:
        done: dict[int, float] = {}
        for step in sorted(round_.steps, key=lambda s: s.index):
            done[step.index] = step.latency_s + max((done.get(j, 0.0) for j in step.access), default=0.0)
        total += max(done.values(), default=0.0)
    return round(total, 4)


def picks(items: list[dict]) -> dict[str, dict[str, int]]:
    """Per system@level, how many plans used each model sequence."""
    out: dict[str, dict[str, int]] = {}
    for item in items:
        by = out.setdefault(short_system(item["system"]), {})
        by[item["route"]] = by.get(item["route"], 0) + 1
    return out


if __name__ == "__main__":
    main()
