"""Does handing the router's low-chance questions to the full conductor help? On ZeroEval's
recorded answers (the same data as real_routing.py).

    python -m benchmarks.experiments.router_escalation [--below 0.4 | --lowest 0.02] [--seed 0]

Trains the router on the train half (tfidf, one seed), takes the held-out questions whose chosen
workflow's expected chance is under `--below` (or, with `--lowest F`, the fraction F of them with
the lowest chances, `--below` then set just above the highest of those), and benches them two ways through `stiva bench` on the
replayed pool: `router:DIR` (the router's own choice, never escalated: conductor-mini escalates a
copy of the loaded router, so the two arms differ) and `conductor-mini` with `[conductor] router`
and `router_escalate_below` (the full conductor, here the embedded 270M, plans each of them).
Saves router_escalation.json beside itself.
"""

from __future__ import annotations

import argparse
import json

from benchmarks.harness import HERE, ROOT, cli_args, machine, save_json, stiva, stiva_env, temporary_home

OUT = HERE / "experiments" / "router_escalation.json"
DATA = ROOT / "benchmarks" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--below", type=float, default=None)
    parser.add_argument("--lowest", type=float, default=0.02, help="escalate this fraction of the questions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    with temporary_home("stiva-escalation-") as home:
        figures = run(home, args)
    figures["machine"] = machine()
    print(json.dumps(figures, indent=1))
    if not args.no_save:
        save_json(OUT, figures)


def run(home, args) -> dict:
    import os

    from stiva_tui.conductor.router import load_router
    from stiva_tui.evals.loaders import load_suite

    env = stiva_env(home)
    os.environ["STIVA_HOME"] = env["STIVA_HOME"]
    imported = json.loads(
        stiva(*cli_args("bench", "import", DATA / "zeroeval.records.jsonl.gz", name="zeroeval",
                        prices=DATA / "zeroeval_prices.toml", json=True), env=env, what="import", timeout=None).stdout
    )  # fmt: skip
    suite, bench = imported["suite"], imported["bench"]
    folder = home / "router"
    stiva(*cli_args("train", "router", suite, split="train", pool=f"replay:{bench}", seed=args.seed, out=folder,
                    json=True), env=env, what="train router", timeout=None)  # fmt: skip
    router = load_router(folder)
    items = [item for item in load_suite(suite).items if item.meta.get("split") != "train"]
    pool = [f"replay:{m}" for m in imported["models"]]
    # the chance escalation compares: the chosen workflow's expected chance (the head's best model's
    # where the router chooses no workflows), at the config's preference (none: best)
    if router.workflows is not None:
        chances = [router.decide_workflow(item.question, pool, None).chance for item in items]
    else:
        chances = list(router.predict_rows(router.represent([item.question for item in items])).max(axis=1))
    if args.below is None:  # the lowest fraction: a threshold just above the last of them
        ranked = sorted(chances)
        args.below = float(ranked[max(0, int(args.lowest * len(ranked)) - 1)]) + 1e-6
    low = [item for item, chance in zip(items, chances) if chance < args.below]
    lines = [json.dumps({"_suite": f"held-out ZeroEval items the router gives under {args.below:.0%}"})]
    lines += [item.model_dump_json(exclude_defaults=True) for item in low]
    sample = home / "low.jsonl"
    sample.write_text("\n".join(lines) + "\n")
    config = home / "escalate.toml"
    config.write_text(f'[conductor]\nrouter = "{folder}"\nrouter_escalate_below = {args.below}\n')
    report = json.loads(
        stiva(*cli_args("bench", sample, pool=f"replay:{bench}", config=config, concurrency=2,
                        systems=f"router:{folder},conductor-mini", json=True),
              env=env, what="bench the router and the escalating conductor-mini", timeout=None).stdout
    )  # fmt: skip
    rows = {row["system"].replace(str(folder), "DIR"): row for row in report["systems"]}
    return {
        "what": __doc__.splitlines()[0].strip() + " " + __doc__.splitlines()[1].strip(),
        "below": args.below,
        "heldout_items": len(items),
        "escalated_items": len(low),
        "systems": {
            name: {
                "accuracy": row["accuracy"],
                "usd_per_1000": round(1000 * row["cost_per_question"], 4),
                "latency_p50_s": row["latency_p50_s"],
            }
            for name, row in rows.items()
        },
        "full_conductor": "the embedded Gemma-3 270M (a replayed pool plans with the embedded conductor)",
    }


if __name__ == "__main__":
    main()
