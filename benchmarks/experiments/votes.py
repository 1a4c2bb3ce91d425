"""Compare-mode votes as training signal, measured with simulated voters (saves votes.json beside itself):

    .venv/bin/python -m benchmarks.experiments.votes              # tiny random conductor, N = 0, 24, 72
    .venv/bin/python -m benchmarks.experiments.votes --base embedded --votes 0,30,90 --heldout 40 --samples 1 \
        --steps 40 --lr 1e-3 --sft-weight 1 --subtask-chars 30 --out votes_embedded.json

Everything on the SIMULATED POOL (stiva_tui/sim: five sim: models whose strengths and prices are
known) and the built-in `skills` suite, in a fresh STIVA_HOME, through the real parts:

1. **Votes.** For N questions of the train split, compare mode's systems answer on the sim pool:
   the prompted conductor (a plan sampled from the base model under the plan grammar, run by the
   engine) and every single model (`direct:sim:...`, real direct runs). Each run is graded. A
   simulated voter prefers the right answer, and the cheaper one when several are right (equal
   costs: it picks one at random); every answer wrong is an "all wrong" vote; all right at one
   cost a tie. Sessions, entries and votes go through the real Store API into the history.
2. **Training.** `train_from_votes` (DPO + LoRA, train/dpo.py) on the pairs of the first N
   votes, N = each of `--votes` (N = 0 is the base itself).
3. **Held-out.** The conductor (base, or base + each adapter) plans `--samples` plans per held-out
   question through the grammar-constrained plan path; each plan runs on the sim pool and is
   graded: accuracy, cost and tokens per question, and which models the plans pick.

The votes point at the cheap specialist of each domain (right ~95% of the time on its domain, at a
fraction of the generalist's price), so the trained conductor should get more accurate and cheaper
on held-out questions as N grows. Every figure is labelled "simulated pool"; they are reported as
measured, met or not. Code items are left out unless `--with-code` (their grader needs the sandbox).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.harness import machine, save_json, stiva_env

HERE = Path(__file__).resolve().parent


def interval(successes: int, n: int) -> list[float]:
    """Wilson's 95% interval of a rate (the bench report's own)."""
    from stiva_tui.bench.report import wilson

    return [round(v, 4) for v in wilson(successes, n)] if n else [0.0, 0.0]


class Pool:
    """The sim pool's runtime on its own loop, with runs that are graded."""

    def __init__(self, config):
        from stiva_tui.train.rollout import EngineLoop

        self.engine = EngineLoop(config, discover=False)
        self.runtime = self.engine.runtime
        self.models = list(self.runtime.models)

    async def _run(self, item, mode) -> dict:
        from stiva_tui.evals.graders import grade_async
        from stiva_tui.evals.suite import question_text
        from stiva_tui.runtime.sessions import Ask

        outcome = await self.runtime.sessions.ask(
            Ask(question_text(item), mode=mode, source="bench", in_conversation=False)
        )
        result = outcome.result
        correct = result.status == "finished" and (await grade_async(item, result.answer)).correct
        totals = result.totals
        return {
            "run_id": result.run_id,
            "correct": bool(correct),
            "cost_usd": totals.cost_usd,
            "tokens": totals.prompt_tokens + totals.completion_tokens,
        }

    def run_many(self, jobs) -> list[dict]:
        async def all_of():
            return list(await asyncio.gather(*(self._run(item, mode) for item, mode in jobs)))

        return self.engine.call(all_of())

    def close(self) -> None:
        self.engine.close()


def conductor_for(model_dir: str, adapter: str | None, chars: int):
    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.inference.checkpoints import ModelSpec

    conductor = HFConductor(
        ModelSpec(
            model_dir, device="cpu", adapter=adapter, quantize=False, compute_dtype="float32", label="votes-bench"
        ),
        max_reasoning_tokens=0,
        max_subtask_chars=chars,
        temperature=1.0,
        prompt_style="compact",
    )
    return conductor, conductor.load_sync()


def sample_plans(conductor, loaded, items, workers, plan_steps: int, samples: int, seed: int = 0):
    import torch

    from stiva_tui.conductor.base import PlanRequest
    from stiva_tui.evals.suite import question_text

    torch.manual_seed(seed)  # every conductor is measured on the same draws
    out = []
    for item in items:
        for plan in conductor.sample_many_sync(
            PlanRequest(question_text(item), workers, max_steps=plan_steps), loaded, samples, 1.0
        ):
            out.append((item, plan))
    return out


