"""`stiva votes` and `stiva train --from-votes`: the compare-mode votes as training signal.

    stiva votes [--json]
    stiva train --from-votes --base embedded|HF_ID|DIR --out DIR [--steps N] [--batch B] [--beta X]
                [--bench ID ... [--bench-pairs best] [--prefer-levels best,cheap]] [--sft-weight W]

`stiva votes` shows how many votes the history holds and how many preference pairs of
workflows they give, per (chosen system, rejected system), with the reasons pairs are left out
(train/votes.py says which). `stiva train --from-votes` trains a LoRA adapter on those pairs with
DPO (train/dpo.py); a live view on stderr shows each step, stdout gets the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .core import format as fmt


def add_parser(sub, common) -> None:
    votes = sub.add_parser(
        "votes", parents=[common], help="the compare-mode votes and the preference pairs they give for training",
        description="Each vote in compare mode says one system's plan was better than another's on that question. "
                    "This counts the votes and the usable preference pairs, per pair of systems; "
                    "stiva train --from-votes trains the conductor on them.")
    votes.add_argument("--json", action="store_true", help="print one JSON object")


def votes_command(args: argparse.Namespace) -> int:
    from .cli_common import EXIT_FAILED, EXIT_USAGE, fail
    from .store import HistoryFault, Store, StoreError
    from .train.votes import read_votes

    try:
        store = Store.open(reads_only=True)
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    try:
        with store:
            harvest = read_votes(store)
    except StoreError as exc:  # a damaged page met while reading
        return fail(str(exc), EXIT_FAILED)
    if args.json:
        print(json.dumps(harvest.as_json(), indent=2, ensure_ascii=False))
        return 0
    print(votes_text(harvest))
    return 0


def votes_text(harvest) -> str:
    """What `stiva votes` prints."""
    data = harvest.as_json()
    kinds = data["votes"]
    lines = [f"{data['sessions']} compare sessions · {data['voted']} voted ({kinds['winner']} winner, "
             f"{kinds['tie']} tie, {kinds['all_wrong']} all wrong) · {data['pairs']} usable preference pairs"]
    rows = data["by_pair"]
    if rows:
        width = max(len("chosen"), *(len(r["chosen"]) for r in rows))
        other = max(len("over"), *(len(r["rejected"]) for r in rows))
        lines.append(f"{'chosen':<{width}}  {'over':<{other}}  {'votes':>5}  {'pairs':>5}  left out")
        for r in rows:
            gone = ", ".join(f"{reason} {n}" for reason, n in r["left_out"].items())
            lines.append(f"{r['chosen']:<{width}}  {r['rejected']:<{other}}  {r['votes']:>5}  {r['pairs']:>5}  {gone}")
    whole = data["votes_without_pairs"]
    if whole:
        lines.append("votes that give no pair: " + ", ".join(f"{reason} {n}" for reason, n in whole.items()))
    if data["pairs"]:
        lines.append("train on them: stiva train --from-votes --base embedded|HF_ID|DIR --out DIR")
    else:
        lines.append("no pairs yet: in compare mode, mark the better answer (a winner against another system)")
    return "\n".join(lines)


def train_from_votes_command(args: argparse.Namespace, config) -> int:
    """`stiva train --from-votes` (cli_train.py hands over here)."""
    from .cli_common import EXIT_USAGE, fail

    if args.suite:
        return fail("--from-votes trains on pairs: add a graded suite as a bench of it (stiva bench SUITE --systems "
                    "...), then --bench ID; or train on the suite in a run of its own (stiva train SUITE ...)",
                    EXIT_USAGE)
    error = dpo_usage_error(args, "--from-votes")
    if error:
        return fail(error, EXIT_USAGE)
    return train_on_pairs(args, config, tuple(args.bench), args.bench_pairs or "all", "--from-votes")


def dpo_usage_error(args: argparse.Namespace, how: str) -> str | None:
    """What is wrong with the options of a DPO training (`how`: the flag that chose it), or None."""
    if args.beta is not None and args.beta <= 0:
        return "--beta must be above 0"
    if args.sft_weight is not None and not args.sft_weight >= 0:
        return "--sft-weight must be 0 or more"
    # Options of GRPO's rollouts that DPO has no use for: said, not silently dropped. A graded
    # training grades a split of its suite (--split) and may run its code items (--unsafe-code).
    graded = how != "--from-votes"
    ignored = [flag for flag, given in (
        ("--split", args.split and not graded), ("--group", args.group != 4), ("--cost-weight", args.cost_weight),
        ("--budget-usd", args.budget_usd is not None), ("--shuffle-pool", args.shuffle_pool),
        ("--temperature", args.temperature != 1.0),
        ("--unsafe-code", args.unsafe_code and not graded)) if given]
    if ignored:
        return (f"{', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} for training on a suite by GRPO "
                f"(its sampled plans), not by DPO on pairs: leave {'it' if len(ignored) == 1 else 'them'} out with "
                f"{how}")
    return None


def train_on_pairs(args: argparse.Namespace, config, benches: tuple[str, ...], bench_pairs: str,
                   how: str = "--from-votes") -> int:
    """DPO on the votes' pairs and the graded `benches`' (`--from-votes`, `--method graded-dpo`)."""
    import os
    import signal

    from rich.console import Console

    from .cli_common import EXIT_CANCELLED, EXIT_FAILED, EXIT_USAGE, comma_list, fail
    from .train.dpo import VoteTrainOptions, train_from_votes
    from .train.trainer import TrainError

    console = Console(stderr=True)
    stop: list[str] = []

    def on_signal(signum, frame):
        if stop:
            os._exit(EXIT_CANCELLED)
        stop.append("cancelled")
        console.print("[yellow]stopping after this step (ctrl+c again to leave at once)…[/]")

    def on_step(report) -> None:
        if args.json:
            return
        print(f"step {report.step}/{args.steps}: loss {report.loss:.4f} · chosen above rejected "
              f"{report.accuracy:.0%} · margin {report.margin:+.3f} · {fmt.seconds(report.seconds)}", file=sys.stderr,
              flush=True)

    def stage(message: str) -> None:
        if not args.json:
            print(f"stiva train{' --from-votes' if how == '--from-votes' else ''}: {message}", file=sys.stderr,
                  flush=True)

    options = VoteTrainOptions(
        base=args.base, out=Path(args.out), steps=args.steps, batch=args.batch,
        lr=args.lr, beta=args.beta if args.beta is not None else 0.1, resume=args.resume, seed=args.seed,
        lora_r=args.lora_r, lora_targets=args.lora_targets, prompt_style=args.prompt_style,
        max_steps_per_plan=args.plan_steps, max_subtask_chars=args.subtask_chars, save_every=args.save_every,
        benches=benches, bench_pairs=bench_pairs, sft_weight=args.sft_weight or 0.0,
        preferences=comma_list(args.prefer_levels))
    previous = signal.signal(signal.SIGINT, on_signal)
    try:
        summary = train_from_votes(config, options, on_step=on_step, progress=stage,
                                   should_stop=lambda: stop[0] if stop else None)
    except TrainError as exc:
        return fail(str(exc), EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - a model that cannot load: one line
        return fail(f"training failed: {type(exc).__name__}: {exc}", EXIT_FAILED)
    finally:
        signal.signal(signal.SIGINT, previous)
    if args.json:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        first = "—" if summary.loss_first is None else f"{summary.loss_first:.4f}"
        last = "—" if summary.loss_last is None else f"{summary.loss_last:.4f}"
        skipped = f" ({', '.join(f'{k} {v}' for k, v in summary.skipped.items())} left out)" if summary.skipped else ""
        graded = f" and {fmt.count(summary.graded, 'graded pair')}" if summary.graded else ""
        print(f"{fmt.count(summary.steps, 'step')} on {fmt.count(summary.pairs, 'pair')} from "
              f"{fmt.count(summary.votes, 'vote')}{graded}{skipped} · "
              f"DPO loss {first} → {last} · adapter {summary.adapter}")
        from rich.markup import escape

        console.print("[dim]" + escape(f"use it: [conductor] adapter = \"{summary.adapter}\"; compare: stiva bench "
                                       f"{args.suite or 'SUITE'} --systems conductor,adapter:{summary.adapter}") + "[/]",
                      highlight=False, soft_wrap=True)
    if summary.stopped:
        console.print(f"[yellow]stopped:[/] {summary.stopped} — the adapter so far is saved; --resume continues",
                      highlight=False)
    return EXIT_CANCELLED if summary.stopped == "cancelled" else 0
