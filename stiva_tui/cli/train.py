"""`stiva train METHOD`: teach the conductor with a LoRA adapter, by one of three methods.

    stiva train grpo SUITE --base embedded|HF_ID|DIR --out DIR [--steps N] [--group G] [--batch Q]
                     [--lr X] [--cost-weight W] [--budget-usd X] [--resume] [--json] ...
    stiva train dpo --base ... --out DIR [--bench ID ...] [--bench-pairs best] [--beta X] [--sft-weight W]
    stiva train graded SUITE --base ... --out DIR [--graded-seeds K] [--graded-systems SYSTEMS] ...

grpo samples plans on SUITE, runs them on the pool, grades them and learns by GRPO
(train/trainer.py). dpo learns the compare-mode votes' preference pairs, and graded benches'
(--bench), by DPO (train/dpo.py). graded benches every single model of the pool on SUITE, then
learns by DPO which one each question's best answer came from (train/graded.py).

Each method's parser takes only its own options, so options that do not go together cannot be
written; what their values must be is checked once, in the method's options class (`Grpo`, `Dpo`,
`Graded`), built from the command line over the trainer's own options and defaults.

The spellings from before the methods still work (train_legacy.py maps them): `stiva train SUITE`
is grpo, `--method graded-dpo` is graded, `--from-votes` is dpo; an option that the method does not
take is said in one line.

A live view on stderr (when it is a terminal) shows the reward curve, the plans sampled and the
spend; stdout gets the summary (with --json exactly one object). ctrl+c stops after the current
step and keeps the adapter; a second ctrl+c leaves at once (the last checkpoint stays for --resume).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from typing import Any

from ..core import display as fmt
from .common import EXIT_CANCELLED, EXIT_FAILED, EXIT_USAGE, UsageError, command, fail, stop_after_step
from .train_options import METHODS


def add_parser(sub, common) -> None:
    from .train_legacy import legacy_argv

    train = sub.add_parser(
        "train",
        parents=[common],
        rewrite=lambda argv: legacy_argv(argv, common),
        help="teach the conductor your pool (GRPO, graded DPO) or your votes (DPO), with a LoRA adapter",
        description="Teach the conductor with a LoRA adapter, by one of the methods below (stiva train METHOD "
        "--help for its options). The spellings before the methods still work: stiva train SUITE is "
        "grpo, --method graded-dpo is graded, --from-votes is dpo.",
    )
    methods = train.add_subparsers(dest="train_method", metavar="METHOD", required=True)
    for name, method in METHODS.items():
        parser = methods.add_parser(name, parents=[common], help=method.help, description=method.description)
        for family in method.families:
            family(parser, name)


# --- each method's options, checked once -----------------------------------------------------------


def _given(args: argparse.Namespace, options_class: type, **values: Any) -> dict[str, Any]:
    """The fields of `options_class` that the command line gave (a tuple for a list), and
    `values`: the others keep the class's defaults."""
    names = {field.name for field in dataclasses.fields(options_class)}
    given = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    return {**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}, **values}


def _check_common(options) -> None:
    if options.save_every < 1:
        raise UsageError("--save-every must be at least 1")
    if any(value is not None and value < 1 for value in (options.max_steps_per_plan, options.max_subtask_chars)):
        raise UsageError("--plan-steps and --subtask-chars must be at least 1")


def _check_dpo(options) -> None:
    _check_common(options)
    if options.beta <= 0:
        raise UsageError("--beta must be above 0")
    if not options.sft_weight >= 0:
        raise UsageError("--sft-weight must be 0 or more")


