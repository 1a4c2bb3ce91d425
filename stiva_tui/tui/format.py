"""Short, stable text for numbers the UI shows: money, tokens, seconds."""

from __future__ import annotations


def money(usd: float | None) -> str:
    """$1.23 / $0.123 / $0.000013 (small costs keep their significant digits)."""
    if not usd:
        return "$0.00"
    if usd >= 1:
        return f"${usd:,.2f}"
    if usd >= 0.01:
        return f"${usd:.3f}"
    text = f"{usd:.6f}".rstrip("0")
    return "$" + (text if not text.endswith(".") else text + "0")


def tokens(n: int) -> str:
    """1234 -> 1.2k; short enough for a tree label."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k"
    return f"{n // 1000}k"


def seconds(s: float | None) -> str:
    if s is None:
        return ""
    if s < 60:
        return f"{s:.1f}s"
    minutes, rest = divmod(int(s), 60)
    return f"{minutes}m{rest:02d}s"


def count(n: int, noun: str) -> str:
    """"1 step", "3 steps", "0 steps"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def one_line(text: str, limit: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def access_text(access: tuple[int, ...], access_all: bool) -> str:
    """What a step reads: '← all', '← 0,1', or '' for only the question."""
    if access_all:
        return "← all"
    return "← " + ",".join(str(i) for i in access) if access else ""
