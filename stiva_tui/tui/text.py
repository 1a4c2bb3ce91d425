"""Text as the app shows it: cut to fit a line, and never able to drive the terminal.

    one_line(text, limit)    # on one line of at most `limit` characters, made printable
    safe_text(text)          # escape sequences and control characters removed (core/terminal.py)
    markup_text(text)        # safe_text, to go inside console markup: every "[" is literal
    scrub(value)             # the same for every string inside an event, a trace, a report...
    TerminalSafe()           # the app's line filter: the last line of defence

What a model, a provider, a local server or an API client wrote is scrubbed where it enters the
app (the events of a run, a stored run, the pool, a report), so that an escape sequence goes whole,
its parameters too. Whatever a screen forgets, `TerminalSafe` drops every control character from
each line any widget draws, before Textual writes it to the terminal: no OSC 2 (retitle), no OSC 52
(clipboard), no CSI (clear, move), no bidi override can come out of the app. Numbers are
core/display.py's job.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from ..core.terminal import UNSAFE_IN_LINE, printable, scrub

safe_text = printable

__all__ = ["TerminalSafe", "markup_text", "one_line", "safe_text", "scrub"]


def markup_text(text: str) -> str:
    """`text` made printable, to be put inside console markup: every "[" is escaped, so that a
    provider's "[/]" or a lone "[" is shown as written instead of breaking the markup around it
    (Textual's `escape` leaves "[ b" and "[2J" alone, which end in a MarkupError there)."""
    return printable(text).replace("[", "\\[")


def one_line(text: str, limit: int) -> str:
    """`text` on one line of at most `limit` characters, "…" ending what is cut."""
    flat = " ".join(printable(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class TerminalSafe(LineFilter):
    """Removes every control character (C0 and C1, DEL, bidi embeddings, overrides and isolates)
    from the text of a drawn line. They take no cell, so the line keeps its width and layout."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        search = UNSAFE_IN_LINE.search
        if not any(search(text) for text, _style, control in segments if not control):
            return segments
        out: list[Segment] = []
        for segment in segments:
            text, style, control = segment
            if not control and search(text):
                segment = Segment(UNSAFE_IN_LINE.sub("", text), style)
                if not segment.text:
                    continue
            out.append(segment)
        return out
