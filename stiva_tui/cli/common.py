"""What every `stiva` command shares: exit codes, the one-line failure, the ctrl+c and SIGTERM
handling, the console on stdout.

Every command's module imports from here, and this imports nothing heavy (`stiva --help` stays
fast). The signals are answered in one place, `_Stop`: the first one stops the command (a run is
kept as cancelled, a training keeps its adapter), a second one leaves the process at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from ..core.terminal import printable

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130  # 128 + SIGINT, as shells report ctrl+c
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away
EXIT_TERMINATED = 143  # 128 + SIGTERM

PIPED_WIDTH = 80  # piped or redirected, without $COLUMNS: what a reader's terminal most likely is


class UsageError(Exception):
    """Options that cannot go together or a value out of range: said on one line, exit code 2."""


def fail(message: str, code: int = EXIT_FAILED) -> int:
    """Say why on one line of stderr (a provider's text in it cannot steer the terminal)."""
    lines = printable(message).strip().splitlines()
    print(f"stiva: {lines[0] if lines else 'failed'}", file=sys.stderr)
    return code


def run_async(command: Coroutine[Any, Any, int]) -> int:
    """Run an async command; cancelled from outside, it is a ctrl+c."""
    import asyncio

    try:
        return asyncio.run(command)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def command(*words: str) -> str:
    """A command line as a shell reads it back (each word quoted where it needs to be): what a
    hint prints runs as printed."""
    import shlex

    return " ".join(shlex.quote(word) for word in words)


def stdout_console(**kwargs):
    """A rich Console on stdout. Piped or redirected to a file (`stiva models | cat`, `stiva bench
    ... | tee`), it is as wide as `$COLUMNS` asks (`COLUMNS=200 stiva models > pool.txt`), else
    80 columns, and no line ends in the spaces that pad it to that width."""
    from rich.console import Console

    console = Console(**kwargs)
    if console.is_terminal:
        return console
    return Console(file=_NoTrailingSpaces(sys.stdout), width=piped_width(), **kwargs)


def piped_width() -> int:
    """The width of output that is not to a terminal: `$COLUMNS` where it is a positive whole
    number, else `PIPED_WIDTH`."""
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if text.isascii() and text.isdigit() and 0 < int(text) <= 10_000 else PIPED_WIDTH


def text_width() -> int:
    """How wide plain printed text may be: the terminal's width, or `piped_width()` off a terminal
    (`$COLUMNS` first either way, as `shutil.get_terminal_size` reads it)."""
    import shutil

    return max(20, shutil.get_terminal_size((piped_width(), 24)).columns)


def fold_parts(parts, width: int | None = None, *, sep: str = " · ", indent: str = "  ", lead: str = "") -> list[str]:
    """`parts` joined by `sep` on as few lines as fit `width`: a line breaks between parts, never
    inside one, unless a part alone is wider (then it is folded at its spaces). Lines after the
    first are indented by `indent`, the first by `lead`."""
    import textwrap

    width = width or text_width()
    lines: list[str] = []
    line = ""
    for part in parts:
        candidate = f"{line}{sep}{part}" if line else (indent if lines else lead) + part
        if len(candidate) <= width:
            line = candidate
            continue
        if line:  # break before this part
            lines.append(line)
        prefix = indent if lines else lead
        folded = textwrap.wrap(
            part,
            width,
            initial_indent=prefix,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [prefix]
        lines.extend(folded[:-1])
        line = folded[-1]
    if line:
        lines.append(line)
    return lines


class _NoTrailingSpaces:
    """A text stream that writes to `stream` without the spaces before each line's end (rich
    pads every line of a table or a Markdown block to the console's width)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        lines = text.split("\n")
        self.stream.write("\n".join([line.rstrip(" ") for line in lines[:-1]] + lines[-1:]))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"


def comma_list(text: str) -> tuple[str, ...]:
    """The non-empty items of a comma-separated option (`--prefer-levels best, cheap`)."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


# --- signals -----------------------------------------------------------------------------------


class _Stop:
    """The one answer to ctrl+c and SIGTERM: the first signal records its exit code and calls
    `then` (cancel the task, or say that the training stops after this step); a second one, of
    either kind, ends the process at once with the first one's code."""

    def __init__(self, then: Callable[[], object]):
        self.codes: list[int] = []
        self._then = then

    def __call__(self, code: int) -> None:
        if self.codes:  # asked twice: leave now, saying so in the one line a first one would have
            _say_and_leave(self.codes[0])
        self.codes.append(code)
        self._then()


def _say_and_leave(code: int) -> None:
    """End the process at once with `code`, after the one line its signal is said with: a second
    ctrl+c can come before the first one's cancellation printed anything."""
    word = {EXIT_CANCELLED: "cancelled", EXIT_TERMINATED: "terminated"}.get(code)
    if word:
        with contextlib.suppress(OSError, ValueError):
            os.write(2, f"stiva: {word}\n".encode())
    os._exit(code)


def stop_on_signals() -> list[int]:
    """In a running async command: ctrl+c and SIGTERM cancel it (a run is kept as cancelled).
    Returns the list the exit code of the signal goes into."""
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stop = _Stop(lambda: task.cancel() if task is not None else None)
    loop.add_signal_handler(signal.SIGINT, stop, EXIT_CANCELLED)
    loop.add_signal_handler(signal.SIGTERM, stop, EXIT_TERMINATED)
    return stop.codes


def set_on_signals(event) -> None:
    """In a long-lived background process (the warm `stiva ask` worker): SIGTERM, ctrl+c and
    SIGHUP set `event` (an asyncio.Event), and the process winds down in its own time."""
    import asyncio

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, event.set)


@contextlib.contextmanager
def stop_after_step(console) -> Iterator[Callable[[], str | None]]:
    """Around a training: ctrl+c stops it after the current step (the adapter so far is kept);
    yields what its `should_stop` asks ("cancelled" once ctrl+c was pressed, else None)."""
    stop = _Stop(lambda: console.print("[yellow]stopping after this step (ctrl+c again to leave at once)…[/]"))
    previous = signal.signal(signal.SIGINT, lambda signum, frame: stop(EXIT_CANCELLED))
    try:
        yield lambda: "cancelled" if stop.codes else None
    finally:
        signal.signal(signal.SIGINT, previous)


def leave_at_once_on_ctrl_c() -> None:
    """From now on ctrl+c ends the process at once with 130: once a command is over, leaving can
    wait for a worker thread (a model stops at its next token), and a ctrl+c meanwhile would
    otherwise end in a traceback."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(EXIT_CANCELLED))
