"""Routing measured on real models' recorded answers: ZeroEval's 11 models on GSM8K, MATH level 5
and CRUXEval (benchmarks/data/zeroeval.records.jsonl.gz, Apache-2.0; see its NOTICE).

    python -m benchmarks.experiments.real_routing [--seeds 3] [--nl-items 20] [--e2e-items 100]

What it does, all through the product:
1. `stiva bench import` the records with `--prices benchmarks/data/zeroeval_prices.toml` (list
   prices, so costs are estimates of list prices) into a fresh STIVA_HOME; half of the items are
   held out by a hash of the id.
2. `stiva train router SUITE --split train --pool replay:ID --seed S` for each seed (tfidf).
3. On the held-out half, from the imported bench's recorded grades (no call, no re-grade): every
   single model, `oracle`, `random` (its expectation), `knn` and `best-single` (bench/derived.py)
   and each seed's router at every level of `--prefer`'s scale (cost weight 0 .. 0.45 in tenths of
   the way, plus the named levels), each router's AIQ against the single models' hull.
4. Checks that path against the product's own: `stiva bench --pool replay:ID --systems router:DIR@LEVEL`
   on the first `--e2e-items` held-out items must give the same accuracy.
5. The decision's time: `Router.decide` on 50 held-out questions, one at a time (median, p95).
6. The prompted NL conductor (the embedded 270M planning over the 11 models) on the first
   `--nl-items` held-out items, through `stiva bench --systems conductor` (slow on a CPU: a sample).
7. With `--nl-train-steps N`: the trained NL conductor, `stiva train graded` on the train half of
   the same replay (the embedded 270M, N DPO steps of `--nl-batch` pairs; CUDA where there is one),
   benched as `adapter:DIR` on the same held-out items. On 2 CPU cores one step of 4 pairs took
   86 s and 10 GB (11 models' prompt, 262k-token vocabulary): a GPU job.

Saves real_routing.json and real_routing.png beside itself.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from benchmarks.harness import HERE, ROOT, cli_args, machine, save_json, stiva, stiva_env, temporary_home

OUT = HERE / "experiments" / "real_routing.json"
PLOT = HERE / "experiments" / "real_routing.png"
DATA = ROOT / "benchmarks" / "data"
LEVEL_NAMES = ("best", "balanced", "cheap", "fast")
SWEEP = [round(x / 10, 1) for x in range(11)]  # --prefer 0 .. 1: cost weight 0 .. 0.45


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--nl-items", type=int, default=20, help="held-out items the NL conductor answers (0: none)")
    parser.add_argument("--e2e-items", type=int, default=100)
    parser.add_argument("--nl-train-steps", type=int, default=0, help="train the NL conductor by graded DPO (0: not)")
    parser.add_argument("--nl-batch", type=int, default=4, help="pairs per graded DPO step")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    with temporary_home("stiva-real-routing-") as home:
        env = stiva_env(home)
        figures = run(home, env, args)
    figures["machine"] = machine()
    for key in (
        "best_single",
        "oracle",
        "aiq_single_models",
        "router_summary",
        "end_to_end",
        "decision_s",
        "nl_conductor",
        "nl_conductor_trained",
    ):
        print(f"{key}: {json.dumps(figures.get(key))}")
    print("baselines:", {b: (v["levels"]["best"], v["aiq"]) for b, v in figures["baselines"].items()})
    if not args.no_save:
        save_json(OUT, figures)
        plot(figures)
        print(f"saved {OUT.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")


def run(home: Path, env: dict, args) -> dict:
    import os

    os.environ.update({k: env[k] for k in ("STIVA_HOME",)})
    imported = json.loads(
        stiva(
            *cli_args("bench", "import", DATA / "zeroeval.records.jsonl.gz", name="zeroeval",
                      prices=DATA / "zeroeval_prices.toml", json=True),
            env=env, what="import", timeout=None,
        ).stdout
    )  # fmt: skip
    suite, bench = imported["suite"], imported["bench"]
    routers = []
    for seed in range(args.seeds):
        folder = home / f"router-{seed}"
        summary = json.loads(
            stiva(
                *cli_args("train", "router", suite, split="train", pool=f"replay:{bench}", features="tfidf",
                          seed=seed, out=folder, json=True),
                env=env, what=f"train router seed {seed}", timeout=None,
            ).stdout
        )  # fmt: skip
        routers.append((seed, folder, summary))

    from stiva_tui.bench.derived import aiq, fit_routing
    from stiva_tui.conductor.router import load_router
    from stiva_tui.core.preference import LEVELS, parse_preference
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.store import Store

    items = load_suite(suite).items
    questions = {item.id: item.question for item in items}
    splits = {item.id: str(item.meta.get("split")) for item in items}
    domains = {item.id: str(item.meta.get("domain")) for item in items}
    store = Store.open()
    try:
        records = [r for r in store.bench_items(bench) if r.status == "graded"]
    finally:
        store.close()
    direct = [f"direct:{m}" for m in imported["models"]]
    grade: dict[str, dict[str, tuple[float, float]]] = {}
    for r in records:
        grade.setdefault(r.item_id, {})[r.system] = (float(r.correct), r.cost_usd)
    heldout = [item.id for item in items if splits[item.id] != "train"]

    def point(picks: list[str]) -> dict:
        right = [grade[i][s][0] for i, s in zip(heldout, picks)]
        cost = [grade[i][s][1] for i, s in zip(heldout, picks)]
        return {"accuracy": round(sum(right) / len(right), 4), "usd_per_1000": round(1000 * sum(cost) / len(cost), 4)}

    singles = {s.removeprefix("direct:"): point([s] * len(heldout)) for s in direct}
    best_single = max(singles, key=lambda m: (singles[m]["accuracy"], -singles[m]["usd_per_1000"]))
    oracle_picks = []
    for i in heldout:
        right = [s for s in direct if grade[i][s][0] >= 0.5]
        pool = right or direct
        oracle_picks.append(min(pool, key=lambda s: grade[i][s][1]))
    rng = random.Random(0)
    figures: dict = {
        "what": "routing on real models' recorded answers: ZeroEval (11 models, GSM8K + MATH level 5 + CRUXEval), "
        "held-out half by a hash of the id; graded by each answer's recorded ZeroEval score; cost = estimated "
        "tokens (characters / 4) x list prices (benchmarks/data/zeroeval_prices.toml)",
        "data": {
            "items": imported["items"],
            "heldout_items": len(heldout),
            "train_items": imported["items"] - len(heldout),
            "models": imported["models"],
            "heldout_by_domain": {d: sum(domains[i] == d for i in heldout) for d in sorted(set(domains.values()))},
        },
        "singles": singles,
        "best_single": {"model": best_single, **singles[best_single]},
        "oracle": point(oracle_picks),
        "random_expectation": {
            "accuracy": round(statistics.mean(p["accuracy"] for p in singles.values()), 4),
            "usd_per_1000": round(statistics.mean(p["usd_per_1000"] for p in singles.values()), 4),
        },
        "random_draw": point([rng.choice(direct) for _ in heldout]),
    }
    single_points = [(p["usd_per_1000"], p["accuracy"]) for p in singles.values()]
    low, high = min(x for x, _ in single_points), max(x for x, _ in single_points)
    cheapest = min(single_points)
    figures["aiq_single_models"] = round(aiq(single_points, low, high), 4)
    routing = fit_routing(records, direct, questions, splits)
    baselines = {}
    for base in ("knn", "best-single"):
        levels = {}
        for level in (*LEVEL_NAMES, *SWEEP):
            name = f"{base}@{level}"
            levels[str(level)] = point(routing.picks(name)) if routing.heldout_ids == sorted(heldout) else None
        pts = [(p["usd_per_1000"], p["accuracy"]) for p in levels.values() if p]
        baselines[base] = {"levels": levels, "aiq": round(aiq([cheapest, *pts], low, high), 4)}
    figures["baselines"] = baselines
    if routing.heldout_ids != sorted(heldout):
        figures["baselines_note"] = "knn/best-single held-out items differ from the script's; not compared"

    router_rows = []
    for seed, folder, summary in routers:
        router = load_router(folder)
        chances = router.predict_rows(router.represent([questions[i] for i in heldout]))
        levels = {}
        for level in (*LEVEL_NAMES, *SWEEP):
            preference = parse_preference(str(level)) if not isinstance(level, str) else LEVELS[level]
            levels[str(level)] = point(router_picks(router, chances, preference))
        pts = [(p["usd_per_1000"], p["accuracy"]) for p in levels.values()]
        router_rows.append(
            {
                "seed": seed,
                "train_s": summary["train_s"],
                "best_epoch": summary["best_epoch"],
                "parameters": summary["parameters"],
                "levels": levels,
                "aiq": round(aiq([cheapest, *pts], low, high), 4),
            }
        )
    figures["routers"] = router_rows
    figures["router_summary"] = summarize(router_rows, figures["best_single"])

    # the product's own path on the first items: stiva bench with router:DIR@LEVEL on the replay
    e2e = heldout[: args.e2e_items]
    folder = routers[0][1]
    report = json.loads(
        stiva(
            *cli_args("bench", suite, split="heldout", limit=len(e2e), pool=f"replay:{bench}", concurrency=4,
                      systems=f"router:{folder},router:{folder}@balanced", json=True),
            env=env, what="bench router end to end", timeout=None,
        ).stdout
    )  # fmt: skip
    router = load_router(folder)
    chances = router.predict_rows(router.represent([questions[i] for i in e2e]))
    expect = {}
    for level in ("best", "balanced"):
        picks = router_picks(router, chances, LEVELS[level])
        expect[level] = round(sum(grade[i][s][0] for i, s in zip(e2e, picks)) / len(e2e), 4)
    got = {
        row["system"].rsplit("@", 1)[1] if "@" in row["system"] else "best": row["accuracy"]
        for row in report["systems"]
    }
    figures["end_to_end"] = {
        "items": len(e2e),
        "stiva_bench_accuracy": got,
        "in_process_accuracy": expect,
        "agree": all(abs(got[k] - expect[k]) < 1e-9 for k in expect),
    }

    # the decision's own time, one question at a time
    times = []
    for question in [questions[i] for i in heldout[:50]]:
        start = time.perf_counter()
        router.decide(question, [f"replay:{m}" for m in router.models], LEVELS["balanced"])
        times.append(time.perf_counter() - start)
    times.sort()
    figures["decision_s"] = {
        "representation": "tfidf",
        "median": round(statistics.median(times), 4),
        "p95": round(times[int(0.95 * (len(times) - 1))], 4),
        "n": len(times),
    }

    if args.nl_items:
        nl_items = heldout[: args.nl_items]
        same_items = {
            "same_items_best_single": round(
                sum(grade[i][f"direct:{best_single}"][0] for i in nl_items) / len(nl_items), 4
            ),
            "same_items_router_best": expect_on(router, questions, grade, nl_items, LEVELS["best"]),
        }
        figures["nl_conductor"] = nl_bench(suite, bench, env, args.nl_items, "conductor", same_items)
        if args.nl_train_steps:
            adapter = home / "nl-adapter"
            started = time.monotonic()
            trained = stiva(
                *cli_args("train", "graded", suite, split="train", pool=f"replay:{bench}",
                          base="embedded", out=adapter, steps=args.nl_train_steps, batch=args.nl_batch, json=True),
                env=env, timeout=None,
            )  # fmt: skip
            if trained.returncode != 0:
                figures["nl_conductor_trained"] = {"failed": trained.stderr.strip().splitlines()[-1:]}
            else:
                figures["nl_conductor_trained"] = {
                    **nl_bench(suite, bench, env, args.nl_items, f"adapter:{adapter}", same_items),
                    "train_s": round(time.monotonic() - started, 1),
                    "train": {k: v for k, v in json.loads(trained.stdout).items() if k in ("steps", "pairs", "batch")},
                }
    return figures


def nl_bench(suite: str, bench: str, env: dict, items: int, system: str, same_items: dict) -> dict:
    """`stiva bench --systems SYSTEM` on the first held-out items of the replay: accuracy, cost and
    time, beside the best single model's and the router's accuracy on the same items."""
    started = time.monotonic()
    print(f"$ stiva bench ... --systems {system} --limit {items}", flush=True)
    done = stiva(
        *cli_args("bench", suite, split="heldout", limit=items, pool=f"replay:{bench}", concurrency=2,
                  systems=system, json=True),
        env=env, timeout=None,
    )  # fmt: skip
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1:]}
    row = json.loads(done.stdout)["systems"][0]
    return {
        "items": items,
        "accuracy": row["accuracy"],
        "usd_per_1000": round(1000 * row["cost_per_question"], 4),
        "seconds": round(time.monotonic() - started, 1),
        **same_items,
    }


def router_picks(router, chances, preference) -> list[str]:
    """The product's choice (Router.choose, the preference's weights on the router's recorded costs)
    for each row of predicted chances, as the bench's direct: system names."""
    return [
        "direct:" + router.choose({m: float(p) for m, p in zip(router.models, row)}, preference).model
        for row in chances
    ]


