"""Text cut to fit a line of the app (numbers are core/format.py's job)."""

from __future__ import annotations


def one_line(text: str, limit: int) -> str:
    """`text` on one line of at most `limit` characters, "…" ending what is cut."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
