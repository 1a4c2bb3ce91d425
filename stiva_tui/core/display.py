"""Numbers as every view writes them: money, tokens, durations, step numbers and counts.

The app, the command line's human output and the Markdown export all write a value the same way:
`$0.000023`, `1.2k`, `10.9s` / `1m11s`, `step 1` (steps are numbered from 1 wherever a person
reads them; the plan format and the stored traces number them from 0), `1 step` / `3 steps`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def money(usd: float | None) -> str:
    """$1.23 / $0.123 / $0.0094 / $0.000013: cents from a dollar on, else two significant digits
    (three from a cent on); nothing is $0.00."""
    if not usd:
        return "$0.00"
    if usd < 0:
        return "-" + money(-usd)
    if usd >= 1:
        return f"${usd:,.2f}"
    if usd >= 0.01:
        return f"${usd:.3f}"
    decimals = min(10, 1 - math.floor(math.log10(usd)))
    text = f"{usd:.{decimals}f}".rstrip("0")
    return "$" + (text if not text.endswith(".") else text + "0")


def tokens(n: int) -> str:
    """1234 -> 1.2k; short enough for a tree label."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k"
    return f"{n // 1000}k"


def seconds(s: float | None) -> str:
    """10.9s under a minute, 1m11s from one on; "" for no time."""
    if s is None:
        return ""
    if s < 59.95:  # what would round to "60.0s" is "1m00s"
        return f"{s:.1f}s"
    minutes, rest = divmod(round(s), 60)
    return f"{minutes}m{rest:02d}s"


def count(n: int, noun: str) -> str:
    """ "1 step", "3 steps", "0 steps"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def reused(answers: int, saved_usd: float) -> str:
    """What the answer cache gave back: "3 answers reused ($0.0012 not paid again)"."""
    return f"{count(answers, 'answer')} reused ({money(saved_usd)} not paid again)"


def step(index: int) -> str:
    """The number a person reads for the step at 0-based `index`: "1" for the first."""
    return str(index + 1)


def steps(indices: Iterable[int]) -> str:
    """Steps by their 0-based indices, as read: [0, 2] -> "1,3"."""
    return ",".join(step(i) for i in indices)


def reads(index: int, access: Iterable[int], access_all: bool) -> str:
    """What step `index` reads: '← all', '← 1,2', or '' for only the question (a first step
    that may read "all" earlier steps reads none)."""
    if access_all:
        return "← all" if index > 0 else ""
    shown = steps(access)
    return "← " + shown if shown else ""
