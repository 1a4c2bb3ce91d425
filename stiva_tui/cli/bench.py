"""`stiva bench`: measure systems on a suite, with a live view, resumable, with a report.

    stiva bench SUITE --systems conductor,moa,direct:MODEL [--limit N] [--concurrency K]
                      [--budget-usd X] [--out DIR] [--fresh] [--json]
    stiva bench --list

stdout gets the result (a table, or with --json exactly one JSON object); the live progress
view goes to stderr when it is a terminal. The report files go to --out (default
`<data dir>/bench/<bench id>/`): report.json, report.md, frontier.png. The live view is view.py's
`ProgressView`.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from pathlib import Path

from ..core import display as fmt
from ..core.files import replace_file
from .common import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    fail,
    fold_parts,
    run_async,
    stdout_console,
    stop_on_signals,
)


def add_parser(sub, common) -> None:
    bench = sub.add_parser(
        "bench",
        parents=[common],
        help="measure the conductor against single models and MoA on a suite",
        description="Run every item of SUITE on every system, grade the answers, and report accuracy, tokens, "
        "cost and latency. Running the same command again continues an interrupted bench. "
        "`stiva bench import FILE` makes a suite and a bench of recorded answers of real models (see its --help).",
    )
    bench.add_argument("suite", nargs="?", help="a JSONL suite file, FORMAT:PATH (see --list), or a built-in name")
    bench.add_argument(
        "--systems",
        action="append",
        default=[],
        metavar="S1,S2",
        help="conductor, conductor-mini, moa, self-moa[:MODEL], direct:MODEL, direct:* (every pool model), "
        "adapter:DIR, oracle, random, knn[@LEVEL], best-single[@LEVEL] (routers learnt from the train split; "
        "comma-separated; repeatable)",
    )
    bench.add_argument("--limit", type=int, help="only the first N items of the suite")
    bench.add_argument(
        "--split", metavar="NAME", help="only the items whose meta.split is NAME (skills: train, heldout)"
    )
    bench.add_argument("--concurrency", type=int, default=4, help="items run at once, across systems (default 4)")
    bench.add_argument("--budget-usd", type=float, help="stop cleanly once this invocation has spent this much")
    bench.add_argument("--out", metavar="DIR", help="where the report files go (default: the data dir)")
    bench.add_argument("--fresh", action="store_true", help="start over instead of continuing the same bench")
    bench.add_argument(
        "--answer-cache",
        action="store_true",
        help="reuse the answers already paid for: a model sent the same prompt under the same "
        "sampling gets its recorded answer, with its recorded tokens, cost and latency",
    )
    bench.add_argument("--json", action="store_true", help="print the report as one JSON object")
    bench.add_argument(
        "--list", action="store_true", help="list the suite formats, the built-in suites and the sandbox"
    )
    bench.add_argument(
        "--unsafe-code",
        action="store_true",
        help="run model-written code WITHOUT isolation where no sandbox can be had (reports say so)",
    )


def run(args: argparse.Namespace, config) -> int:
    return run_async(bench(args, config))


async def bench(args: argparse.Namespace, config) -> int:
    import asyncio

    from rich.console import Console

    from ..bench.runner import BenchBusy, BenchError, BenchRunner
    from ..conductor.base import ConductorError
    from ..evals.loaders import load_suite
    from ..evals.suite import SuiteError, split_of
    from ..runtime import Runtime, StartupError
    from ..runtime.systems import SystemNameError, parse_systems
    from ..store import HistoryFault, StoreError
    from ..store.faults import HistoryFaultsHeldBack
    from .view import ProgressView

    if args.list:
        print(listing(config))
        return 0
    if not args.suite:
        return fail("name a suite (a JSONL file, FORMAT:PATH or a built-in; see stiva bench --list)", EXIT_USAGE)
    if args.concurrency < 1 or (args.limit is not None and args.limit < 1):
        return fail("--concurrency and --limit must be at least 1", EXIT_USAGE)
    try:
        suite = whole = load_suite(args.suite)
        if args.split:
            suite = split_of(suite, args.split)
        systems = parse_systems(args.systems or ["conductor"])
    except (SuiteError, SystemNameError) as exc:
        return fail(str(exc), EXIT_USAGE)
    stopped_by = stop_on_signals()
    try:
        runtime = await Runtime.create(config, conductor=args.conductor)
    except (StoreError, StartupError) as exc:  # a full disk, a read-only or damaged history: one line
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    console = Console(stderr=True)
    view = ProgressView(console) if console.is_terminal else None
    code = 0
    fault: Exception | None = None  # the history failed under the bench: said once, at the end
    held_back = HistoryFaultsHeldBack()
    answer_cache = None
    if args.answer_cache:
        from ..pool.answer_cache import AnswerCache

        answer_cache = AnswerCache.open()
    try:
        runner = BenchRunner(
            runtime,
            suite,
            systems,
            ranked_on=whole,
            concurrency=args.concurrency,
            budget_usd=args.budget_usd,
            limit=args.limit,
            fresh=args.fresh,
            on_progress=view.update if view else None,
            unsafe_code=args.unsafe_code,
            answer_cache=answer_cache,
        )
        runner.check()
        if runner.sandbox.unsafe and runner.sandbox_line:
            console.print(
                "[bold red]--unsafe-code:[/] model-written code runs WITHOUT isolation: it can read and "
                "write your files and reach the network",
                highlight=False,
            )
        if view:
            with view:
                outcome = await runner.run()
        else:
            outcome = await runner.run()
        status, reason = outcome.status, outcome.stop_reason
    except BenchError as exc:
        await _close(runtime, held_back)
        return fail(str(exc), EXIT_FAILED if isinstance(exc, BenchBusy) else EXIT_USAGE)
    except (ConductorError, StartupError) as exc:
        await _close(runtime, held_back)
        return fail(str(exc), EXIT_FAILED)
    except asyncio.CancelledError:
        code = stopped_by[0] if stopped_by else EXIT_CANCELLED
        status, reason = "stopped", "terminated" if code == EXIT_TERMINATED else "cancelled"
    except StoreError as exc:  # the history failed: a full disk, a read-only file, a damaged page
        fault, code = exc, EXIT_FAILED
        status, reason = "stopped", f"history: {exc}"
    out = None
    try:
        report, out = write_reports(runtime, runner, status, reason, args.out)
    except (StoreError, OSError) as exc:  # what is known is still printed; the files could not be
        report = build_bench_report(runner, list(runner.known.values()), status, reason)
        fault, code = fault or exc, EXIT_FAILED
    finally:
        await _close(runtime, held_back)
        if answer_cache is not None:
            answer_cache.close()
    if args.json:
        print(report.to_json())
    else:
        print_table(report)
    if runner.caching is not None:
        console.print(cache_line(runner.caching), highlight=False)
    if out is not None:
        console.print(f"[dim]bench {report.bench_id} · report in {out}[/]", highlight=False, soft_wrap=True)
    if fault is not None:
        message = str(fault) if isinstance(fault, StoreError) else f"cannot write the report: {fault}"
        return fail(message, code)
    if status != "finished":
        console.print(f"[yellow]stopped:[/] {reason} — run the same command again to continue", highlight=False)
    return code


async def _close(runtime, held_back) -> None:
    try:
        await runtime.aclose()
    finally:
        held_back.close()


def write_reports(runtime, runner, status: str, reason: str | None, out: str | None):
    """report.json, report.md and frontier.png for what the store holds of this bench."""
    from .. import paths
    from ..bench.report import plan_mix, report_markdown, write_frontier_png

    store = runtime.store
    records = store.bench_items(runner.bench_id)
    stored = {(record.system, record.item_id) for record in records}
    records += [record for record in runner.unsaved if (record.system, record.item_id) not in stored]
    report = build_bench_report(runner, records, status, reason)
    folder = Path(out).expanduser() if out else paths.data_dir() / "bench" / runner.bench_id
    folder.mkdir(parents=True, exist_ok=True)
    mixes = {}
    for system in runner.systems:
        if system.conductor:
            traces = []
            for record in records:
                if record.system == system.name and record.run_id:
                    try:
                        traces.append(store.get_trace(record.run_id))
                    except Exception:  # noqa: BLE001 - a run deleted from the history since
                        continue
            mixes[system.name] = plan_mix(traces)
    # Each file is written new and renamed over the old one: a symlink planted at report.json in a
    # shared folder is replaced, never written through.
    replace_file(folder / "report.json", (report.to_json() + "\n").encode())
    replace_file(folder / "report.md", report_markdown(report, mixes).encode())
    with tempfile.TemporaryDirectory(dir=folder, prefix=".frontier-") as scratch:
        drawn = Path(scratch) / "frontier.png"
        if write_frontier_png(report, drawn):
            os.replace(drawn, folder / "frontier.png")
    return report, folder


def build_bench_report(runner, records, status: str, reason: str | None):
    from ..bench.report import AnswerCacheLine, build_report

    report = build_report(
        runner.suite.name,
        runner.bench_id,
        [s.name for s in runner.systems],
        [item.id for item in runner.items],
        records,
        status=status,
        stop_reason=reason,
        # what knn and best-single learn from: the questions, and which are train items
        questions={item.id: item.question for item in runner.items},
        splits={item.id: None if item.meta.get("split") is None else str(item.meta["split"]) for item in runner.items},
    )
    report.sandbox = runner.sandbox_line
    if runner.caching is not None:
        cache = runner.caching
        report.answer_cache = AnswerCacheLine(
            reused=cache.hits,
            asked=cache.misses,
            saved_usd=round(cache.saved_usd, 10),
            off=cache.cache.failed if cache.cache is not None else None,
        )
    report.pool = runtime_pool_label(runner.runtime)
    return report


def cache_line(caching) -> str:
    """What the answer cache did, in one line, under the bench's table."""
    from ..core.display import reused

    off = caching.cache.failed if caching.cache is not None else None
    if off:
        return f"[yellow]answer cache off:[/] it {off}; every answer was asked"
    return f"[dim]answer cache: {reused(caching.hits, caching.saved_usd)}, {caching.misses} asked[/]"


