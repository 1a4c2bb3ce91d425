"""The `stiva` command line: the parser, made of each command's own, and the dispatch to them.

Each command is a module of this package with `add_parser(sub, common)` and `run(args, ...)`;
they import nothing heavy at module level, so `stiva --help` stays fast (asyncio, the engine, torch
and textual load inside the commands), and a ctrl+c right after start lands in `main`, which
answers it with one line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from .common import (
    EXIT_BROKEN_PIPE,
    EXIT_CANCELLED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    fail,
    leave_at_once_on_ctrl_c,
)

# The commands, in the order `stiva --help` lists them, each the module of this package that is
# it: imported when the command runs (or the parser is built), so that `stiva` alone, the app,
# imports none of them before its first frame. `config` runs before the config is loaded (a broken
# file is what one may want to open); `history` and `votes` read the history alone.
BENCH_IMPORT = "bench-import"  # `stiva bench import`: main's parser rewrites it to this name (bench_import.NAME)
COMMAND_MODULES = {
    "ask": "ask",
    "models": "models",
    "history": "history",
    "bench": "bench",
    BENCH_IMPORT: "bench_import",
    "train": "train",
    "votes": "votes",
    "config": "config_cmd",
    "serve": "serve",
}
WITHOUT_POOL = ("history", "votes", BENCH_IMPORT)


def command(name: str) -> ModuleType:
    """The module of command `name` (imported now if it was not yet)."""
    return importlib.import_module(f"{__package__}.{COMMAND_MODULES[name]}")


def __getattr__(name: str) -> Any:
    """`COMMANDS` (name -> module, every command imported) and `PRESET_NAMES` (the presets the
    command line knows; tests compare them), made when first asked for."""
    if name == "COMMANDS":
        return {command_name: command(command_name) for command_name in COMMAND_MODULES}
    if name == "PRESET_NAMES":
        return command("ask").PRESET_NAMES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose arguments may be rewritten before it parses them (`rewrite`): how
    `stiva train` takes the spellings from before its methods. A rewrite that finds options that
    do not go together raises UsageError; the command then says so in one line (`usage_error`)."""

    def __init__(self, *args: Any, rewrite: Callable[[list[str]], list[str]] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.rewrite = rewrite

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self.rewrite is not None and args is not None:
            from .common import UsageError

            try:
                args = self.rewrite(list(args))
            except UsageError as exc:
                namespace = namespace if namespace is not None else argparse.Namespace()
                for name, value in getattr(exc, "known", {}).items():  # --config, --pool, ... as given
                    setattr(namespace, name, value)
                namespace.usage_error = str(exc)
                return namespace, []
        return super().parse_known_args(args, namespace)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; the options every command shares are None when not given."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # `stiva` alone, the app: what the parser would make of it, without importing every command to
    # build the parser (~10 ms before the app's first frame).
    args = argparse.Namespace(command=None) if not argv else build_parser().parse_args(argv)
    for name in ("config", "conductor", "pool", "prefer"):
        if not hasattr(args, name):
            setattr(args, name, None)
    return args


def build_parser() -> argparse.ArgumentParser:
    # SUPPRESS: a subcommand that is not given an option leaves the value given before it
    # (`stiva --pool sim bench ...`), instead of resetting it to None.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--config", metavar="FILE", help="config file (default: the platform config dir)")
    common.add_argument(
        "--conductor", metavar="BACKEND[:MODEL]", help="auto, local[:HF_ID_OR_DIR], embedded or remote:POOL_MODEL_ID"
    )
    common.add_argument(
        "--pool",
        metavar="sim|sim:SEED|replay:BENCH_ID",
        help="use another pool instead of the configured one: sim, the SIMULATED pool whose "
        "strengths are known (sim:SEED: under another seed, another draw of which calls are "
        "right), or replay:BENCH_ID, the recorded direct: answers of a bench "
        "(both served by Stiva on 127.0.0.1)",
    )
    common.add_argument(
        "--prefer",
        metavar="LEVEL",
        help="what the conductor optimises for: best, balanced, cheap, fast, or a number from 0 "
        "(best) to 1 (cheap); the budget and the step limit still bound every plan "
        "(default: [conductor] prefer)",
    )

    parser = CommandParser(
        rewrite=command(BENCH_IMPORT).rewrite,
        prog="stiva",
        parents=[common],
        description="A conductor model orchestrates a pool of language models. With no command, opens the app.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"stiva {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        command(name).add_parser(sub, common)
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
        leave_at_once_on_ctrl_c()


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
    if args.command == "config":  # before loading it: a broken file is what one may want to open
        return command("config").run(args)
    if args.command is None and args.config is None and args.pool is None and args.prefer is None:
        from .. import paths

        if not paths.config_file().exists():
            # The app on the defaults (no config file: nothing to validate, no error to report):
            # the app builds them after its first frame, sparing pydantic's import before it.
            return _dispatch(args, None)
    from ..config import ConfigError, load_config

    try:
        config = load_config(args.config)
        if getattr(args, "pool", None):
            from ..sim.pool import pool_config

            config = pool_config(config, args.pool)
        if getattr(args, "prefer", None) is not None:
            config = with_preference(config, args.prefer)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    if config.sim is None or args.command in WITHOUT_POOL:
        return _dispatch(args, config)
    from ..bench.replay import start_pool

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
    from ..config import ConfigError
    from ..core.preference import PreferenceError, parse_preference

    try:
        parse_preference(prefer)
    except PreferenceError as exc:
        raise ConfigError(f"--prefer: {exc}") from None
    return config.model_copy(update={"conductor": config.conductor.model_copy(update={"prefer": prefer})})


def _dispatch(args: argparse.Namespace, config) -> int:
    global _closed_cleanly
    if args.command is not None:
        return command(args.command).run(args, config)
    import gc

    # No garbage collection from here to the app's first frame: importing Textual and building the
    # screen make many objects, and the collections they set off took ~25 ms of the first paint.
    # The app turns it back on once that frame is drawn.
    collecting = gc.isenabled()
    gc.disable()
    try:
        from ..tui.app import run_app  # no command: the app (config None: the defaults, built once it shows)

        code = run_app(config, args.conductor)  # which turns collection back on after its first frame
    finally:
        if collecting:
            gc.enable()
    _closed_cleanly = True
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
