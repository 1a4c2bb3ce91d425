"""Routing and workflows measured on real models' recorded answers: ZeroEval's 11 models on GSM8K,
MATH level 5 and CRUXEval (benchmarks/data/zeroeval.records.jsonl.gz, Apache-2.0; see its NOTICE).

    python -m benchmarks.experiments.real_routing [--seeds 3] [--nl-items 12] [--concurrency 16]

What it does, all through the product:
1. `stiva bench import` the records with `--prices benchmarks/data/zeroeval_prices.toml` (list
   prices times each answer's recorded token counts) into a fresh STIVA_HOME; half of the items
   are held out by a hash of the id.
2. `stiva train router SUITE --split train --pool replay:ID --seed S` for each seed (tfidf): the
   router that chooses, per question, one model, an agreement cascade or a vote.
3. One `stiva bench SUITE --split heldout --pool replay:ID` of every single model (`direct:*`), the
   field's bounds (`oracle`, `random`, computed by the bench),
   three fixed workflows (a vote of the three strongest, and two agreement cascades from GPT-4o-mini
   and Gemini Flash), and each seed's router at `best`, `balanced`, `cheap`, 0.1 and 0.2. Every accuracy
   and cost in the tables is a row that `stiva bench` printed, but the routing field's learnt
   baselines, `knn` and `best-single`: they learn from train items, which a held-out bench does not
   hold, so they come from the function `stiva bench` computes them with (`bench.derived.fit_routing`)
   on the imported bench's records, each held-out item's record picked by its id.
4. Per seed, the router at every point of the preference scale (0 .. 1 in tenths), computed in
   this process with the product's own functions (`WorkflowChoice.estimate_rows`/`pick`, and
   `core.replayed.replay_workflow` on the bench's recorded answers), for the AIQ; the script
   stops unless that computation gives the `stiva bench` rows at the five levels it benched: the same
   grade on every item, and the cost within 1% (a vote judged for want of readable final answers
   is billed its drafts' prompt by the replay pool, its recorded prompt by the computation).
   Every candidate workflow of seed 0, computed the same way, makes the fixed workflows' hull.
5. Against GPT-4o, the paired bootstrap interval (2,000 draws of the held-out items) of the
   accuracy difference, for the median seed's router at each named level and for each fixed workflow.
6. The decision's time: `Router.decide_workflow` on 50 held-out questions, one at a time.
7. The prompted NL conductor (the embedded 270M planning over the 11 models) on `--nl-items`
   held-out items drawn across the three data sets, through `stiva bench --systems conductor`.

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
LEVEL_NAMES = ("best", "balanced", "cheap")
BENCHED = (*LEVEL_NAMES, "0.1", "0.2")  # the router's levels `stiva bench` runs (the sweep's others are computed)
SWEEP = [round(x / 10, 1) for x in range(11)]  # --prefer 0 .. 1: cost weight 0 .. 0.45
GPT4O, MINI, SONNET = "gpt-4o-2024-05-13", "gpt-4o-mini-2024-07-18", "claude-3-5-sonnet-20240620"
LLAMA405, FLASH = "Llama-3.1-405B-Inst@sambanova", "gemini-1.5-flash"
BOOTSTRAP = 2000


def fixed_workflows(r) -> dict[str, str]:
    """The issue's three fixed workflows, by label, as `--systems` names them on the replay."""
    return {
        "vote: GPT-4o + Sonnet + Llama-405B": f"vote:{r(GPT4O)}+{r(SONNET)}+{r(LLAMA405)}",
        "cascade: 4o-mini + Flash > vote of those three": f"cascade:{r(MINI)}+{r(FLASH)}>vote:{r(GPT4O)}+{r(SONNET)}+{r(LLAMA405)}",
        "cascade: 4o-mini + Flash > GPT-4o": f"cascade:{r(MINI)}+{r(FLASH)}>{r(GPT4O)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--nl-items", type=int, default=12, help="held-out items the NL conductor answers (0: none)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--limit", type=int, default=None, help="only the first N held-out items (a quick check)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    with temporary_home("stiva-real-routing-") as home:
        env = stiva_env(home)
        figures = run(home, env, args)
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["machine"] = machine()
    for key in ("best_single", "fixed_workflows", "router_summary", "aiq", "consistency", "decision_s", "nl_conductor"):
        print(f"{key}: {json.dumps(figures.get(key))}")
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

    def r(model: str) -> str:
        return f"replay:{model}"

    fixed = fixed_workflows(r)
    router_systems = {
        (seed, level): f"router:{folder}" + ("" if level == "best" else f"@{level}")
        for seed, folder, _ in routers
        for level in BENCHED
    }
    systems = [
        "direct:*",
        "oracle",
        "random",
        *fixed.values(),
        *router_systems.values(),
    ]
    started = time.monotonic()
    report = json.loads(
        stiva(
            *cli_args("bench", suite, split="heldout", pool=f"replay:{bench}", concurrency=args.concurrency,
                      systems=",".join(systems), limit=args.limit, json=True),
            env=env, what="bench the held-out half", timeout=None,
        ).stdout
    )  # fmt: skip
    bench_s = time.monotonic() - started
    rows = {row["system"]: row for row in report["systems"]}
    graded: dict[str, dict[str, dict]] = {}
    for item in report["items"]:
        graded.setdefault(item["system"], {})[item["id"]] = item

    from stiva_tui.bench.derived import aiq
    from stiva_tui.conductor.router import load_router, utility_weights
    from stiva_tui.core.answers import final_answer
    from stiva_tui.core.preference import LEVELS, parse_preference
    from stiva_tui.core.replayed import Answer, replay_workflow
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.evals.suite import answer_kind

    items = [item for item in load_suite(suite).items if item.meta.get("split") != "train"][: args.limit]
    heldout = [item.id for item in items]
    kinds = {item.id: answer_kind(item) for item in items}
    domains = {item.id: str(item.meta.get("domain")) for item in items}
    models = list(imported["models"])

    def point(row: dict) -> dict:
        return {
            "accuracy": round(row["accuracy"], 4),
            "usd_per_1000": round(1000 * row["cost_per_question"], 4),
            "n": row["n"],
        }

    singles = {m: point(rows[f"direct:{r(m)}"]) for m in models}
    # the reference is GPT-4o, the issue's: the best single model on the train half (and the held-out one)
    best = GPT4O
    base = singles[best]
    most_accurate = max(singles, key=lambda m: (singles[m]["accuracy"], -singles[m]["usd_per_1000"]))
    low = min(p["usd_per_1000"] for p in singles.values())
    high = max(p["usd_per_1000"] for p in singles.values())
    single_points = [(p["usd_per_1000"], p["accuracy"]) for p in singles.values()]

    # each model's recorded answer to each held-out item, as the bench read it
    answers = {
        item_id: {
            m: Answer(
                final_answer(graded[f"direct:{r(m)}"][item_id]["answer"] or "", kinds[item_id]),
                float(graded[f"direct:{r(m)}"][item_id]["correct"] or 0),
                graded[f"direct:{r(m)}"][item_id]["cost_usd"],
                graded[f"direct:{r(m)}"][item_id]["latency_s"] or 0.0,
            )
            for m in models
        }
        for item_id in heldout
    }
    right_of = {name: [float(graded[name][i]["correct"] or 0) for i in heldout] for name in graded}
    figures: dict = {
        "what": "routing and workflows on real models' recorded answers: ZeroEval (11 models, GSM8K + MATH level 5 + "
        "CRUXEval), held-out half by a hash of the id; graded by each answer's recorded ZeroEval score; cost = each "
        "answer's recorded token counts (ZeroEval's texts, characters / 4) x list prices "
        "(benchmarks/data/zeroeval_prices.toml), as `stiva bench` bills a replay",
        "data": {
            "items": imported["items"],
            "heldout_items": len(heldout),
            "train_items": imported["items"] - len(heldout),
            "models": models,
            "heldout_by_domain": {d: sum(domains[i] == d for i in heldout) for d in sorted(set(domains.values()))},
        },
        "bench_s": round(bench_s, 1),
        "singles": singles,
        "best_single": {"model": best, **base, "most_accurate_heldout": most_accurate},
        "oracle": point(rows["oracle"]),
        "random_draw": point(rows["random"]),
        "baselines": learnt_baselines(bench, suite, models, set(heldout)),
    }
    fixed_rows = {}
    for label, name in fixed.items():
        fixed_rows[label] = {
            "system": name.replace("replay:", ""),
            **point(rows[name]),
            "points_vs_best_single": round(100 * (rows[name]["accuracy"] - base["accuracy"]), 2),
            "cost_share_of_best_single": round(rows[name]["cost_per_question"] * 1000 / base["usd_per_1000"], 3),
            "paired_bootstrap_points_95": paired_interval(right_of[name], right_of[f"direct:{r(best)}"]),
        }
    figures["fixed_workflows"] = fixed_rows

    # every seed: the stiva bench rows at the named levels, and the sweep computed in-process
    consistency = {}
    router_rows = []
    candidate_points: dict[str, tuple[float, float]] = {}
    for seed, folder, summary in routers:
        router = load_router(folder)
        choice = router.workflows
        assert choice is not None, "the router was trained without its workflow choice"
        estimates = choice.estimate_rows(router.represent([item.question for item in items]))
        levels = {}
        for level in (*LEVEL_NAMES, *SWEEP):
            preference = LEVELS[level] if isinstance(level, str) else parse_preference(str(level))
            picks = choice.pick(estimates, utility_weights(preference, choice.dearest, choice.slowest))
            outcomes = [
                replay_workflow(choice.workflows[p], choice.models[p], answers[i]) for i, p in zip(heldout, picks)
            ]
            right = [o.correct for o in outcomes]
            levels[str(level)] = {
                "accuracy": round(sum(right) / len(right), 4),
                "usd_per_1000": round(1000 * sum(o.cost_usd for o in outcomes) / len(outcomes), 4),
                "shapes": _shapes([choice.names[p] for p in picks]),
                "_right": right,
            }
        for level in BENCHED:
            row = rows[router_systems[(seed, level)]]
            mine = levels[level]
            # item by item the same grades; the cost within 1%: a vote whose answers hold fewer than two
            # readable final answers is judged by its model, whose prompt (the drafts) the replay pool
            # bills by its length, where the computation bills the judge's recorded prompt
            usd = 1000 * row["cost_per_question"]
            same = (
                abs(mine["accuracy"] - row["accuracy"]) < 5e-5
                and abs(mine["usd_per_1000"] - usd) <= 0.01 * usd
                and mine["_right"] == right_of[router_systems[(seed, level)]]
            )
            consistency[f"seed {seed} {level}"] = {
                "same_grades_item_by_item": mine["_right"] == right_of[router_systems[(seed, level)]],
                "usd_per_1000_computed": mine["usd_per_1000"],
                "usd_per_1000_stiva_bench": round(usd, 4),
            }
            if not same:
                raise SystemExit(
                    f"seed {seed} at {level}: the in-process computation ({mine['accuracy']}, {mine['usd_per_1000']}) "
                    f"differs from stiva bench's row ({row['accuracy']}, {1000 * row['cost_per_question']})"
                )
            levels[level] = {**point(row), "shapes": mine["shapes"], "_right": mine["_right"]}
        pts = [(p["usd_per_1000"], p["accuracy"]) for p in levels.values()]
        router_rows.append(
            {
                "seed": seed,
                "train_s": summary["train_s"],
                "workflows": summary["workflows"],
                "levels": levels,
                "aiq": round(aiq([*single_points, *pts], low, high), 4),
            }
        )
        if seed == 0:  # every candidate, fixed, on the held-out half: the fixed workflows' hull
            for index, name in enumerate(choice.names):
                outcomes = [replay_workflow(choice.workflows[index], choice.models[index], answers[i]) for i in heldout]
                candidate_points[name] = (
                    round(1000 * sum(o.cost_usd for o in outcomes) / len(outcomes), 4),
                    round(sum(o.correct for o in outcomes) / len(outcomes), 4),
                )
    fixed_points = [*single_points, *candidate_points.values()]
    fixed_points += [(p["usd_per_1000"], p["accuracy"]) for p in fixed_rows.values()]
    figures["candidate_workflows_seed0"] = {
        name: {"usd_per_1000": c, "accuracy": a} for name, (c, a) in candidate_points.items()
    }
    summary = summarize(router_rows, base, right_of[f"direct:{r(best)}"])
    figures["router_summary"] = summary
    figures["aiq"] = {
        "range_usd_per_1000": [low, high],
        "single_models": round(aiq(single_points, low, high), 4),
        "fixed_workflows_and_single_models": round(aiq(fixed_points, low, high), 4),
        "router_median": summary["aiq_median"],
        "router_range": summary["aiq_range"],
        "knn": round(
            aiq(
                [
                    *single_points,
                    *(
                        (p["usd_per_1000"], p["accuracy"])
                        for n, p in figures["baselines"].items()
                        if n.startswith("knn")
                    ),
                ],
                low,
                high,
            ),
            4,
        ),  # fmt: skip
    }
    for row in router_rows:
        for level in row["levels"].values():
            level.pop("_right", None)
    figures["routers"] = router_rows
    figures["consistency"] = consistency

    # the decision's own time, one question at a time
    router = load_router(routers[0][1])
    pool = [r(m) for m in models]
    times = []
    for item in items[:50]:
        start = time.perf_counter()
        router.decide_workflow(item.question, pool, LEVELS["balanced"])
        times.append(time.perf_counter() - start)
    times.sort()
    figures["decision_s"] = {
        "representation": "tfidf",
        "median": round(statistics.median(times), 4),
        "p95": round(times[int(0.95 * (len(times) - 1))], 4),
        "n": len(times),
    }
    if args.nl_items:
        sample = across_datasets(items, args.nl_items)
        figures["nl_conductor"] = nl_bench(home, sample, bench, env, base_items=graded[f"direct:{r(best)}"])
    return figures


def learnt_baselines(bench: str, suite: str, models: list[str], heldout: set[str]) -> dict:
    """`knn` and `best-single` at three levels, as `stiva bench` computes them (bench.derived), from
    the imported bench's graded records: each one's records of the held-out items, by id."""
    from stiva_tui.bench.derived import fit_routing
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.store import Store

    every = load_suite(suite).items
    store = Store.open()
    try:
        records = [r for r in store.bench_items(bench) if r.status == "graded"]
    finally:
        store.close()
    routing = fit_routing(
        records,
        [f"direct:{m}" for m in models],
        {item.id: item.question for item in every},
        {item.id: str(item.meta.get("split")) for item in every},
    )
    out = {}
    for name in ("knn", "knn@balanced", "knn@cheap", "best-single", "best-single@balanced"):
        picked = [record for record in routing.records(name) if record.item_id in heldout]
        out[name] = {
            "accuracy": round(sum(record.correct for record in picked) / len(picked), 4),
            "usd_per_1000": round(1000 * sum(record.cost_usd for record in picked) / len(picked), 4),
            "n": len(picked),
        }
    return out


def _shapes(names: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        kind = name.split(":", 1)[0]
        out[kind] = out.get(kind, 0) + 1
    return out


def paired_interval(system: list[float], baseline: list[float], seed: int = 0) -> list[float]:
    """The 95% paired bootstrap interval, in points, of `system`'s accuracy minus `baseline`'s on
    the same items (each draw resamples items, keeping each item's pair)."""
    rng = random.Random(seed)
    diffs = [a - b for a, b in zip(system, baseline)]
    n = len(diffs)
    draws = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(BOOTSTRAP))
    return [round(100 * draws[int(0.025 * BOOTSTRAP)], 2), round(100 * draws[int(0.975 * BOOTSTRAP) - 1], 2)]


def summarize(rows: list[dict], best: dict, best_right: list[float]) -> dict:
    """The median over seeds of each named level (with the range), against the best single model,
    and the median seed's paired bootstrap interval."""
    out = {}
    for level in BENCHED:
        acc = [r["levels"][level]["accuracy"] for r in rows]
        usd = [r["levels"][level]["usd_per_1000"] for r in rows]
        median_seed = sorted(rows, key=lambda r: r["levels"][level]["accuracy"])[len(rows) // 2]
        out[level] = {
            "accuracy_median": round(statistics.median(acc), 4),
            "accuracy_range": [min(acc), max(acc)],
            "usd_per_1000_median": round(statistics.median(usd), 4),
            "usd_per_1000_range": [min(usd), max(usd)],
            "points_vs_best_single": round(100 * (statistics.median(acc) - best["accuracy"]), 2),
            "cost_share_of_best_single": round(statistics.median(usd) / best["usd_per_1000"], 3),
            "median_seed": median_seed["seed"],
            "paired_bootstrap_points_95": paired_interval(median_seed["levels"][level]["_right"], best_right),
            "shapes_median_seed": median_seed["levels"][level]["shapes"],
        }
    aiqs = [r["aiq"] for r in rows]
    out["aiq_median"] = round(statistics.median(aiqs), 4)
    out["aiq_range"] = [min(aiqs), max(aiqs)]
    return out


def across_datasets(items: list, count: int) -> list:
    """`count` held-out items, drawn in turn from each data set (the suite lists GSM8K first)."""
    by_domain: dict[str, list] = {}
    for item in items:
        by_domain.setdefault(str(item.meta.get("domain")), []).append(item)
    picked: list = []
    queues = [list(v) for _, v in sorted(by_domain.items())]
    while len(picked) < count and any(queues):
        for queue in queues:
            if queue and len(picked) < count:
                picked.append(queue.pop(0))
    return picked


def nl_bench(home: Path, sample: list, bench: str, env: dict, base_items: dict) -> dict:
    """`stiva bench --systems conductor` (the embedded 270M planning over the pool) on `sample`,
    beside the best single model on the same items."""
    path = home / "nl-sample.jsonl"
    lines = [json.dumps({"_suite": "held-out ZeroEval items across the three data sets"})]
    lines += [item.model_dump_json(exclude_defaults=True) for item in sample]
    path.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    done = stiva(
        *cli_args("bench", path, pool=f"replay:{bench}", concurrency=2, systems="conductor", json=True),
        env=env, timeout=None,
    )  # fmt: skip
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1:]}
    row = json.loads(done.stdout)["systems"][0]
    domains: dict[str, int] = {}
    for item in sample:
        domains[str(item.meta.get("domain"))] = domains.get(str(item.meta.get("domain")), 0) + 1
    return {
        "items": len(sample),
        "by_domain": domains,
        "accuracy": row["accuracy"],
        "usd_per_1000": round(1000 * row["cost_per_question"], 4),
        "seconds": round(time.monotonic() - started, 1),
        "same_items_best_single": round(sum(float(base_items[i.id]["correct"] or 0) for i in sample) / len(sample), 4),
    }