def simulated_vote(results: dict[str, dict], rng: random.Random) -> tuple[str, str | None]:
    """(kind, winner): the right answer, the cheaper when several are right (a coin among equals)."""
    right = {s: r for s, r in results.items() if r["correct"]}
    if not right:
        return "all_wrong", None
    cheapest = min(r["cost_usd"] for r in right.values())
    best = sorted(s for s, r in right.items() if r["cost_usd"] <= cheapest * 1.01 + 1e-12)
    if len(right) == len(results) and len(best) == len(results):
        return "tie", None
    return "winner", rng.choice(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="tiny", help="tiny (a random-weight model built here), embedded, or a folder")
    parser.add_argument("--votes", default="0,24,72", help="N values: train on the first N votes (0: the base)")
    parser.add_argument("--heldout", type=int, default=40, help="held-out questions (default 40)")
    parser.add_argument("--samples", type=int, default=2, help="plans per held-out question (default 2)")
    parser.add_argument("--steps", type=int, default=60, help="DPO steps per adapter (default 60)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--beta", type=float, default=0.1)
    parser.add_argument(
        "--sft-weight",
        type=float,
        default=0.0,
        help="RPO: + W x the chosen plan's NLL (1 keeps the embedded model's subtask text intact)",
    )
    parser.add_argument("--lora-r", type=int, default=8)
    parser.add_argument("--plan-steps", type=int, default=1, help="the plans' step limit (default 1)")
    parser.add_argument("--subtask-chars", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--with-code", action="store_true", help="keep the code items (graded in the sandbox)")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--out", default="votes.json", help="file name beside this script (default votes.json)")
    args = parser.parse_args()
    counts = sorted({int(n) for n in args.votes.split(",")})

    work = Path(tempfile.mkdtemp(prefix="stiva-votes-"))
    home = work / "home"
    os.environ.update(stiva_env(home))
    from stiva_tui.conductor.base import WorkerInfo
    from stiva_tui.config import parse_config
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.evals.suite import split_of
    from stiva_tui.runtime.modes import DirectMode, WorkflowMode
    from stiva_tui.sim.pool import pool_config, start_sim
    from stiva_tui.store import Store
    from stiva_tui.train.dpo import VoteTrainOptions, train_from_votes
    from stiva_tui.train.votes import VoteHarvest, read_votes

    started = time.monotonic()
    suite = load_suite("skills")
    keep = (lambda item: True) if args.with_code else (lambda item: item.grader != "code")
    rng = random.Random(args.seed)
    train_items = [i for i in split_of(suite, "train").items if keep(i)]
    held_items = [i for i in split_of(suite, "heldout").items if keep(i)]
    rng.shuffle(train_items)
    rng.shuffle(held_items)
    held_items = held_items[: args.heldout]
    voted_items = train_items[: max(counts)]
    if max(counts) > len(voted_items):
        parser.error(f"--votes asks for {max(counts)} votes, but the train split has {len(voted_items)} questions")

    if args.base == "tiny":
        from tests.support.model_builders import build_random_model

        corpus = [i.question for i in suite.items] * 4
        model_dir = str(build_random_model(work / "tiny", "tiny", seed=3, corpus=corpus))
    elif args.base == "embedded":
        from stiva_tui.inference.embedded import ensure_embedded_checkpoint

        model_dir = str(ensure_embedded_checkpoint())
    else:
        model_dir = str(Path(args.base).expanduser().resolve())

    base_config = parse_config(
        {
            "sim": {"latency_scale": 0.0},
            "conductor": {
                "max_steps": args.plan_steps,
                "max_reasoning_tokens": 0,
                "max_subtask_chars": max(20, args.subtask_chars),
            },
        }
    )
    config, server = start_sim(pool_config(base_config, "sim"))
    pool = Pool(config)
    report: dict = {}
    try:
        ids = [m.id for m in pool.models]
        workers = [WorkerInfo(m.id, m.description, m.kind) for m in pool.models]
        prices = {m.id: (m.price_in, m.price_out) for m in pool.models}
        print(
            f"simulated pool: {', '.join(ids)}; {len(voted_items)} voted questions, {len(held_items)} held out",
            flush=True,
        )

        # 1. votes
        conductor, loaded = conductor_for(model_dir, None, args.subtask_chars)
        plans = [
            (item, plan)
            for item, plan in sample_plans(conductor, loaded, voted_items, workers, args.plan_steps, 1)
            if plan.workflow is not None
        ]
        store: Store = pool.runtime.store
        jobs = []
        for item, plan in plans:
            jobs.append((item, WorkflowMode(plan.workflow, tuple(ids))))
            jobs += [(item, DirectMode(model_id)) for model_id in ids]
        results = pool.run_many(jobs)
        per = len(ids) + 1
        sessions: list[str] = []
        session_kinds: list[str] = []
        kinds: Counter = Counter()
        winners: Counter = Counter()
        for k, (item, _) in enumerate(plans):
            block = results[k * per : (k + 1) * per]
            by_system = {"conductor": block[0], **{f"direct:{m}": r for m, r in zip(ids, block[1:])}}
            sid = store.create_compare_session(item.question)
            for system, result in by_system.items():
                store.add_compare_entry(sid, system, result["run_id"])
            kind, winner = simulated_vote(by_system, rng)
            store.record_vote(sid, winner, kind=kind)
            kinds[kind] += 1
            session_kinds.append(kind)
            winners[winner or kind] += 1
            sessions.append(sid)
        store.wait_for_writes()
        harvest = read_votes(store)
        print(f"votes: {dict(kinds)}; winners {dict(winners)}; {len(harvest.pairs)} pairs", flush=True)
        report["votes"] = {
            "questions": len(plans),
            "kinds": dict(kinds),
            "winners": dict(winners),
            "pairs": len(harvest.pairs),
            "by_pair": harvest.by_pair()[:12],
        }

        # 2 and 3: an adapter per N, then the held-out questions
        def held_out(adapter: str | None) -> dict:
            c, loaded = conductor_for(model_dir, adapter, args.subtask_chars)
            sampled = sample_plans(c, loaded, held_items, workers, args.plan_steps, args.samples)
            sampled = [(item, plan) for item, plan in sampled if plan.workflow is not None]
            runs = pool.run_many([(item, WorkflowMode(plan.workflow, tuple(ids))) for item, plan in sampled])
            right = sum(r["correct"] for r in runs)
            picks = Counter(ids[s.model] for _, plan in sampled for s in plan.workflow.steps)
            subtasks = Counter(s.subtask for _, plan in sampled for s in plan.workflow.steps)
            n = len(runs)
            return {
                "plans": n,
                "accuracy": round(right / n, 4),
                "accuracy_95": interval(right, n),
                "cost_usd_per_question": round(sum(r["cost_usd"] for r in runs) / n, 8),
                "tokens_per_question": round(sum(r["tokens"] for r in runs) / n, 1),
                "picks": dict(picks.most_common()),
                # the plans' subtask text: DPO alone garbles it on the embedded model (learning_rpo.json)
                "subtasks": dict(subtasks.most_common(3)),
                "distinct_subtasks": len(subtasks),
            }

        rows = []
        for n in counts:
            t0 = time.monotonic()
            if n == 0:
                row = {"votes": 0, "pairs": 0, **held_out(None)}
            else:
                chosen = set(sessions[:n])
                subset = VoteHarvest(sessions=n, pairs=[p for p in harvest.pairs if p.session_id in chosen])
                subset.votes.update(Counter(session_kinds[:n]))
                out = work / f"adapter-{n}"
                summary = train_from_votes(
                    config,
                    VoteTrainOptions(
                        base=model_dir,
                        out=out,
                        steps=args.steps,
                        batch=args.batch,
                        lr=args.lr,
                        beta=args.beta,
                        sft_weight=args.sft_weight,
                        device="cpu",
                        lora_r=args.lora_r,
                        lora_targets="all",
                        prompt_style="compact",
                        max_steps_per_plan=args.plan_steps,
                        max_subtask_chars=args.subtask_chars,
                        save_every=args.steps + 1,
                        seed=args.seed,
                    ),
                    workers=workers,
                    harvest=subset,
                )
                row = {
                    "votes": n,
                    "pairs": summary.pairs,
                    "dpo_loss": [summary.loss_first, summary.loss_last],
                    **held_out(str(out)),
                }
            row["seconds"] = round(time.monotonic() - t0, 1)
            rows.append(row)
            print(
                f"N={n}: accuracy {row['accuracy']:.3f} {row['accuracy_95']} · ${row['cost_usd_per_question']:.6f}"
                f"/question · picks {row['picks']} · {row['seconds']} s",
                flush=True,
            )
        report["rows"] = rows
        report["direct_prices"] = prices
    finally:
        pool.close()
        server.stop()
    report = {
        "label": "simulated pool",
        "what": "N simulated votes (right answer, else the cheaper) from the skills train split -> DPO + LoRA -> "
        "held-out accuracy and cost of the conductor's plans on the simulated pool",
        "base": args.base,
        "settings": {k: v for k, v in vars(args).items() if k not in ("no_save", "out")},
        **report,
        "wall_s": round(time.monotonic() - started, 1),
        "machine": machine(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print(json.dumps(report["rows"], indent=2))
    if not args.no_save:
        print(f"saved {save_json(HERE / args.out, report)}")


if __name__ == "__main__":
    main()
