"""What every `stiva` command shares: exit codes, the one-line failure, signal handling.

Kept apart from cli.py so that each command's module (cli_bench.py, ...) can use them without an
import circle; nothing heavy is imported here.
"""

from __future__ import annotations

import os
import signal
import sys

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130  # 128 + SIGINT, as shells report ctrl+c
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away
EXIT_TERMINATED = 143  # 128 + SIGTERM


PIPED_WIDTH = 240


def stdout_console(**kwargs):
    """A rich Console on stdout that, piped or redirected to a file, cuts no cell to a terminal's
    80 columns (`stiva models > pool.txt`, `stiva bench ... | tee`)."""
    from rich.console import Console

    console = Console(**kwargs)
    return console if console.is_terminal else Console(width=PIPED_WIDTH, **kwargs)


def comma_list(text: str) -> tuple[str, ...]:
    """The non-empty items of a comma-separated option (`--prefer-levels best, cheap`)."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def fail(message: str, code: int = EXIT_FAILED) -> int:
    """Say why on one line of stderr (a provider's text in it cannot steer the terminal)."""
    from .cli_view import printable

    lines = printable(message).strip().splitlines()
    print(f"stiva: {lines[0] if lines else 'failed'}", file=sys.stderr)
    return code


def stop_on_signals() -> list[int]:
    """ctrl+c and SIGTERM cancel the running command (a run is kept as cancelled); a second
    signal ends the process at once. Returns the list the exit code of the signal goes into."""
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stopped_by: list[int] = []

    def stop(code: int) -> None:
        if stopped_by:  # asked twice: leave now
            os._exit(stopped_by[0])
        stopped_by.append(code)
        if task is not None:
            task.cancel()

    loop.add_signal_handler(signal.SIGINT, stop, EXIT_CANCELLED)
    loop.add_signal_handler(signal.SIGTERM, stop, EXIT_TERMINATED)
    return stopped_by
