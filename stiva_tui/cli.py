"""The `stiva` command.

    stiva                      open the terminal app
    stiva ask QUESTION         plan, run and print the answer (live view on stderr; --json trace)
    stiva models [--json]      the pool, availability, prices and the conductor choice
    stiva serve                an OpenAI-compatible API over the same engine
    stiva bench SUITE          measure systems on a suite (cli_bench.py)
    stiva train SUITE          teach the conductor the pool: GRPO + LoRA (cli_train.py)

Exit code 0 on success; otherwise non-zero with a one-line reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Coroutine, Sequence

from .cli_common import (  # noqa: F401 - re-exported: the exit codes are the command's interface
    EXIT_BROKEN_PIPE,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    fail,
    stop_on_signals,
)

from .core import format as fmt

# asyncio and everything else load inside the commands: `stiva --help` stays fast, and a ctrl+c
# right after start lands in main(), which answers it with one line.

# The conductor presets of runtime.modes.PRESETS, named here so that `--help` imports no engine.
PRESET_NAMES = ("conductor", "conductor-mini")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; the options every command shares are None when not given."""
    args = build_parser().parse_args(argv)
    for name in ("config", "conductor", "pool", "prefer"):
        if not hasattr(args, name):
            setattr(args, name, None)
    return args


def build_parser() -> argparse.ArgumentParser:
    # SUPPRESS: a subcommand that is not given an option leaves the value given before it
    # (`stiva --pool sim bench ...`), instead of resetting it to None.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--config", metavar="FILE", help="config file (default: the platform config dir)")
    common.add_argument("--conductor", metavar="BACKEND[:MODEL]",
                        help="auto, local[:HF_ID_OR_DIR], embedded or remote:POOL_MODEL_ID")
    common.add_argument("--pool", metavar="sim|sim:SEED|replay:BENCH_ID",
                        help="use another pool instead of the configured one: sim, the SIMULATED pool whose "
                             "strengths are known (sim:SEED: under another seed, another draw of which calls are "
                             "right), or replay:BENCH_ID, the recorded direct: answers of a bench "
                             "(both served by Stiva on 127.0.0.1)")
    common.add_argument("--prefer", metavar="LEVEL",
                        help="what the conductor optimises for: best, balanced, cheap, fast, or a number from 0 "
                             "(best) to 1 (cheap); the budget and the step limit still bound every plan "
                             "(default: [conductor] prefer)")

    parser = argparse.ArgumentParser(
        prog="stiva", parents=[common],
        description="A conductor model orchestrates a pool of language models. With no command, opens the app.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"stiva {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ask = sub.add_parser("ask", parents=[common], help="answer one question and print it")
    ask.add_argument("question", help="the question (use - to read it from stdin)")
    ask.add_argument("--json", action="store_true", help="print one JSON trace instead of the live view")
    ask.add_argument("--rounds", type=int, help="conductor rounds (default from config: 1)")
    ask.add_argument("--max-steps", type=int, help="at most this many steps per workflow (default 5)")
    ask.add_argument("--budget-usd", type=float, help="stop the run once it has cost this much")
    ask.add_argument("--budget-tokens", type=int, help="stop the run once it has used this many tokens")
    ask.add_argument("--baseline", metavar="SYSTEM",
                     help="run another system instead of the conductor: direct:MODEL (one model), moa "
                          "(Mixture-of-Agents), or any one system stiva bench --systems takes")
    ask.add_argument("--preset", choices=sorted(PRESET_NAMES),
                     help="the conductor with a preset's limits (conductor-mini: 2 steps, 1 round)")
    ask.add_argument("--continue", dest="continue_id", metavar="ID",
                     help="add this question to conversation ID (printed after each answer)")

    models = sub.add_parser("models", parents=[common], help="list the pool and the conductor choice")
    models.add_argument("--json", action="store_true", help="print JSON")
    models.add_argument("--no-discovery", action="store_true", help="skip probing local servers")

    history = sub.add_parser("history", parents=[common], help="the stored runs, newest first")
    history.add_argument("--json", action="store_true", help="print JSON")
    history.add_argument("--limit", type=int, default=20, help="at most this many runs (default 20)")
    shows = history.add_subparsers(dest="history_command",
                                   metavar="{show ID, conversations, rename ID TITLE, delete ID}")
    show = shows.add_parser("show", help="one run's trace with its plan, or a conversation's runs")
    show.add_argument("run_id", metavar="ID", help="a run's or a conversation's id, or a unique start of one "
                                                  "(4 characters or more), as any stiva listing prints it")
    show.add_argument("--json", dest="show_json", action="store_true", help="print the trace as JSON")
    conversations = shows.add_parser("conversations", help="the conversations, newest first")
    conversations.add_argument("--json", dest="show_json", action="store_true", help="print them as JSON")
    rename = shows.add_parser("rename", help="give a conversation a new title (as the app's history does)")
    rename.add_argument("run_id", metavar="ID", help="a conversation's id, or a unique start of one")
    rename.add_argument("title", metavar="TITLE", help="the new title")
    delete = shows.add_parser("delete", help="delete a conversation (its runs stay, as runs) or a run")
    delete.add_argument("run_id", metavar="ID", help="a conversation's or a run's id, or a unique start of one")

    from .cli_bench import add_parser as add_bench_parser
    from .cli_train import add_parser as add_train_parser
    from .cli_votes import add_parser as add_votes_parser

    add_bench_parser(sub, common)
    add_train_parser(sub, common)
    add_votes_parser(sub, common)

    configure = sub.add_parser("config", parents=[common], help="create the config file if there is none, "
                               "print its path, and open it with --edit")
    configure.add_argument("--edit", action="store_true", help="open it in $EDITOR (or $VISUAL)")

    serve = sub.add_parser("serve", parents=[common], help="serve the OpenAI-compatible API")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8787)")
    serve.add_argument("--no-auth", action="store_true", help="no bearer token (loopback hosts only)")
    serve.add_argument("--show-token", action="store_true", help="print the API token and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the process exit code. ctrl+c at any point is a one-line "cancelled" and
    130, never a traceback; a reader that closes the pipe early ends it quietly with 141."""
    try:
        return _command(parse_args(argv))
    except KeyboardInterrupt:
        return fail("cancelled", EXIT_CANCELLED)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    finally:
        # Leaving can wait for a worker thread (a model stops at its next token): another ctrl+c
        # then ends the process at once, with the same code, instead of a traceback.
        signal.signal(signal.SIGINT, lambda *_: os._exit(EXIT_CANCELLED))


# Set once the app has quit and closed its runtime (the history is written and closed): the
# interpreter's own teardown of torch and the model then took 2.6 s after the screen was gone.
_closed_cleanly = False


def entry() -> None:
    """The `stiva` command. A command stopped by a signal leaves at once once it has cleaned up
    (its run is stored as cancelled): the interpreter's own shutdown would wait for model threads,
    and a ctrl+c pressed again meanwhile ended the process with a signal instead of 130."""
    code = main()
    if code in (EXIT_CANCELLED, EXIT_TERMINATED) or _closed_cleanly:
        import logging

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


def _command(args: argparse.Namespace) -> int:
    from .config import ConfigError, load_config

    if args.command == "config":  # before loading it: a broken file is what one may want to open
        return configure(args)
    try:
        config = load_config(args.config)
        if getattr(args, "pool", None):
            from .sim.pool import pool_config

            config = pool_config(config, args.pool)
        if getattr(args, "prefer", None) is not None:
            config = with_preference(config, args.prefer)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    if config.sim is None or args.command in ("history", "votes"):
        return _dispatch(args, config)
    from .bench.replay import start_pool

    try:  # the simulated pool's server runs for the whole command, the app's session included
        config, server = start_pool(config)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    try:
        return _dispatch(args, config)
    finally:
        server.stop()


def with_preference(config, prefer: str):
    """`config` with `[conductor] prefer` set from `--prefer` (ConfigError for a bad one)."""
    from .config import ConfigError
    from .core.preference import PreferenceError, parse_preference

    try:
        parse_preference(prefer)
    except PreferenceError as exc:
        raise ConfigError(f"--prefer: {exc}") from None
    return config.model_copy(update={"conductor": config.conductor.model_copy(update={"prefer": prefer})})


def _dispatch(args: argparse.Namespace, config) -> int:
    if args.command == "ask":
        return _run(ask(args, config))
    if args.command == "models":
        return _run(models(args, config))
    if args.command == "history":
        return history(args)
    if args.command == "votes":
        from .cli_votes import votes_command

        return votes_command(args)
    if args.command == "bench":
        from .cli_bench import bench

        return _run(bench(args, config))
    if args.command == "train":
        from .cli_train import train_command

        return train_command(args, config)
    if args.command == "serve":
        from .server.app import serve
        from .store import HistoryFault, StoreError

        try:
            return serve(config, args.host, args.port, args.no_auth, args.show_token, conductor=args.conductor)
        except StoreError as exc:  # the history cannot be opened: a damaged, read-only or foreign file
            return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    from .tui.app import run_app

    global _closed_cleanly
    code = run_app(config, args.conductor)
    _closed_cleanly = True
    return code


def configure(args: argparse.Namespace) -> int:
    """`stiva config`: write the commented template where the config file belongs if there is no
    file yet (never over one), print the path, and with --edit open it."""
    import shlex
    import subprocess

    from . import paths
    from .config_template import TEMPLATE

    path = Path(args.config).expanduser() if args.config else paths.config_file()
    created = False
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as handle:  # exclusive: never over a file made meanwhile
                handle.write(TEMPLATE)
            created = True
        except FileExistsError:
            pass
        except OSError as exc:
            return fail(f"cannot create {path}: {exc.strerror or exc}", EXIT_FAILED)
    print(path)
    if created:
        print("stiva: created it with every setting commented out (the defaults)", file=sys.stderr)
    if args.edit:
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            return fail("set $EDITOR (or $VISUAL) to open it, or open the path above", EXIT_USAGE)
        return subprocess.call([*shlex.split(editor), str(path)])
    return 0


def _run(command: Coroutine[Any, Any, int]) -> int:
    """Run an async command; cancelled from outside, it is a ctrl+c."""
    import asyncio

    try:
        return asyncio.run(command)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


# --- stiva ask -------------------------------------------------------------------------------------


async def ask(args: argparse.Namespace, config) -> int:
    import asyncio

    from .conductor.base import ConductorError
    from .runtime import AskError, Runtime, StartupError
    from .store import HistoryFault, StoreError
    from .store.faults import HistoryFaultsHeldBack

    question = _read_question(args.question)
    if not question.strip():
        return fail("the question is empty", EXIT_USAGE)
    stopped_by = stop_on_signals()
    try:
        runtime = await Runtime.create(config, conductor=args.conductor)
    except (StoreError, StartupError) as exc:  # a full disk, a read-only or damaged history: one line
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    # Each failed history write logs a line (the writer's, the engine's, the store's at close):
    # held back, and said once, in the one line `_history_trouble` makes of them.
    held_back = HistoryFaultsHeldBack(every_error=True)
    try:
        return await _ask(args, runtime, question, held_back)
    except AskError as exc:
        return fail(str(exc), EXIT_USAGE)
    except (ConductorError, StartupError) as exc:
        return fail(str(exc), EXIT_FAILED)
    except StoreError as exc:  # the history failed where nothing else caught it
        return fail(str(exc), EXIT_FAILED)
    except asyncio.CancelledError:
        code = stopped_by[0] if stopped_by else EXIT_CANCELLED
        trouble = _history_trouble(runtime, held_back)
        if trouble is not None:
            fail(trouble)
        return fail("terminated" if code == EXIT_TERMINATED else "cancelled", code)
    finally:
        await runtime.aclose()
        held_back.close()


def _history_trouble(runtime, held_back) -> str | None:
    """Why the run just asked is not (all) in the history, as the one line to say, or None.
    Waits for the queued writes first; the first full disk, read-only or damaged file is the
    reason before any other failure."""
    from .store import StoreError

    store = runtime.store
    if store is None:
        return None
    failures: list[StoreError] = []
    try:
        store.wait_for_writes()
    except StoreError as exc:
        failures.append(exc)
    while (error := store.take_write_error()) is not None:  # nobody else will hear of these
        failures.append(error)
    reason = store.fault or held_back.fault or held_back.error or (failures[0] if failures else None)
    if reason is None:
        return None
    # A damaged page met by a read alone (the run itself written) is said as the store says it.
    return f"the history could not record this run: {reason}" if store.lost_writes or failures else str(reason)


def _read_question(argument: str) -> str:
    """The question (from stdin for "-") as valid Unicode: bytes that are not UTF-8 become U+FFFD,
    and a line says so, so that nothing deeper ever holds text it cannot store or send."""
    if argument == "-":
        raw = sys.stdin.buffer.read()
    else:  # Python keeps undecodable argv bytes as lone surrogates; these are the bytes again
        raw = argument.encode("utf-8", "surrogateescape")
    question = raw.decode("utf-8", "replace")
    if "\ufffd" in question and "\ufffd" not in raw.decode("utf-8", "ignore"):
        print("stiva: note: the question held bytes that are not UTF-8; they were replaced with \ufffd",
              file=sys.stderr)
    return question


def _mode(args: argparse.Namespace, runtime):
    """(mode, run options) of what `stiva ask` runs: the conductor (maybe a preset), or the system
    `--baseline` names (runtime/systems.py, the grammar compare and `stiva bench` read too)."""
    from .runtime import AskError, ConductorMode, SystemNameError, one_system

    if args.baseline is None:
        return ConductorMode(preset=args.preset), {}
    try:
        system = one_system(args.baseline, runtime.models, runtime.config.moa.aggregator)
    except SystemNameError as exc:
        raise AskError(str(exc)) from None
    return system.mode, dict(system.options)


async def _ask(args, runtime, question: str, held_back) -> int:
    from rich.console import Console

    from rich.markup import escape

    from .cli_view import LiveView, printable
    from .runtime import Ask, ConductorMode

    console = Console(stderr=True)
    show_live = not args.json and console.is_terminal
    mode, options = _mode(args, runtime)
    request = Ask(question, mode=mode, source="cli", conversation_id=args.continue_id, options=dict(
        options, rounds=args.rounds, max_steps=args.max_steps, budget_usd=args.budget_usd,
        budget_tokens=args.budget_tokens))
    for warning in runtime.warnings:
        console.print(f"[yellow]warning:[/] config: {escape(printable(warning))}", highlight=False)
    runtime.sessions.check(request)  # an unknown model or conversation fails before a model loads
    if isinstance(mode, ConductorMode):
        await _load_conductor(runtime, console, quiet=args.json)
    view = LiveView(console, question) if show_live else None
    if view:
        with view:
            outcome = await runtime.sessions.ask(request, emit=view.handle)
    else:
        outcome = await runtime.sessions.ask(request)
    result = outcome.result
    trouble = _history_trouble(runtime, held_back)
    for warning in outcome.warnings if trouble is None else ():  # the history's: said once, below
        console.print(f"[yellow]warning:[/] {escape(printable(warning))}", highlight=False)
    if args.json:
        print(_trace_json(runtime, result, question, mode, args.baseline, recorded=trouble is None))
    elif result.status == "finished":
        print(printable(result.answer))
        for note in _fallback_notes(runtime, result.run_id):
            console.print(f"[yellow]fallback:[/] {escape(note)}", highlight=False, soft_wrap=True)
        if view is None:  # the live view's last frame already ends on the same totals
            t = result.totals
            console.print(f"[dim]{t.prompt_tokens:,} in · {t.completion_tokens:,} out"
                          f"{' (estimated)' if t.estimated else ''} · {fmt.money(t.cost_usd)} · "
                          f"{fmt.seconds(t.latency_s)}[/]")
    # Only an id that is on disk, with this run, is offered: `--continue` on any other would fail.
    if (outcome.conversation_id and not args.json and trouble is None
            and _conversation_kept(runtime, outcome.conversation_id, result.run_id)):
        console.print(f"[dim]conversation {outcome.conversation_id} · continue it with "
                      f"stiva ask --continue {outcome.conversation_id} \"...\"[/]", highlight=False, soft_wrap=True)
    if result.status != "finished":
        code = fail(result.error or result.status, EXIT_FAILED)
        return fail(trouble, code) if trouble is not None else code
    if trouble is not None:  # the answer is shown; that it is not kept is a failure all the same
        return fail(trouble, EXIT_FAILED)
    return 0


def _conversation_kept(runtime, conversation_id: str, run_id: str) -> bool:
    """Whether the history holds the conversation with this run (False where it cannot be read)."""
    from .store import StoreError

    if runtime.store is None:
        return False  # kept in this process's memory only: gone once `stiva ask` ends
    try:
        return runtime.store.holds_run(conversation_id, run_id)
    except StoreError:
        return False


def _fallback_notes(runtime, run_id: str) -> list[str]:
    """One line for each step that ran on another model than its own (its model kept failing)."""
    if runtime.store is None:
        return []
    try:
        trace = runtime.store.get_trace(run_id)
    except Exception:  # noqa: BLE001 - the history may be unwritable: the answer stands
        return []
    # steps numbered from 1, as the live view and the tree number them
    return [f"step {fmt.step(step.index)} of round {round_.round} was answered by {step.model}: "
            f"{step.first_model} failed" for round_ in trace.rounds for step in round_.steps
            if step.status == "finished" and step.on_fallback]


async def _load_conductor(runtime, console, quiet: bool) -> None:
    """Choose and load the conductor with a progress line; say what it runs on."""
    from .conductor.select import loaded_facts

    with console.status("choosing the conductor…") as status:
        def progress(fraction: float | None, message: str) -> None:
            pct = f" {fraction:.0%}" if fraction is not None else ""
            status.update(f"{message}{pct}")

        conductor = await runtime.ensure_conductor(progress)
    if not quiet:
        facts = loaded_facts(conductor)
        console.print(f"[dim]conductor:[/] {conductor.backend} · {conductor.model}"
                      f"{' · ' + facts if facts else ''} — {runtime.conductor_reason}", highlight=False, soft_wrap=True)


def _trace_json(runtime, result, question: str, mode, system: str | None, *, recorded: bool = True) -> str:
    """The run's trace as `stiva ask --json` prints it, with what the conductor runs on. Where the
    history could not record the run (`recorded` False, or it cannot be read back), what it
    holds of it is completed from the run's result: the answer is printed all the same."""
    from .runtime import ConductorMode
    from .store import StoreError

    with_conductor = isinstance(mode, ConductorMode)
    try:
        trace = runtime.store.get_trace(result.run_id)
    except StoreError:
        if recorded:
            raise
        trace = _result_trace(result, question, mode, system)
    if not recorded:
        t = result.totals
        trace = trace.model_copy(update=dict(
            conversation_id=None, status=result.status, failure=result.failure,
            answer=result.answer if result.status == "finished" else trace.answer,
            error=result.error or None, totals=type(trace.totals)(
                prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens, cost_usd=t.cost_usd,
                latency_s=t.latency_s, estimated=t.estimated)))
    if with_conductor and runtime.conductor is not None:
        # What the run recorded (backend, model, usage) stands; the rest is what it runs on.
        facts = {k: v for k, v in runtime.conductor.describe().items()
                 if k in type(trace.conductor).model_fields and k not in ("backend", "model", "usage")
                 and v is not None}
        conductor = trace.conductor.model_copy(update={**facts, "reason": runtime.conductor_reason})
        trace = trace.model_copy(update={"conductor": conductor})
    return trace.model_dump_json(indent=2)


def _result_trace(result, question: str, mode, system: str | None):
    """A run's trace made from its result alone (the history holds none of it)."""
    from .core.trace import Trace
    from .core.words import RUN_MODES

    kind = type(mode).__name__.removesuffix("Mode").lower()  # DirectMode: "direct"
    return Trace(run_id=result.run_id, question=question, status=result.status, source="cli",
                 mode=kind if kind in RUN_MODES else "conductor", system=system or "conductor")


# --- stiva models ----------------------------------------------------------------------------------


async def models(args: argparse.Namespace, config) -> int:

    from .conductor.select import describe_choice
    from .config import ConfigError, with_conductor_override
    from . import paths
    from .pool.listing import models_json, models_table
    from .pool.registry import build_pool, check_references

    pool = await build_pool(config, discover=False if args.no_discovery else None)
    try:
        conductor = with_conductor_override(config.conductor, args.conductor)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    errors, warnings = check_references(config, pool, conductor.backend, conductor.model)
    source = args.config or str(paths.config_file())
    if errors:
        return fail(f"{source}: {errors[0]}", EXIT_USAGE)
    for warning in warnings:
        print(f"stiva: warning: {source}: {warning}", file=sys.stderr)
    choice = describe_choice(conductor, list(pool.available()))
    if args.json:
        print(json.dumps(models_json(pool, choice), indent=2))
    else:
        from .cli_common import stdout_console

        stdout_console().print(models_table(pool, choice))
    return 0


# --- stiva history ---------------------------------------------------------------------------------


def history(args: argparse.Namespace) -> int:
    """The stored runs, newest first (`show ID`: one run's trace; `rename`, `delete`: change it)."""
    from .store import HistoryFault, NotFoundError, Store, StoreError

    if args.history_command in ("rename", "delete"):
        return _change_history(args)
    try:
        # Opening also marks the runs of killed processes interrupted. Only reading, it also
        # works where the history cannot be written (a full disk, a read-only folder).
        store = Store.open(reads_only=True)
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    with store:
        if store.fault is not None:
            print(f"stiva: note: {store.fault.summary}: only reading it (nothing is swept or recorded)",
                  file=sys.stderr)
        if args.limit < 1:
            return fail("--limit must be at least 1", EXIT_USAGE)
        try:
            if args.history_command == "show":
                try:
                    kind, whole = store.resolve_id(args.run_id)
                except NotFoundError as exc:
                    return fail(str(exc), EXIT_USAGE)
                shown = store.get_conversation(whole) if kind == "conversation" else store.get_trace(whole)
                if args.json or args.show_json:
                    print(shown.model_dump_json(indent=2))
                else:
                    (_print_conversation if kind == "conversation" else _print_run)(shown)
                return 0
            if args.history_command == "conversations":
                found = store.list_conversations(limit=args.limit)
                if args.json or args.show_json:
                    print(json.dumps([c.model_dump(mode="json") for c in found], indent=2, ensure_ascii=False))
                else:
                    _print_conversations(found)
                return 0
            runs = store.list_runs(limit=args.limit)
        except StoreError as exc:  # a damaged page met while reading
            return fail(str(exc), EXIT_FAILED)
    if args.json:
        print(json.dumps([{"id": r.run_id, "started_at": r.created_at, "source": r.source, "question": r.question,
                           "status": r.status, "prompt_tokens": r.prompt_tokens,
                           "completion_tokens": r.completion_tokens, "cost_usd": r.cost_usd} for r in runs],
                         indent=2, ensure_ascii=False))
    else:
        _print_runs(runs)
    return 0


def _change_history(args: argparse.Namespace) -> int:
    """`history rename ID TITLE` and `history delete ID`: what the app's history sidebar does."""
    from .store import HistoryFault, NotFoundError, Store, StoreError

    try:
        store = Store.open()
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    with store:
        try:
            kind, whole = store.resolve_id(args.run_id)
            if args.history_command == "rename":
                title = " ".join(args.title.split())
                if kind != "conversation":
                    return fail(f"{args.run_id} is a run: only a conversation has a title "
                                "(stiva history conversations lists them)", EXIT_USAGE)
                if not title:
                    return fail("the new title is empty", EXIT_USAGE)
                store.rename_conversation(whole, title)
                print(f"renamed conversation {whole}: {title}")
            elif kind == "conversation":
                store.delete_conversation(whole)
                print(f"deleted conversation {whole} (its runs stay in `stiva history`)")
            else:
                store.delete_run(whole)
                print(f"deleted run {whole}")
        except NotFoundError as exc:
            return fail(str(exc), EXIT_USAGE)
        except StoreError as exc:  # a read-only or full disk
            return fail(str(exc), EXIT_FAILED)
    return 0


def _print_runs(runs) -> None:
    from rich.table import Table

    from .cli_view import printable

    from .cli_common import stdout_console

    console = stdout_console()  # a pipe or a file: whole ids and every column, for grep and scripts
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in (("id", "left"), ("started", "left"), ("source", "left"), ("status", "left"),
                          ("tokens", "right"), ("cost", "right"), ("question", "left")):
        # The id stays whole (`stiva history show ID`); the question gives way first.
        table.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis",
                         min_width=32 if name == "id" else None, max_width=60 if name == "question" else None,
                         ratio=1 if name == "question" else None)
    for r in runs:
        table.add_row(r.run_id, r.created_at[:16].replace("T", " "), r.source, r.status,
                      f"{r.prompt_tokens:,}→{r.completion_tokens:,}", fmt.money(r.cost_usd),
                      printable(" ".join(r.question.split())))
    console.print(table if runs else "no runs yet", highlight=False)


def _print_run(trace) -> None:
    from rich.markdown import Markdown

    from .cli_common import stdout_console
    from .cli_view import printable
    from .store.export import run_markdown

    stdout_console().print(Markdown(printable(run_markdown(trace, plan=True))))


def _print_conversation(conversation) -> None:
    from rich.markdown import Markdown

    from .cli_common import stdout_console
    from .cli_view import printable
    from .store.export import run_markdown

    console = stdout_console()
    console.print(Markdown(printable(f"# {conversation.title or 'Untitled conversation'}\n\n"
                                     f"_{conversation.kind} · {conversation.id} · started "
                                     f"{conversation.created_at[:16].replace('T', ' ')} UTC_")))
    for trace in conversation.runs:
        console.print(Markdown(printable(run_markdown(trace, plan=True))))
    if not conversation.runs:
        console.print("(no runs recorded in it)", highlight=False)


def _print_conversations(found) -> None:
    from rich.table import Table

    from .cli_common import stdout_console
    from .cli_view import printable

    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("id", "updated", "kind", "runs", "status", "title"):
        table.add_column(name, no_wrap=True, overflow="ellipsis", justify="right" if name == "runs" else "left",
                         min_width=32 if name == "id" else None)
    for c in found:  # status: how its newest run ended, as the app's history sidebar says it
        table.add_row(c.id, c.updated_at[:16].replace("T", " "), c.kind, str(c.run_count),
                      c.last_status or "no runs", printable(" ".join((c.title or "(untitled)").split())))
    stdout_console().print(table if found else "no conversations yet", highlight=False)


if __name__ == "__main__":
    entry()