def expect_on(router, questions, grade, item_ids, preference) -> float:
    chances = router.predict_rows(router.represent([questions[i] for i in item_ids]))
    picks = router_picks(router, chances, preference)
    return round(sum(grade[i][s][0] for i, s in zip(item_ids, picks)) / len(item_ids), 4)


def summarize(rows: list[dict], best: dict) -> dict:
    """The median over seeds of each named level, with the range, against the best single model."""
    out = {}
    for level in LEVEL_NAMES:
        acc = [r["levels"][level]["accuracy"] for r in rows]
        usd = [r["levels"][level]["usd_per_1000"] for r in rows]
        out[level] = {
            "accuracy_median": round(statistics.median(acc), 4),
            "accuracy_range": [min(acc), max(acc)],
            "usd_per_1000_median": round(statistics.median(usd), 4),
            "usd_per_1000_range": [min(usd), max(usd)],
            "points_vs_best_single": round(100 * (statistics.median(acc) - best["accuracy"]), 2),
            "cost_share_of_best_single": round(statistics.median(usd) / best["usd_per_1000"], 3),
        }
    aiqs = [r["aiq"] for r in rows]
    out["aiq_median"] = round(statistics.median(aiqs), 4)
    out["aiq_range"] = [min(aiqs), max(aiqs)]
    return out


