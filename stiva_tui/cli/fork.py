"""`stiva ask --fork RUN_ID:STEP --model M [--subtask "..."]`: a branch of a finished run.

Step STEP (numbered as the tree shows it) runs again on M, with every step that reads it; the
others keep their outputs and are neither called nor paid again (engine/fork.py, through the
session service every front end uses). The live view shows the branch run on a terminal; then
stdout gets the branch as `stiva history show` prints a run (each step, kept or run again, its
answer, and what it added), or with --json its trace. The branch is kept under the run: `stiva
history show RUN_ID` shows both. It loads no conductor: a fork plans nothing.
"""

from __future__ import annotations

import argparse

from .common import EXIT_CANCELLED, EXIT_FAILED, EXIT_TERMINATED, EXIT_USAGE, fail, stop_on_signals


def parse_fork(args: argparse.Namespace) -> tuple[str, str, str] | str:
    """(run id, step, model) from the options, or the one line that says what is wrong."""
    if args.fork is None:
        return "--model and --subtask go with --fork RUN_ID:STEP"
    if args.question is not None:
        return "--fork takes no question: it asks the run's question again"
    run_id, colon, step = args.fork.strip().rpartition(":")
    if not colon or not run_id.strip() or not step.strip():
        return f"--fork {args.fork}: give RUN_ID:STEP, e.g. 3f2a9c1e:2 (stiva history lists the runs)"
    if not args.model:
        return "--fork needs --model M: the pool model the step runs on (stiva models lists them)"
    for name in ("rounds", "max_steps", "baseline", "preset", "continue_id"):
        if getattr(args, name, None) is not None:
            return f"--{name.replace('_', '-')} does not go with --fork: a fork runs the run's own plan"
    return run_id.strip(), step.strip(), args.model.strip()


async def fork(args: argparse.Namespace, config) -> int:
    import asyncio
    import contextlib

    from rich.console import Console

    from ..runtime import AskError, Fork, Runtime, StartupError
    from ..store import HistoryFault, StoreError
    from .view import LiveView

    parsed = parse_fork(args)
    if isinstance(parsed, str):
        return fail(parsed, EXIT_USAGE)
    run_id, step, model = parsed
    stopped_by = stop_on_signals()
    try:
        runtime = await Runtime.create(config, conductor=args.conductor)
    except (StoreError, StartupError) as exc:
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    console = Console(stderr=True)
    try:
        request = Fork(
            run_id,
            step,
            model,
            subtask=args.subtask,
            source="cli",
            options={"budget_usd": args.budget_usd, "budget_tokens": args.budget_tokens},
        )
        _, plan = runtime.sessions.fork_plan(request)  # an unknown run, step or model: one line, nothing run
        # the live view of `stiva ask`, on a terminal without --json
        view = LiveView(console, plan.question) if not args.json and console.is_terminal else None
        with view if view is not None else contextlib.nullcontext():
            outcome = await runtime.sessions.fork(request, emit=view.handle if view is not None else None)
        return _present(runtime, outcome, console, json_trace=args.json)
    except AskError as exc:
        return fail(str(exc), EXIT_USAGE)
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED)
    except asyncio.CancelledError:
        code = stopped_by[0] if stopped_by else EXIT_CANCELLED
        return fail("terminated" if code == EXIT_TERMINATED else "cancelled", code)
    finally:
        await runtime.aclose()


def _present(runtime, outcome, console, *, json_trace: bool) -> int:
    from rich.markdown import Markdown
    from rich.markup import escape

    from ..core.terminal import printable
    from ..store.export import run_markdown
    from .common import stdout_console

    for warning in outcome.warnings:
        console.print(f"[yellow]warning:[/] {escape(printable(warning))}", highlight=False)
    result = outcome.result
    runtime.store.wait_for_writes()
    trace = runtime.store.get_trace(result.run_id)
    if json_trace:
        print(trace.model_dump_json(indent=2))
    else:
        stdout_console().print(Markdown(printable(run_markdown(trace, plan=True))))
        console.print(
            f"[dim]branch {outcome.branch} of run {outcome.original} · stiva history show {outcome.original} "
            "shows the run with its branches[/]",
            highlight=False,
            soft_wrap=True,
        )
    if result.status != "finished":
        return fail(result.error or result.status, EXIT_FAILED)
    return 0