def plot(figures: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, p in figures["singles"].items():
        ax.scatter(p["usd_per_1000"], p["accuracy"], color="grey")
        ax.annotate(name.split("-20")[0][:22], (p["usd_per_1000"], p["accuracy"]), fontsize=7)
    for n, (label, p) in enumerate(figures["fixed_workflows"].items()):
        ax.scatter(p["usd_per_1000"], p["accuracy"], marker="s", color="tab:purple", label=f"{'ABC'[n]}: {label}")
        ax.annotate("ABC"[n], (p["usd_per_1000"], p["accuracy"]), xytext=(4, 6), textcoords="offset points",
                    fontsize=8, color="tab:purple")  # fmt: skip
    row = next(r for r in figures["routers"] if r["seed"] == figures["router_summary"]["best"]["median_seed"])
    pts = sorted((p["usd_per_1000"], p["accuracy"]) for p in row["levels"].values())
    ax.plot(*zip(*pts), "o-", color="tab:blue", label=f"router, seed {row['seed']} (AIQ {row['aiq']:.3f})")
    o = figures["oracle"]
    ax.scatter(o["usd_per_1000"], o["accuracy"], marker="*", s=120, color="black", label="oracle")
    ax.set_xscale("log")
    ax.set_xlabel("USD per 1,000 questions (recorded tokens x list prices; log)")
    ax.set_ylabel("accuracy on the held-out half")
    ax.set_title("RECORDED POOL: ZeroEval, 11 models, held-out half")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)


if __name__ == "__main__":
    main()
