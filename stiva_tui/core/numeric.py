"""The one reader of numbers in model-written text, bounded: answers (core/answers.py), graders
(evals/numbers.py), records and routers all find a number with `NUMBER`, after `delatex`, and read
it through `exact_value`.

A number is read only when it is small enough to be an answer: at most `MAX_DIGITS` digits and an
exponent of at most `MAX_EXPONENT` in size, checked on the text before any conversion. Anything
larger ("1e999999999", a 5,000-digit integer) is not a number here: the caller treats it as text,
and a comparison of it is a comparison of text. The value is exact (a `Fraction`, never a float),
so 9007199254740993 is not 9007199254740992, 1e-400 is not 0, and 1e400 is not 7e500.

Imports nothing of Stiva (core).
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["MAX_DIGITS", "MAX_EXPONENT", "NUMBER", "canonical", "delatex", "exact_value", "number_key"]

MAX_DIGITS = 200
"""Digits of one number (before its exponent), or of a fraction's top or bottom: past this, text."""
MAX_EXPONENT = 1000
"""The size of a written exponent ("1e-1000"): past this, text. 10**1000 is a 1,001-digit integer,
built in microseconds; 10**999999999 would take minutes and gigabytes."""

NUMBER = re.compile(
    r"(?<![\w.])-?"  # not inside a word or after a point
    r"(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"  # 1,234.5 | 1234.5 | .5
    r"(?:[eE][-+]?\d+)?"  # 1e-6
    r"(?:\s*/\s*\d+(?:\.\d+)?)?"  # 3/4, 9/4.5
)
"""A number as written in text ("1,234.5", "-2", ".5e3", "3/4"): found here, read by `exact_value`.
Digits glued to a letter ("CO2", "x2") or after a point are no number."""

_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?[\d.,]+)\s*\}\s*\{\s*(-?[\d.,]+)\s*\}")
_TEXT_COMMAND = re.compile(r"\\(?:text|mathrm|textbf|mbox)\{([^{}]*)\}")
_PLAIN = (
    ("\\displaystyle", ""),
    ("\\left", ""),
    ("\\right", ""),
    ("\\!", ""),
    ("\\,", ""),
    ("\\;", " "),
    ("{,}", ","),
    ("\\$", "$"),
    ("\\%", "%"),
    ("\u2212", "-"),
)


def delatex(text: str) -> str:
    """The LaTeX that wraps plain numbers, removed: `\\text{}` (and `\\mathrm`, `\\textbf`, `\\mbox`)
    to its content, `\\frac{a}{b}` (`\\dfrac`, `\\tfrac`) to a/b, `1{,}000` to 1,000, `\\$` and
    `\\%` to $ and %, the minus sign to -, and spacing and sizing (`\\,`, `\\!`, `\\;`,
    `\\left`, `\\right`, `\\displaystyle`) dropped."""
    text = _TEXT_COMMAND.sub(r"\1", text)
    text = _FRAC.sub(r"\1/\2", text)
    for latex, plain in _PLAIN:
        text = text.replace(latex, plain)
    return text


_PART = re.compile(r"([-+]?)(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d{1,6}))?")
_MAX_TEXT = 2 * MAX_DIGITS + 16  # a token longer than this cannot be within the bounds


def exact_value(token: str) -> Fraction | None:
    """`token` ("1,234", "-2.5", "1e9", ".5", "3/4", "1.5e-3/2") as an exact value, or None when it
    is no such number or is outside the bounds. Thousands commas and spaces are ignored."""
    if len(token) > 2 * _MAX_TEXT:
        return None
    cleaned = token.replace(",", "").replace(" ", "").replace("\u2212", "-")
    top, slash, bottom = cleaned.partition("/")
    value = _part(top)
    if value is None or not slash:
        return value
    under = _part(bottom)
    if under is None or under == 0:
        return None
    return value / under


def canonical(value: Fraction) -> str:
    """A value's one written form: "18", "-3/4" (1/2, 0.50 and 5e-1 are all "1/2")."""
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def number_key(token: str) -> str | None:
    """`canonical(exact_value(token))`, or None."""
    value = exact_value(token)
    return None if value is None else canonical(value)


def _part(text: str) -> Fraction | None:
    if not text or len(text) > _MAX_TEXT:
        return None
    match = _PART.fullmatch(text)
    if match is None:
        return None
    sign, whole, fraction, exponent = match.group(1), match.group(2), match.group(3) or "", match.group(4)
    digits = whole + fraction
    if not digits or len(digits) > MAX_DIGITS:
        return None
    power = int(exponent) if exponent else 0
    if abs(power) > MAX_EXPONENT:
        return None
    value = Fraction(int(digits)) * Fraction(10) ** (power - len(fraction))
    return -value if sign == "-" else value