@dataclass(frozen=True)
class Grpo:
    """`stiva train grpo SUITE`: the suite and the trainer's options (train/trainer.py)."""

    suite: str
    split: str | None
    json: bool
    options: Any  # TrainOptions
    given: tuple[str, ...] = ()  # the command line's --config FILE, for the closing hint

    def __post_init__(self) -> None:
        _check_common(self.options)
        if not 0 < self.options.temperature <= 5:
            raise UsageError("--temperature must be above 0 and at most 5 (plans are sampled)")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Grpo:
        from ..train.trainer import TrainOptions

        return cls(args.suite, args.split, args.json, TrainOptions(**_given(args, TrainOptions)))

    def run(self, config) -> int:
        return _grpo(self, config)


@dataclass(frozen=True)
class Dpo:
    """`stiva train dpo`: the votes' pairs and the --bench ones, the trainer's options (train/dpo.py)."""

    json: bool
    options: Any  # VoteTrainOptions

    def __post_init__(self) -> None:
        _check_dpo(self.options)
        if self.options.bench_pairs != "all" and not self.options.benches:
            raise UsageError("--bench-pairs says which pairs the graded benches give: add --bench ID")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Dpo:
        from ..train.dpo import VoteTrainOptions

        return cls(args.json, VoteTrainOptions(**_given(args, VoteTrainOptions)))

    def run(self, config) -> int:
        return _train_on_pairs(self.options, config, json_out=self.json, method="dpo", suite=None)


@dataclass(frozen=True)
class Graded:
    """`stiva train graded SUITE`: what is graded (train/graded.py), then DPO's options; the
    graded benches join `options.benches` once graded."""

    suite: str
    split: str | None
    json: bool
    seeds: int | None
    systems: str | None
    unsafe_code: bool
    answer_cache: bool
    options: Any  # VoteTrainOptions
    given: tuple[str, ...] = ()  # the command line's --config FILE, for the closing hint

    def __post_init__(self) -> None:
        _check_dpo(self.options)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Graded:
        from ..train.dpo import VoteTrainOptions

        shuffle = True if getattr(args, "shuffle_pool", None) is None else args.shuffle_pool  # on unless told off
        options = VoteTrainOptions(
            **_given(args, VoteTrainOptions, bench_pairs=args.bench_pairs or "best", shuffle_pool=shuffle)
        )
        return cls(
            args.suite, args.split, args.json, args.seeds, args.systems, args.unsafe_code, args.answer_cache, options
        )

    def run(self, config) -> int:
        return _graded(self, config)


@dataclass(frozen=True)
class RouterMethod:
    """`stiva train router SUITE --out DIR`: the graded answers, then the head (train/router.py)."""

    suite: str
    split: str | None
    json: bool
    out: Any
    features: str
    seed: int
    epochs: int
    unsafe_code: bool
    answer_cache: bool
    given: tuple[str, ...] = ()  # the command line's --config FILE, for the closing hint

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise UsageError("--epochs must be at least 1")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RouterMethod:
        return cls(
            args.suite,
            args.split,
            args.json,
            args.out,
            args.features,
            args.seed,
            args.epochs,
            args.unsafe_code,
            args.answer_cache,
        )

    def run(self, config) -> int:
        return _router(self, config)


OPTIONS: dict[str, type[Grpo | Dpo | Graded | RouterMethod]] = {
    "grpo": Grpo,
    "dpo": Dpo,
    "graded": Graded,
    "router": RouterMethod,
}


def run(args: argparse.Namespace, config) -> int:
    """`stiva train METHOD ...`: the method's options, checked, then the training."""
    if getattr(args, "usage_error", None):  # an old spelling whose options do not go together
        return fail(args.usage_error, EXIT_USAGE)
    try:
        method = OPTIONS[args.train_method].from_args(args)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    if args.config and "given" in {field.name for field in dataclasses.fields(method)}:
        # the bench a closing hint prints runs on the same config, as printed
        method = dataclasses.replace(method, given=("--config", args.config))
    if missing := _missing_train_extra(args.train_method):
        return fail(missing, EXIT_USAGE)
    from ..train.common import process_rank

    rank = process_rank()[0]
    return method.run(config) if rank == 0 else _run_quietly(method, config, rank)


