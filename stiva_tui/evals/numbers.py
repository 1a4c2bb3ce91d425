"""Numbers in text: how a `numeric` reference is read (`parse_number`), and which number an answer
commits to (`extract_number`); see `graders` for the rules. Shared by the suite model (a numeric
item's answer must be one number) and the graders. The number pattern and the LaTeX taken off it are
core/numeric.py's (`NUMBER`, `delatex`), the ones votes and gates use; of Stiva it imports only core.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from ..core.answers import unboxed
from ..core.numeric import NUMBER, delatex, exact_value

__all__ = ["extract_number", "integer_reference", "parse_number", "reference_value", "unboxed", "written_value"]

_ANSWER_ANCHOR = re.compile(r"answer\W{0,4}(?:is|:|=)", re.IGNORECASE)


def _whole_reference(text: str) -> re.Match[str] | None:
    """`text` as exactly one number, once unboxed and its LaTeX, `$`, `%` and final point taken
    off: the match of `NUMBER` on all of it, or None. How every reference reader below reads."""
    cleaned = delatex(unboxed(text) or text).strip().strip("$").strip()
    return NUMBER.fullmatch(cleaned.removesuffix("%").rstrip(".").strip())


def parse_number(text: str) -> float | None:
    """`text` read as exactly one number ("1,000", "-2.5", "3/4", "\\frac{3}{4}", "25%", "$5"), or
    None: how a `numeric` reference is read."""
    match = _whole_reference(text)
    return _to_float(match.group()) if match else None


def reference_value(text: str) -> Fraction | None:
    """`text` read as exactly one number, as `parse_number` reads it, but exactly (bounded)."""
    match = _whole_reference(text)
    return written_value(match.group()) if match else None


def integer_reference(text: str) -> int | None:
    """`text` read as one whole number written without a point, an exponent or a fraction
    ("976,371,285", "-12", "$5", "25%"), exactly (no float rounding); else None. Such a reference
    is matched only by the same value: see `graders`."""
    match = _whole_reference(text)
    if match is None or not _INTEGER.fullmatch(token := re.sub(r"[\s,]", "", match.group())):
        return None
    return int(token)


def written_value(token: str) -> Fraction | None:
    """The exact value of a number as `extract_number` reads it ("1,234", "-2.5", "1e9", "3/4"):
    no float rounding, so that big integers compare exactly. None if it is no such number, or is
    past core/numeric.py's bounds (200 digits, an exponent of 1,000): such text is no number."""
    return exact_value(token)


_INTEGER = re.compile(r"-?\d+")


def extract_number(text: str) -> tuple[str, float] | None:
    """The number an answer commits to, as (the text read, its value): the rules in `graders`' docstring."""
    boxed = unboxed(text)
    if boxed is not None:
        found = _numbers(delatex(boxed))
        if found:
            return found[-1]
    text = delatex(text)
    anchors = list(_ANSWER_ANCHOR.finditer(text))
    if anchors:
        after = _numbers(text[anchors[-1].end() :])
        if after:
            return after[0]
    found = _numbers(text)
    return found[-1] if found else None


def _numbers(text: str) -> list[tuple[str, float]]:
    found = []
    for match in NUMBER.finditer(text):
        value = _to_float(match.group())
        if value is not None:
            found.append((re.sub(r"[\s,]", "", match.group()), value))
    return found


def _to_float(token: str) -> float | None:
    """A number's value as a float, read through the bounded reader (core/numeric.py) first: a
    number past its bounds ("1e999999999/2") is no number, and never costs more than microseconds."""
    value = exact_value(token)
    if value is None:
        return None
    try:
        return float(value)
    except OverflowError:  # within the bounds but past a float's range: 1e400
        return math.inf if value > 0 else -math.inf