def runtime_pool_label(runtime) -> str | None:
    """ "simulated pool" when the sim: models answer, "recorded pool (bench ID)" for a replay
    (every table, report and plot says so: sim/labels.py)."""
    from ..sim.pool import pool_label

    return pool_label(runtime.config)


COLUMNS = ("system", "n", "accuracy", "95% CI", "errors", "tokens/q", "cost/q", "p50", "p95")
# The same columns where the whole table does not fit: shorter headings and figures, no borders.
NARROW_COLUMNS = ("system", "n", "acc", "95% CI", "err", "tok/q", "cost/q", "p50", "p95")
NARROW_GAP = 2  # between two columns of the narrow table
SHORTENED = "names shortened: a model alone is its direct: system (--json has them whole)"


def print_table(report) -> None:
    console = stdout_console()  # piped: as wide as $COLUMNS says, else 80 columns
    table, shortened = bench_table(report, console.width)
    console.print(table)
    if shortened:
        console.print(f"[dim]{SHORTENED}[/]", highlight=False)
    from ..bench.report import not_timed

    untimed = not_timed(report.systems)
    if untimed:  # the "—" in p50 and p95, said in words
        console.print(f"p50, p95: {untimed}", highlight=False)
    # latency counts from each item's first call; the time items queued behind others, apart
    queued = [
        f"{row.system} {row.queue_wait_p50_s:.1f}/{row.queue_wait_p95_s:.1f}"
        for row in report.systems
        if row.queue_wait_p95_s
    ]
    if queued:
        console.print("queued before the first call, p50/p95 s: " + " · ".join(queued), highlight=False)
    summary = report.frontier
    routing = report.routing
    if routing is not None and routing.heldout_items:
        # one AIQ per system, the routing's (on the held-out items): the frontier's would be a second
        # figure for the same systems, on other items or over another range
        if summary.on_hull:
            console.print(f"frontier: {', '.join(summary.on_hull)}", highlight=False)
    elif summary.aiq is not None:
        single = summary.aiq_single_models
        console.print(
            f"AIQ {summary.aiq:.3f}"
            + (f" (single models alone {single:.3f})" if single is not None else "")
            + f" · frontier: {', '.join(summary.on_hull)}",
            highlight=False,
        )
    if routing is not None and (routing.heldout_items or routing.unavailable):
        from ..bench.report import routing_line

        line = routing_line(routing, len({item.id for item in report.items}))
        if routing.heldout_items:  # "AIQ on these 25 held-out items: single models 0.8 · knn 0.9 · ..."
            head, _, rest = line.partition(": ")
            line = "\n".join(fold_parts(rest.split(" · "), console.width, lead=f"{head}: "))
        console.print(line, highlight=False, soft_wrap=True)