def plot(figures: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, p in figures["singles"].items():
        ax.scatter(p["usd_per_1000"], p["accuracy"], color="grey")
        ax.annotate(name.split("-20")[0][:22], (p["usd_per_1000"], p["accuracy"]), fontsize=7)
    for base, color in (("knn", "tab:orange"), ("best-single", "tab:green")):
        pts = sorted((p["usd_per_1000"], p["accuracy"]) for p in figures["baselines"][base]["levels"].values() if p)
        ax.plot(*zip(*pts), "o--", color=color, label=f"{base} (AIQ {figures['baselines'][base]['aiq']:.3f})")
    row = figures["routers"][0]
    pts = sorted((p["usd_per_1000"], p["accuracy"]) for p in row["levels"].values())
    ax.plot(*zip(*pts), "o-", color="tab:blue", label=f"router, seed 0 (AIQ {row['aiq']:.3f})")
    o = figures["oracle"]
    ax.scatter(o["usd_per_1000"], o["accuracy"], marker="*", s=120, color="black", label="oracle")
    ax.set_xscale("log")
    ax.set_xlabel("USD per 1,000 questions (estimated tokens x list prices; log)")
    ax.set_ylabel("accuracy on the held-out half")
    ax.set_title("RECORDED POOL: ZeroEval, 11 models, held-out half")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)


if __name__ == "__main__":
    main()