def _run_quietly(method, config, rank: int) -> int:
    """`method` in one of a data-parallel training's other processes (torchrun, accelerate launch):
    the main process alone reports (the summary, the steps, the notes). An error of this one is
    still said, on one line naming the process."""
    import contextlib
    import io

    said = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(said):
        code = method.run(config)
    if code not in (0, EXIT_CANCELLED):
        errors = [line for line in said.getvalue().splitlines() if line.startswith("stiva: ")]
        print(f"stiva (process {rank}): {errors[-1].removeprefix('stiva: ') if errors else 'failed'}", file=sys.stderr)
    return code


def _missing_train_extra(method: str) -> str | None:
    """Why `method` cannot run where the `train` extra (TRL and datasets, which a chat install leaves
    out: pyproject.toml) is missing, and how to add it; None where it is there or not needed (the router
    needs neither). Asked before a suite, a model or the pool is loaded."""
    import importlib.util

    if method == "router":
        return None
    missing = [name for name in ("trl", "datasets") if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (
        f"{method} training needs the train extra ({' and '.join(missing)} not installed): "
        "pipx inject stiva-tui 'stiva-tui[train]', or pip install 'stiva-tui[train]' in Stiva's virtual environment"
    )


# --- the trainings ---------------------------------------------------------------------------------


def _router(method: RouterMethod, config) -> int:
    from ..store import StoreError
    from ..train.router import graded_answers, train_router
    from ..train.trainer import TrainError

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    try:
        suite = _load_suite(method.suite, method.split)
        labels = graded_answers(config, suite, say, unsafe_code=method.unsafe_code, answer_cache=method.answer_cache)
        say(f"{len(labels.items)} items, {len(labels.models)} models graded ({labels.source})")
        summary = train_router(labels, out=method.out, features=method.features, seed=method.seed,
                               epochs=method.epochs, progress=say)  # fmt: skip
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    except TrainError as exc:
        return fail(str(exc), EXIT_FAILED)
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED)
    if method.json:
        print(json.dumps(summary))
        return 0
    print(
        f"router saved in {summary['out']}: {len(summary['models'])} models, {summary['items']} items, "
        f"{summary['features']} representation, {summary['parameters']:,} parameters, {summary['train_s']:.1f} s"
    )
    split = ["--split", "heldout"] if _has_heldout(method.suite, suite) else []
    systems = f"router:{summary['out']},direct:*,oracle"
    words = [method.suite, *method.given, *_pool_words(config), *split, "--systems", systems]
    print(f"bench it: {command('stiva', 'bench', *words)}")
    return 0


def _has_heldout(name: str, trained_on) -> bool:
    """Whether the suite `name` has held-out items (`--split heldout` works on it): `trained_on` is
    the part of it the router learnt from (the whole suite without --split)."""
    from ..evals.loaders import load_suite
    from ..evals.suite import SuiteError

    if any(item.meta.get("split") == "heldout" for item in trained_on.items):
        return True
    try:
        return any(item.meta.get("split") == "heldout" for item in load_suite(name).items)
    except SuiteError:
        return False


def _load_suite(name: str, split: str | None):
    """The suite to train on (UsageError where it cannot be loaded), with a note on stderr when
    its held-out items are trained on too."""
    from rich.console import Console

    from ..evals.loaders import load_suite
    from ..evals.suite import SuiteError, split_of

    try:
        suite = load_suite(name)
        if split:
            suite = split_of(suite, split)
    except SuiteError as exc:
        raise UsageError(str(exc)) from None
    if not split and any(item.meta.get("split") == "train" for item in suite.items):
        Console(stderr=True).print(
            f"[yellow]note:[/] training on every item of {suite.name}, its held-out ones "
            "too; --split train keeps them unseen for the bench after",
            highlight=False,
        )
    return suite


