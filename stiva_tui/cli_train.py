"""`stiva train`: teach the conductor the pool with GRPO (TRL) and a LoRA adapter.

    stiva train SUITE --base embedded|HF_ID|DIR --out DIR [--steps N] [--group G] [--batch Q]
                      [--lr X] [--cost-weight W] [--budget-usd X] [--resume] [--json]
    stiva train --from-votes --base ... --out DIR [--beta X]   (DPO on the votes: cli_votes.py)
    stiva train SUITE --method graded-dpo [--graded-seeds K] ... (grade every model on SUITE, then DPO)

A live view on stderr (when it is a terminal) shows the reward curve, the plans sampled and the
spend; stdout gets the summary (with --json exactly one object: steps, reward_first,
reward_last, adapter, cost_usd). ctrl+c stops after the current step and keeps the adapter;
a second ctrl+c leaves at once (the last checkpoint stays for --resume).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

from .core import format as fmt

SPARKS = "▁▂▃▄▅▆▇█"


def add_parser(sub, common) -> None:
    train = sub.add_parser(
        "train", parents=[common], help="teach the conductor your pool with reinforcement learning (GRPO + LoRA)",
        description="Sample G plans per question with the conductor, run each on the pool, grade the answers, "
                    "and update a LoRA adapter with GRPO (TRL). Then set [conductor] adapter = \"DIR\", and "
                    "compare with: stiva bench SUITE --systems conductor,adapter:DIR")
    train.add_argument("suite", nargs="?", help="a bench suite: JSONL file, FORMAT:PATH or a built-in name "
                                                "(none with --from-votes)")
    train.add_argument("--from-votes", action="store_true",
                       help="train on the compare-mode votes instead (DPO: each vote's winning plan over the "
                            "others'; see stiva votes)")
    train.add_argument("--bench", action="append", default=[], metavar="ID",
                       help="with --from-votes: add a graded bench's items as pairs too (right over wrong, the "
                            "cheaper right over the dearer), so votes and a graded suite train one adapter; "
                            "repeatable: benches of one suite graded again (another sim seed, a temperature) are "
                            "pooled by item and compared by mean grade")
    train.add_argument("--method", choices=["grpo", "graded-dpo"], default="grpo",
                       help="grpo (default): sample plans, run and grade them, learn by GRPO; graded-dpo: grade "
                            "every single model of the pool on the suite (a bench of each), then learn by DPO "
                            "which model each question's best answer came from (on the simulated pool: 92.5%% "
                            "held out where GRPO reached 70%%, benchmarks/learning_rpo.json)")
    train.add_argument("--graded-seeds", type=int, default=1, metavar="K",
                       help="with --method graded-dpo on a simulated pool: grade it under K seeds (K samples of "
                            "every model per question), pairs by mean grade (default 1)")
    train.add_argument("--graded-systems", metavar="SYSTEMS", default="direct:*",
                       help="with --method graded-dpo: the systems graded, as stiva bench --systems takes them "
                            "(default direct:*, every single model); chain:A>B adds two-step plans (train them "
                            "with --plan-steps 2)")
    train.add_argument("--bench-pairs", choices=["all", "best"],
                       help="with --bench: every pair the rule gives (the default), or only each item's best "
                            "system over every other: one consistent pick per question (--method graded-dpo's "
                            "default)")
    train.add_argument("--sft-weight", type=float, metavar="W",
                       help="with --from-votes or --method graded-dpo: add W x the chosen plan's mean NLL to "
                            "DPO's loss (RPO), so the adapter cannot widen the margin by making both plans "
                            "unlikely (default 0: DPO alone)")
    train.add_argument("--beta", type=float, help="with --from-votes or --method graded-dpo: DPO's beta, how far "
                                                  "the adapter may move from its base (default 0.1)")
    train.add_argument("--split", metavar="NAME", help="only the items whose meta.split is NAME (skills: train)")
    train.add_argument("--base", required=True, help="embedded, an HF id or a model folder (QLoRA on CUDA)")
    train.add_argument("--out", required=True, metavar="DIR", help="where the adapter, log and checkpoints go")
    train.add_argument("--steps", type=int, default=50, help="GRPO steps (default 50)")
    train.add_argument("--group", type=int, default=4, help="plans per question (G, default 4)")
    train.add_argument("--batch", type=int, default=2, help="questions per step (default 2)")
    train.add_argument("--lr", type=float, default=5e-5, help="learning rate (default 5e-5)")
    train.add_argument("--cost-weight", type=float, default=0.0,
                       help="reward minus W x the run's cost, normalised within each question's group")
    train.add_argument("--budget-usd", type=float, help="stop cleanly once the rollouts have cost this much")
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint in DIR")
    train.add_argument("--save-every", type=int, default=10, metavar="N",
                       help="keep a checkpoint every N steps (default 10; --resume continues from the last)")
    train.add_argument("--lora-r", type=int, default=16, metavar="R", help="LoRA rank (default 16)")
    train.add_argument("--lora-targets", choices=["attention", "all"], default="attention",
                       help="LoRA on the attention projections (default) or on every linear layer")
    train.add_argument("--prompt", choices=["compact"], dest="prompt_style",
                       help="train (and plan, with the adapter) under the ~60-token compact prompt instead of "
                            "the ~1,300-token one: many times faster on a CPU")
    train.add_argument("--plan-steps", type=int, metavar="N", help="at most N steps per plan (default: [conductor] max_steps)")
    train.add_argument("--subtask-chars", type=int, metavar="N",
                       help="at most N characters per subtask while training (default: the conductor's)")
    train.add_argument("--shuffle-pool", action="store_true",
                       help="sample each plan under its own order of the pool: a conductor that always names "
                            "the first model then tries them all, and learns to route by name, not by place")
    train.add_argument("--prefer-levels", metavar="LEVELS", default="",
                       help="comma-separated preferences (best,balanced,cheap,fast or numbers 0..1): each question's "
                            "plans are sampled under one of them, stated in the prompt, and rewarded by its cost and "
                            "latency weights, so one adapter follows every level (replaces --cost-weight); with "
                            "--from-votes --bench ID or --method graded-dpo, the benches' pairs are graded under each level "
                            "instead")
    train.add_argument("--no-answer-cache", dest="answer_cache", action="store_false",
                       help="ask every call again, instead of reusing the answers already paid for (a model sent "
                            "the same prompt under the same sampling, in any training or --answer-cache bench)")
    train.add_argument("--rollout-concurrency", type=int, default=8, metavar="N",
                       help="at most N calls at once to each provider (default 8; a 429 halves it for a while)")
    train.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the plans (default 1)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--unsafe-code", action="store_true",
                       help="grade code items WITHOUT isolation where no sandbox can be had")
    train.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def train_command(args: argparse.Namespace, config) -> int:
    from rich.console import Console

    from .evals.loaders import load_suite
    from .evals.suite import SuiteError, split_of
    from .cli_common import EXIT_CANCELLED, EXIT_FAILED, EXIT_USAGE, comma_list, fail
    from .train.trainer import TrainError, TrainOptions, train

    if args.save_every < 1:
        return fail("--save-every must be at least 1", EXIT_USAGE)
    graded = args.method == "graded-dpo"
    if graded and args.from_votes:
        return fail("--method graded-dpo grades the pool on a suite and trains on it (with the votes too): name "
                    "the suite instead of --from-votes", EXIT_USAGE)
    if (args.graded_seeds != 1 or args.graded_systems != "direct:*") and not graded:
        return fail("--graded-seeds and --graded-systems go with --method graded-dpo", EXIT_USAGE)
    if args.bench_pairs is not None and not (args.bench or graded):
        return fail("--bench-pairs says which pairs the graded benches give: add --bench ID", EXIT_USAGE)
    if args.sft_weight is not None and not (args.from_votes or graded):
        return fail("--sft-weight weighs the chosen plans' likelihood in DPO: it goes with --from-votes or "
                    "--method graded-dpo", EXIT_USAGE)
    if args.beta is not None and not (args.from_votes or graded):
        return fail("--beta is DPO's: it goes with --from-votes or --method graded-dpo", EXIT_USAGE)
    if args.bench and not (args.from_votes or graded):
        return fail("--bench adds a graded bench's pairs to --from-votes (DPO); to train on a suite, name it: "
                    "stiva train SUITE ...", EXIT_USAGE)
    if args.from_votes:
        from .cli_votes import train_from_votes_command

        return train_from_votes_command(args, config)
    if not args.suite:
        return fail("name a suite to train on (or train on the compare-mode votes with --from-votes)", EXIT_USAGE)
    if (args.plan_steps is not None and args.plan_steps < 1) or (args.subtask_chars is not None and args.subtask_chars < 1):
        return fail("--plan-steps and --subtask-chars must be at least 1", EXIT_USAGE)
    if not 0 < args.temperature <= 5:
        return fail("--temperature must be above 0 and at most 5 (plans are sampled)", EXIT_USAGE)
    try:
        suite = load_suite(args.suite)
        if args.split:
            suite = split_of(suite, args.split)
    except SuiteError as exc:
        return fail(str(exc), EXIT_USAGE)
    if not args.split and any(item.meta.get("split") == "train" for item in suite.items):
        Console(stderr=True).print(f"[yellow]note:[/] training on every item of {suite.name}, its held-out ones "
                                    "too; --split train keeps them unseen for the bench after", highlight=False)
    if graded:
        return graded_command(args, config, suite)
    console = Console(stderr=True)
    view = TrainView(console, args.steps) if console.is_terminal else None
    stop: list[str] = []

    def on_signal(signum, frame):  # first: stop after this step; second: leave now
        if stop:
            os._exit(EXIT_CANCELLED)
        stop.append("cancelled")
        console.print("[yellow]stopping after this step (ctrl+c again to leave at once)…[/]")

    previous = signal.signal(signal.SIGINT, on_signal)
    options = TrainOptions(base=args.base, out=Path(args.out), steps=args.steps, group=args.group, batch=args.batch,
                           lr=args.lr, cost_weight=args.cost_weight, budget_usd=args.budget_usd, resume=args.resume,
                           seed=args.seed, unsafe_code=args.unsafe_code, save_every=args.save_every,
                           lora_r=args.lora_r, lora_targets=args.lora_targets, prompt_style=args.prompt_style,
                           max_steps_per_plan=args.plan_steps, max_subtask_chars=args.subtask_chars,
                           shuffle_pool=args.shuffle_pool, temperature=args.temperature,
                           answer_cache=args.answer_cache, rollout_concurrency=args.rollout_concurrency,
                           preferences=comma_list(args.prefer_levels))
    try:
        if view:
            with view:
                summary = train(config, suite, options, on_step=view.step, progress=view.stage,
                                should_stop=lambda: stop[0] if stop else None)
        else:
            summary = train(config, suite, options, should_stop=lambda: stop[0] if stop else None,
                            on_step=None if args.json else _print_step)
    except TrainError as exc:
        return fail(str(exc), EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - a model that cannot load, a provider gone: one line
        return fail(f"training failed: {type(exc).__name__}: {exc}", EXIT_FAILED)
    finally:
        signal.signal(signal.SIGINT, previous)
    if args.json:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        first = "—" if summary.reward_first is None else f"{summary.reward_first:.3f}"
        last = "—" if summary.reward_last is None else f"{summary.reward_last:.3f}"
        print(f"{fmt.count(summary.steps, 'step')} · reward {first} → {last} · {fmt.money(summary.cost_usd)} · "
              f"adapter {summary.adapter}")
        if summary.answers_reused:
            console.print(f"[dim]answer cache: {fmt.reused(summary.answers_reused, summary.saved_usd)}[/]",
                          highlight=False)
        from rich.markup import escape

        console.print("[dim]" + escape(f"use it: [conductor] adapter = \"{summary.adapter}\"; compare: stiva bench "
                                       f"{args.suite} --systems conductor,adapter:{summary.adapter}") + "[/]",
                      highlight=False, soft_wrap=True)
    if summary.stopped:
        console.print(f"[yellow]stopped:[/] {summary.stopped} — the adapter so far is saved; --resume continues",
                      highlight=False)
    return EXIT_CANCELLED if summary.stopped == "cancelled" else 0


def graded_command(args: argparse.Namespace, config, suite) -> int:
    """`stiva train SUITE --method graded-dpo`: grade the pool on SUITE, then DPO on the pairs."""
    import sys

    from .cli_common import EXIT_FAILED, EXIT_USAGE, fail
    from .cli_votes import dpo_usage_error, train_on_pairs
    from .store import HistoryFault, StoreError
    from .train.graded import GradingFailed, grade_pool
    from .train.trainer import TrainError

    error = dpo_usage_error(args, "--method graded-dpo")
    if error:
        return fail(error, EXIT_USAGE)

    def say(message: str) -> None:
        if not args.json:
            print(f"stiva train: {message}", file=sys.stderr, flush=True)

    try:
        benches = grade_pool(config, suite, args.graded_seeds, systems=args.graded_systems, progress=say,
                             unsafe_code=args.unsafe_code, answer_cache=args.answer_cache)
    except (GradingFailed, HistoryFault) as exc:  # it ran and stopped; a full disk, a damaged history
        return fail(str(exc), EXIT_FAILED)
    except (TrainError, StoreError) as exc:
        return fail(str(exc), EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - a pool gone: one line
        return fail(f"grading failed: {type(exc).__name__}: {exc}", EXIT_FAILED)
    return train_on_pairs(args, config, tuple(b.bench_id for b in benches) + tuple(args.bench),
                          args.bench_pairs or "best", "--method graded-dpo")


def _print_step(report) -> None:
    import sys

    print(f"step {report.step}: reward {report.reward_mean:.3f} ± {report.reward_std:.3f} · loss {report.loss:.4f} · "
          f"valid {report.valid_plan_rate:.0%} · {fmt.money(report.spent_usd)}", file=sys.stderr, flush=True)


def sparkline(values, width: int = 60) -> str:
    values = list(values)[-width:]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(SPARKS[min(len(SPARKS) - 1, int((v - lo) / span * (len(SPARKS) - 1) + 0.5))] for v in values)


class TrainView:
    """The live view: stage, reward curve, the last step's plans, the spend."""

    def __init__(self, console, steps: int):
        from rich.live import Live

        self.console = console
        self.steps = steps
        self.live = Live(console=console, refresh_per_second=4)
        self.rewards: list[float] = []
        self.last = None
        self.message = "starting"

    def __enter__(self):
        self.live.__enter__()
        self.live.update(self.render())
        return self

    def __exit__(self, *exc):
        return self.live.__exit__(*exc)

    def stage(self, message: str) -> None:
        self.message = message
        self.live.update(self.render())

    def step(self, report) -> None:
        self.rewards.append(report.reward_mean)
        self.last = report
        self.message = "training"
        self.live.update(self.render())

    def render(self):
        from rich.console import Group
        from rich.text import Text

        lines = [Text(f"stiva train · {self.message}", style="bold")]
        report = self.last
        if report is not None:
            lines.append(Text(f"step {report.step}/{self.steps} · reward {report.reward_mean:.3f} ± "
                              f"{report.reward_std:.3f} · loss {report.loss:.4f} · valid plans "
                              f"{report.valid_plan_rate:.0%} · steps/plan {report.mean_plan_steps:.2f}"))
            lines.append(Text(f"reward  {sparkline(self.rewards)}  (first {self.rewards[0]:.3f}, "
                              f"best {max(self.rewards):.3f})"))
            lines.append(Text(f"spent {fmt.money(report.spent_usd)} · this step {report.tokens:,} tokens "
                              f"{fmt.money(report.cost_usd)}"
                              + (f" · {fmt.count(report.reused, 'answer')} reused" if report.reused else "")
                              + f" · generate {fmt.seconds(report.generate_s)} rollouts "
                              f"{fmt.seconds(report.rollout_s)} update {fmt.seconds(report.update_s)}"))
            if report.picks:
                total = sum(report.picks.values())
                lines.append(Text("models  " + "  ".join(f"{m} {n / total:.0%}" for m, n in
                                                         sorted(report.picks.items(), key=lambda kv: -kv[1]))))
            lines += [Text("  " + sample, overflow="ellipsis", no_wrap=True) for sample in report.samples]
        return Group(*lines)