def _latency(seconds: float | None) -> str:
    """A p50 or p95 cell: "—" where none was recorded (the line under the table says so)."""
    return "—" if seconds is None else fmt.seconds(seconds)


def bench_table(report, width: int):
    """The report's table for `width` columns, and whether its system names were shortened. The
    whole table (bordered, every name whole) where it fits; else one without borders, with short
    headings and figures, each system's name shortened (`bench/names.py`: `gpt-4o` for
    `direct:openai/gpt-4o`) and folded over lines where it is still too long: a row's name is never
    cut short, and no line is wider than `width` (but for a width no table's figures fit in). Names
    are shortened only where one of them does not fit whole."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..bench.names import fold, short_names
    from ..sim.labels import loud

    pool = f" · {loud(report.pool)}" if report.pool else ""
    title = f"{report.suite} · bench {report.bench_id}{pool}"
    whole = Table(title=title, title_justify="left")
    for column in COLUMNS:
        whole.add_column(column, justify="left" if column == "system" else "right", no_wrap=True)
    for row in report.systems:
        lo, hi = row.ci95
        whole.add_row(
            Text(row.system),
            str(row.n),
            "—" if row.accuracy is None else f"{row.accuracy:.1%}",
            f"{lo:.2f}–{hi:.2f}",
            str(row.errors),
            f"{row.tokens_per_question:,.0f}",
            fmt.money(row.cost_per_question),
            _latency(row.latency_p50_s),
            _latency(row.latency_p95_s),
        )
    if Console(file=io.StringIO(), width=10_000).measure(whole).maximum <= width:
        return whole, False

    figures = []
    for row in report.systems:
        lo, hi = row.ci95
        figures.append(
            [
                str(row.n),
                "—" if row.accuracy is None else f"{row.accuracy:.1%}",
                f"{lo:.2f}–{hi:.2f}",
                str(row.errors),
                fmt.tokens(round(row.tokens_per_question)),
                fmt.money(row.cost_per_question),
                _latency(row.latency_p50_s),
                _latency(row.latency_p95_s),
            ]
        )
    widths = [
        max([len(heading)] + [len(cells[i]) for cells in figures]) for i, heading in enumerate(NARROW_COLUMNS[1:])
    ]
    room = max(len("system"), width - sum(widths) - NARROW_GAP * len(widths))
    systems = [row.system for row in report.systems]
    fits = all(len(name) <= room for name in systems)  # then nothing is shortened
    short = {name: name for name in systems} if fits else short_names(systems)
    # a name is folded at its separators (+ > , : / -), never inside a word: the column is as wide
    # as the longest word, even where that passes `width` (a width no table's figures fit in)
    room = max([room] + [len(word) for name in short.values() for word in re.findall(r"[^+>,:/-]*[+>,:/-]?", name)])
    names = ["\n".join(fold(short[row.system], room)) for row in report.systems]
    narrow = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,  # NARROW_GAP between two columns
    )
    longest = max([len("system")] + [len(line) for name in names for line in name.split("\n")])
    narrow.add_column("system", width=min(room, longest))
    for heading in NARROW_COLUMNS[1:]:
        narrow.add_column(heading, justify="right", no_wrap=True)
    for name, cells in zip(names, figures):
        narrow.add_row(Text(name), *cells)
    return narrow, any(short[row.system] != row.system for row in report.systems)


def listing(config=None) -> str:
    from ..config import Config
    from ..evals.loaders import list_builtins, list_formats
    from ..sandbox import describe_isolation

    lines = ["Suite formats (FORMAT:PATH, PATH a local file or a Hugging Face dataset id):"]
    for suite_format in list_formats():
        lines.append(f"  {suite_format.name:<15} {suite_format.description}")
    lines += ["", "Built-in suites:"]
    for info in list_builtins():
        lines.append(f"  {info.name:<15} {info.items:>4} items  {info.description}")
    lines += [
        "",
        'A JSONL suite file: one {"id", "question", "answer", "grader"} object a line '
        "(graders: numeric, exact, contains, choice, math, code, judge).",
    ]
    sandbox = (config or Config()).sandbox
    lines += [
        "",
        "Code items run in the sandbox ([sandbox] in the config):",
        "  " + describe_isolation(sandbox.settings()),
    ]
    return "\n".join(lines)