def _grpo(method: Grpo, config) -> int:
    from rich.console import Console
    from rich.markup import escape

    from ..train.trainer import TrainError, train
    from .view import TrainView

    try:
        suite = _load_suite(method.suite, method.split)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    options = method.options
    console = Console(stderr=True)
    view = TrainView(console, options.steps) if console.is_terminal else None
    with stop_after_step(console) as should_stop:
        try:
            if view:
                with view:
                    summary = train(
                        config,
                        suite,
                        options,
                        on_step=view.step,
                        progress=lambda message: view.stage(_stage(message)),
                        should_stop=should_stop,
                    )
            else:
                summary = train(
                    config,
                    suite,
                    options,
                    should_stop=should_stop,
                    on_step=None if method.json else _print_step,
                    progress=None if method.json else _say_stage("grpo"),
                )
        except TrainError as exc:
            return fail(str(exc), EXIT_USAGE)
        except Exception as exc:  # noqa: BLE001 - a model that cannot load, a provider gone: one line
            return fail(f"training failed: {type(exc).__name__}: {exc}", EXIT_FAILED)
    if method.json:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        first = "—" if summary.reward_first is None else f"{summary.reward_first:.3f}"
        last = "—" if summary.reward_last is None else f"{summary.reward_last:.3f}"
        print(
            f"{fmt.count(summary.steps, 'step')} · reward {first} → {last} · {fmt.money(summary.cost_usd)} · "
            f"adapter {summary.adapter}"
        )
        if summary.answers_reused:
            console.print(
                f"[dim]answer cache: {fmt.reused(summary.answers_reused, summary.saved_usd)}[/]", highlight=False
            )
        console.print(
            "[dim]"
            + escape(
                f'use it: [conductor] adapter = "{summary.adapter}"; compare: '
                + command(
                    "stiva",
                    "bench",
                    method.suite,
                    *method.given,
                    *_pool_words(config),
                    "--systems",
                    f"conductor,adapter:{summary.adapter}",
                )
            )
            + "[/]",
            highlight=False,
            soft_wrap=True,
        )
    if summary.stopped:
        console.print(
            f"[yellow]stopped:[/] {summary.stopped} — the adapter so far is saved; --resume continues", highlight=False
        )
    return EXIT_CANCELLED if summary.stopped == "cancelled" else 0


