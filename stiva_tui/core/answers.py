"""Final answers: what a vote counts and what an agreement cascade compares.

A vote or an agreement gate (core/workflow.py) never reads whole responses: it reads each one's
*final answer*, by the question's kind, as the graders read it:

- `choice`: the option letter ("B");
- `number`: the number committed to, as a canonical value ("18", "0.5": 1/2, 0.50 and 5e-1 are one);
- `math` / `exact`: the final expression or short answer, normalised (spaces, `$`, `\\boxed{}`,
  `\\text{}`, a trailing period, case);
- `auto` (a live question of no known kind): a JSON `answer` field, else an `Answer: ...` line, else
  a `\\boxed{}`; else the whole response when it is one short line; else none.

Every kind reads a JSON `"answer"` field first, where the response holds one (ZeroEval's and many
structured prompts' format). A response with no final answer (`None`) never agrees with another
one: a gate then continues, and a vote with fewer than two readable answers is decided by a judge.

Imports nothing of Stiva (core).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from fractions import Fraction

__all__ = ["ANSWER_KINDS", "Tally", "final_answer", "tally", "unboxed"]

ANSWER_KINDS = ("choice", "number", "math", "exact", "auto")
_MAX_SHORT = 80  # `auto`: a whole response counts as a final answer only when it is this short

_JSON_ANSWER = re.compile(r'"answer"\s*:\s*("(?:[^"\\]|\\.)*"|-?[\d.eE+-]+|true|false|null)', re.IGNORECASE)
_ANSWER_LINE = re.compile(r"(?:^|\n)\W{0,3}(?:the\s+)?(?:final\s+)?answer\s*(?:is\b|:|=)\s*(.+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*\d+)?|-?\.\d+")
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?[\d.]+)\s*\}\s*\{\s*(-?[\d.]+)\s*\}")
_EDGE = " \t\n.,;:!?\"'`*_$"


def final_answer(text: str, kind: str | None = "auto") -> str | None:
    """The final answer `text` commits to, normalised for comparison, or None when it has none."""
    if not text:
        return None
    kind = kind if kind in ANSWER_KINDS else "auto"
    text = unicodedata.normalize("NFKC", text)
    field = _json_answer(text)
    if kind == "choice":
        return _choice(field if field is not None else text)
    if kind == "number":
        return _number(field if field is not None else text)
    if field is not None:
        return _normalise(field)
    boxed = unboxed(text)
    if boxed is not None:
        return _normalise(boxed)
    lines = _ANSWER_LINE.findall(text)
    if lines:
        return _normalise(lines[-1])
    if kind in ("math", "exact"):
        last = [line for line in text.splitlines() if line.strip()]
        return _normalise(last[-1]) if last else None
    stripped = text.strip()
    if "\n" not in stripped and len(stripped) <= _MAX_SHORT:
        return _normalise(stripped)
    return None


class Tally:
    """The count of a vote: `winner` (None where no answer was readable), how many agree with it,
    out of how many steps, the position (in the order given) of the first step that gave it, and
    how many steps gave a final answer at all."""

    def __init__(self, winner: str | None, votes: int, voters: int, first: int | None, readable: int = 0):
        self.winner = winner
        self.votes = votes
        self.voters = voters
        self.first = first
        self.readable = readable  # how many of the voters gave a final answer at all

    @property
    def unanimous(self) -> bool:
        return self.winner is not None and self.votes == self.voters

    def line(self) -> str:
        if self.winner is None:
            return f"no final answer to count in {self.voters}"
        shown = self.winner if len(self.winner) <= 40 else self.winner[:39] + "…"
        if self.unanimous:
            return f"{self.votes} of {self.voters} agree: {shown}"
        return f"{self.votes} of {self.voters} for {shown}"

    def __repr__(self) -> str:
        return f"Tally({self.winner!r}, {self.votes}/{self.voters}, first={self.first})"


def tally(answers: Sequence[str | None]) -> Tally:
    """The majority of `answers` (final answers, in the steps' order); a tie goes to the answer
    given first, so the order of the steps ranks their models. Unreadable answers (None) vote for
    nothing."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for position, answer in enumerate(answers):
        if answer is None:
            continue
        counts[answer] = counts.get(answer, 0) + 1
        first.setdefault(answer, position)
    if not counts:
        return Tally(None, 0, len(answers), None)
    winner = max(counts, key=lambda a: (counts[a], -first[a]))
    return Tally(winner, counts[winner], len(answers), first[winner], sum(counts.values()))


# --- readers ------------------------------------------------------------------------------------


def _json_answer(text: str) -> str | None:
    matches = _JSON_ANSWER.findall(text)
    if not matches:
        return None
    raw = str(matches[-1])
    try:
        value = json.loads(raw)
    except ValueError:
        return raw.strip('"')
    if value is None:
        return None
    return str(value) if not isinstance(value, str) else value


def unboxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`), braces balanced; None if none
    (the graders read a boxed answer the same way: evals/numbers.py)."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        return None
    depth = 0
    for index in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[brace + 1 : index]
    return text[brace + 1 :]  # unclosed: an answer cut off at the end


def _normalise(text: str) -> str | None:
    inner = unboxed(text)
    if inner is not None:
        text = inner
    text = re.sub(r"\\(?:text|mathrm|textbf)\{([^{}]*)\}", r"\1", text)
    text = _FRAC.sub(r"\1/\2", text)
    text = text.replace("\\left", "").replace("\\right", "").replace("\\!", "").replace("\\,", "")
    text = text.replace("**", "").strip(_EDGE)
    text = " ".join(text.casefold().split())
    if not text:
        return None
    number = _as_number(text)
    return number if number is not None else text


def _choice(text: str) -> str | None:
    boxed = unboxed(text)
    if boxed is not None:
        text = boxed
    stripped = text.strip(_EDGE + "()[]")
    if len(stripped) == 1 and stripped.isalpha():
        return stripped.upper()
    marked = re.findall(
        r"(?i:answer)\W{0,4}(?:is|:|=)?\W{0,4}(?:(?i:option|choice)\s*)?[\s*_(\[]*([A-Za-z])(?!\w)", text
    )
    if marked:
        return str(marked[-1]).upper()
    lines = [line.strip(" \t*_#>") for line in text.splitlines() if line.strip(" \t*_#>")]
    if lines:
        last = re.match(r"^[(\[]?([A-Za-z])(?:[)\].:]|$)", lines[-1])
        if last:
            return last.group(1).upper()
    return None


def _number(text: str) -> str | None:
    boxed = unboxed(text)
    text = _FRAC.sub(r"\1/\2", boxed if boxed is not None else text).replace("\u2212", "-")
    anchored = list(re.finditer(r"answer\W{0,4}(?:is|:|=)", text, re.IGNORECASE))
    if anchored:
        after = _NUMBER.findall(text[anchored[-1].end() :])
        if after:
            return _as_number(after[0])
    found = _NUMBER.findall(text)
    return _as_number(found[-1]) if found else None


def _as_number(token: str) -> str | None:
    """`token` as a canonical number ("1,000" -> "1000", "0.50" -> "1/2"), or None if it is not one.
    Integers stay exact (never through a float): 976371000 is not 976371285."""
    token = re.sub(r"[\s,$%]", "", token).rstrip(".")
    if not token or not re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:/\d+)?", token):
        return None
    try:
        if "/" in token:
            top, bottom = token.split("/")
            value = Fraction(top) / Fraction(bottom)
        else:
            value = Fraction(token)
    except (ValueError, ZeroDivisionError):
        return None
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