def _graded(method: Graded, config) -> int:
    """Grade the pool on the suite (a bench of each system, under each seed), then DPO on the pairs."""
    from ..store import HistoryFault, StoreError
    from ..train.common import on_main_process
    from ..train.graded import GradingFailed, grade_pool
    from ..train.trainer import TrainError

    try:
        suite = _load_suite(method.suite, method.split)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)

    def say(message: str) -> None:
        if not method.json:
            print(f"stiva train graded: {message}", file=sys.stderr, flush=True)

    chosen = {"seeds": method.seeds, "systems": method.systems}
    try:
        # in a data-parallel training the main process grades, the others wait for its benches
        benches = on_main_process(
            lambda: grade_pool(
                config,
                suite,
                progress=say,
                unsafe_code=method.unsafe_code,
                answer_cache=method.answer_cache,
                **{k: v for k, v in chosen.items() if v is not None},
            ),
            method.options.device,
        )
    except (GradingFailed, HistoryFault) as exc:  # it ran and stopped; a full disk, a damaged history
        return fail(str(exc), EXIT_FAILED)
    except (TrainError, StoreError) as exc:
        return fail(str(exc), EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - a pool gone: one line
        return fail(f"grading failed: {type(exc).__name__}: {exc}", EXIT_FAILED)
    options = dataclasses.replace(
        method.options, benches=tuple(b.bench_id for b in benches) + tuple(method.options.benches)
    )
    return _train_on_pairs(
        options, config, json_out=method.json, method="graded", suite=method.suite, given=method.given
    )


def _train_on_pairs(
    options, config, *, json_out: bool, method: str, suite: str | None, given: tuple[str, ...] = ()
) -> int:
    """DPO on the votes' pairs and the graded benches' (`stiva train dpo`, `stiva train graded`)."""
    from rich.console import Console
    from rich.markup import escape

    from ..train.dpo import train_from_votes
    from ..train.trainer import TrainError

    console = Console(stderr=True)

    def on_step(report) -> None:
        if not json_out:
            print(
                f"step {report.step}/{options.steps}: loss {report.loss:.4f} · chosen above rejected "
                f"{report.accuracy:.0%} · margin {report.margin:+.3f} · {fmt.seconds(report.seconds)}",
                file=sys.stderr,
                flush=True,
            )

    def stage(message: str) -> None:
        if not json_out:
            print(f"stiva train {method}: {_stage(message, method)}", file=sys.stderr, flush=True)

    with stop_after_step(console) as should_stop:
        try:
            summary = train_from_votes(config, options, on_step=on_step, progress=stage, should_stop=should_stop)
        except TrainError as exc:
            return fail(str(exc), EXIT_USAGE)
        except Exception as exc:  # noqa: BLE001 - a model that cannot load: one line
            return fail(f"training failed: {type(exc).__name__}: {exc}", EXIT_FAILED)
    if json_out:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        first = "—" if summary.loss_first is None else f"{summary.loss_first:.4f}"
        last = "—" if summary.loss_last is None else f"{summary.loss_last:.4f}"
        skipped = f" ({', '.join(f'{k} {v}' for k, v in summary.skipped.items())} left out)" if summary.skipped else ""
        graded = f" and {fmt.count(summary.graded, 'graded pair')}" if summary.graded else ""
        print(
            f"{fmt.count(summary.steps, 'step')} on {fmt.count(summary.pairs, 'pair')} from "
            f"{fmt.count(summary.votes, 'vote')}{graded}{skipped} · "
            f"DPO loss {first} → {last} · adapter {summary.adapter}"
        )
        console.print(
            "[dim]"
            + escape(
                f'use it: [conductor] adapter = "{summary.adapter}"; compare: '
                + command(
                    "stiva",
                    "bench",
                    suite or "SUITE",
                    *given,
                    *_pool_words(config),
                    "--systems",
                    f"conductor,adapter:{summary.adapter}",
                )
            )
            + "[/]",
            highlight=False,
            soft_wrap=True,
        )
    if summary.stopped:
        console.print(
            f"[yellow]stopped:[/] {summary.stopped} — the adapter so far is saved; --resume continues", highlight=False
        )
    return EXIT_CANCELLED if summary.stopped == "cancelled" else 0


def _stage(message: str, method: str = "grpo") -> str:
    """A trainer's stage as the user reads it: "training" alone said nothing of the minutes before
    step 1, in which GRPO's first plans are written, run on the pool and graded."""
    if message != "training":
        return message
    if method == "grpo":
        return "training: step 1 writes plans, runs them on the pool and grades them (the slowest wait)"
    return "training: DPO on the pairs, a line at each step"


def _say_stage(method: str):
    """The stages (loading the model, preparing, grading, building pairs) on stderr, one line each."""

    def say(message: str) -> None:
        print(f"stiva train {method}: {_stage(message, method)}", file=sys.stderr, flush=True)

    return say


def _pool_words(config) -> list[str]:
    """["--pool", ...] where the training ran on another pool than the configured one (the bench
    that compares what it trained must run on the same pool), else []."""
    sim = getattr(config, "sim", None)
    if sim is None:
        return []
    if sim.replay:
        return ["--pool", f"replay:{sim.replay}"]
    return ["--pool", f"sim:{sim.seed}" if sim.seed else "sim"]


def _print_step(report) -> None:
    print(
        f"step {report.step}: reward {report.reward_mean:.3f} ± {report.reward_std:.3f} · loss {report.loss:.4f} · "
        f"valid {report.valid_plan_rate:.0%} · {fmt.money(report.spent_usd)}",
        file=sys.stderr,
        flush=True,
    )
