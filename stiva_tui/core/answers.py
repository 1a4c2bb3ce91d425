"""Final answers: the one notion of "the same answer" that votes, agreement gates, the replay and
the router's training share.

A vote or an agreement gate (core/workflow.py) never compares whole responses: it reads each one's
*final answer* by the question's kind, and compares those as values:

- `choice`: the option letter, however it is written ("(C)", "**C**", "Answer: C. Mitochondria",
  "\\boxed{C}", a JSON field, a last line that is the letter). Where the options are known (the
  graders pass an item's), only their letters count and an answer that is one option's text reads
  as its letter: the choice grader (evals/graders.py) is this reader.
- `number`: the value committed to, exactly (core/numeric.py: bounded, never through a float). An
  answer that is an expression ("2\\sqrt{73}-6\\sqrt{2}") is not read as one of its numbers: it is
  a math answer, compared as math.
- `math`: the final expression, normalised; two different expressions agree where math-verify finds
  them equal ("\\frac{\\sqrt{2}}{2}" and "\\frac{1}{\\sqrt{2}}").
- `literal` (code outputs, string literals): the Python literal, compared as a value, case and
  content kept ('usAr' is not 'USar'; "a" is 'a').
- `exact`: a short free answer, normalised (spaces, `$`, `\\boxed{}`, `\\text{}`, a final period,
  markdown, quotes straight or curly, case); a number as its value. The exact grader is this reader.
- `auto` (a live question of no known kind): a JSON `answer` field, else a `\\boxed{}`, else an
  `Answer: ...` line, else the whole response when it is one short line; read as a number where it
  is one, as math where it is LaTeX, else as text; else none.

Every kind reads a JSON `"answer"` field first, where the response holds one. A response with no
final answer (`None`) agrees with nothing: a gate then continues, and a vote with fewer than two
readable answers is decided as core/workflow.py says. Which answer a tie or an agreement returns is
decided by a rank the caller gives (best first), never by the order the steps are listed in.

Numbers are bounded before any conversion and every expression handed to math-verify is short and
screened (towers of powers, factorials, many variables, powers of sums: `_math_safe`), so that no
text a model writes makes a comparison hang, and math-verify runs with its timeouts off, so that a
verdict is the same on any thread and at any load (docs/security.md).

Imports nothing of Stiva (core); math-verify is imported on first use.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import threading
import unicodedata
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .numeric import MAX_DIGITS, NUMBER, canonical, delatex, exact_value

__all__ = [
    "ANSWER_KINDS",
    "Final",
    "Tally",
    "final_answer",
    "infer_kind",
    "math_equal",
    "same_final",
    "tally",
    "unboxed",
]

ANSWER_KINDS = ("choice", "number", "math", "literal", "exact", "auto")
_MAX_SHORT = 80  # `auto`: a whole response counts as a final answer only when it is this short
_MAX_READ = 100_000  # characters read from a response's end: where a final answer is, and a bound
_MAX_MATH = 300  # characters of an expression handed to math-verify
_MAX_LITERAL = 4_000  # characters of a literal handed to ast.literal_eval

# A JSON "answer" field: a string (unescaped), or a bare token kept as written (never a float).
_JSON_ANSWER = re.compile(r'"answer"\s*:\s*("(?:[^"\\]|\\.){0,4000}"|-?[\w.+-]{1,400})', re.IGNORECASE)
_ANSWER_LINE = re.compile(r"(?:^|\n)\W{0,3}(?:the\s+)?(?:final\s+)?answer\s*(?:is\b|:|=)\s*(.+)", re.IGNORECASE)
_ANCHOR = re.compile(r"answer\W{0,4}(?:is\b|:|=)", re.IGNORECASE)
_EDGE = " \t\n.,;:!?\"'`*_$\u201c\u201d\u2018\u2019\u00ab\u00bb"  # and curly quotes
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# What makes an answer an expression rather than a number: a LaTeX command, a power, a root, pi,
# or an operator between two operands ("2\sqrt{73}-6\sqrt{2}", "3+4i", "x^2").
_MATHY = re.compile(r"\\[a-zA-Z]+|\^|√|π|sqrt|\bpi\b|[\w)}]\s*[-+*×·]\s*[\w(\\{]")
_CODE_OUTPUT = re.compile(r"\bassert(?:ion)?\b|\bliteral\b|\boutput of\b", re.IGNORECASE)
_MATH_CHARACTERS = re.compile(r"[\w\s^+\-*/=().,{}\[\]<>|√π·×]+")
_FUNCTION_NAME = re.compile(r"\b(?:sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|sinh|cosh|tanh|log|ln|exp|sqrt|pi)\b")
_OPTION_LINE = re.compile(r"(?m)^\s*\(?([A-J])[).:]\s+\S")


@dataclass(frozen=True, slots=True)
class Final:
    """A final answer read from a response: `form` says how it reads (letter, number, math,
    literal, text) and `key` is its canonical text. Equal keys of one form always agree; numbers
    and math agree where math-verify finds them equal (`same_final`)."""

    form: str
    key: str

    def __str__(self) -> str:
        return self.key


def final_answer(text: str, kind: str | None = "auto", options: Sequence[str] | None = None) -> Final | None:
    """The final answer `text` commits to, read by the question's `kind`, or None when it has none.
    `options`: a `choice` question's option texts in letter order, where known (a grader's item):
    only their letters count, and an answer that is one option's text reads as its letter."""
    if not text:
        return None
    kind = kind if kind in ANSWER_KINDS else "auto"
    text = unicodedata.normalize("NFKC", text[-_MAX_READ:])
    field = _json_answer(text)
    if kind == "choice":
        return _choice(text, field, options)
    if kind == "number":
        return _number(text, field)
    if kind == "literal":
        return _literal(text, field)
    if kind == "exact":
        return _exact(text, field)
    if kind == "math":
        segment = _stated(text, field)
    else:  # auto
        segment = field if field is not None else _segment(text)
    if segment is None and kind == "auto":
        stripped = text.strip()
        if "\n" not in stripped and len(stripped) <= _MAX_SHORT:
            segment = stripped
    if segment is None:
        return None
    return _math_or_number(segment) or _text(segment)


def _exact(text: str, field: str | None) -> Final | None:
    """A short free answer: what the response states (`_stated`), normalised (`_text`)."""
    segment = _stated(text, field)
    return None if segment is None else _text(segment)


def _stated(text: str, field: str | None) -> str | None:
    """Where a response states its answer: the JSON field, else the last box or "answer is" line,
    else its last line that is not blank (None for a blank response)."""
    segment = field if field is not None else _segment(text)
    if segment is None:
        lines = [line for line in text.splitlines() if line.strip()]
        segment = lines[-1] if lines else None
    return segment


def same_final(a: Final | str | None, b: Final | str | None) -> bool:
    """Whether two final answers are the same answer."""
    if a is None or b is None:
        return False
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    if a.form == b.form and a.key == b.key:
        return True
    if a.form in ("number", "math") and b.form in ("number", "math") and "math" in (a.form, b.form):
        return math_equal(a.key, b.key)  # two numbers are equal only where their exact keys are
    return False


def infer_kind(reference: str, question: str = "") -> str:
    """The kind of an item known only by its reference and question (a recorded item): `choice`
    where the reference is one option letter (or the question lists lettered options and the
    reference is a letter), `literal` where the question asks for a code output (an assertion, a
    literal) and the reference is a Python literal, `number` where it is one number, `math` where
    it is an expression (one that starts with a letter too, where it reads as math: `_letter_math`),
    `literal` where it is a Python literal other than a name or number, else `exact`."""
    reference = unicodedata.normalize("NFKC", reference).strip()
    literal = _python_literal(reference) is not None
    if _CODE_OUTPUT.search(question) and literal:
        return "literal"  # a code output: 5 is not 5.0, 'a' is not 'A'
    bare = reference.strip("()[]*. ")
    if len(bare) == 1 and bare.isalpha() and bare.isupper():
        if len(set(_OPTION_LINE.findall(question))) >= 2 or len(reference) <= 3:
            return "choice"
    if reference.strip("$").strip() and _plain_number(delatex(reference.strip("$"))) is not None:
        return "number"
    if _MATHY.search(reference) and ("\\" in reference or not reference[:1].isalpha()):
        if not literal or "\\" in reference:
            return "math"
    if not literal and reference[:1].isalpha() and _letter_math(reference):
        return "math"
    return "literal" if literal else "exact"


def _letter_math(reference: str) -> bool:
    """Whether a reference that starts with a letter reads as math ("x^2", "pi/2", "sin(x)^2",
    "x^2 + y^2 = 1"): only one-letter variables, function names, numbers, brackets and operators,
    at least one operator, and a lower-case letter or a digit; never words ("yes", "Saint-Denis",
    "e-mail") nor a sequence of capital letters ("A-B-C": options in an order)."""
    if len(reference) > _MAX_MATH or not _MATH_CHARACTERS.fullmatch(reference):
        return False
    if re.search(r"[a-zA-Z]{2,}", _FUNCTION_NAME.sub(" ", reference)):
        return False
    return bool(re.search(r"[\^+\-*/=×·]", reference)) and bool(re.search(r"[a-z0-9]", reference))


class Tally:
    """The count of a vote: `winner` (None where no answer was readable), how many agree with it,
    out of how many steps, the position of the step whose answer is returned (`first`: the
    best-ranked step that gave the winner), and how many steps gave a final answer at all."""

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


def tally(answers: Sequence[Final | str | None], ranks: Sequence[object] | None = None) -> Tally:
    """The majority of `answers` (final answers, one per step), grouped by `same_final`. `ranks`
    (one per step, lower is better: the step's model's rank) decides a tie, and whose answer the
    winner returns: the best-ranked step of the winning group. Without ranks the position stands in
    for one. Unreadable answers (None) vote for nothing."""
    order = list(range(len(answers)))
    rank = list(ranks) if ranks is not None else order
    groups: list[list[int]] = []
    for position in sorted(order, key=lambda p: (rank[p], p)):  # grouped best-ranked first: order-free
        answer = answers[position]
        if answer is None:
            continue
        for group in groups:
            if same_final(answers[group[0]], answer):
                group.append(position)
                break
        else:
            groups.append([position])
    if not groups:
        return Tally(None, 0, len(answers), None)
    best = max(groups, key=lambda g: len(g))  # groups are in their best member's rank order: ties go to the first
    chosen = best[0]
    return Tally(str(answers[chosen]), len(best), len(answers), chosen, sum(len(g) for g in groups))


# --- math ---------------------------------------------------------------------------------------

_HEAVY = re.compile(r"!|\\(?:binom|choose|prod|sum|int|lim|infty|det|matrix|begin)")
_LONG_NUMBER = re.compile(r"\d{31,}")
_MAX_SYMBOLS = 3  # distinct variables in an expression handed to math-verify
_MAX_DEGREE = 12  # the powers and products of sums in one expression, added up
_COMMAND = re.compile(r"\\[a-zA-Z]+|\b(?:sin|cos|tan|cot|sec|csc|log|ln|exp|sqrt|pi)\b")
_MAX_FUNCTIONS = 8  # sines, logarithms and the like: nested, sympy's simplification of them is slow
_FUNCTION = re.compile(
    r"\b(?:sin|cos|tan|cot|sec|csc|log|ln|exp|arcsin|arccos|arctan|sinh|cosh|tanh)\b|\\(?:sin|cos|tan|cot|sec|csc|log|ln|exp|arc|sinh|cosh|tanh)"
)
_LETTER = re.compile(r"[a-zA-Z]")
_SUM = re.compile(r"[\w)}\]]\s*[-+]")  # a term followed by a sign: the group is a sum
_SUM_GROUP = re.compile(r"\([^()]*[a-zA-Z][^()]*[-+][^()]*\)|\([^()]*[-+][^()]*[a-zA-Z][^()]*\)")
_math_lock = threading.Lock()


def math_equal(a: str, b: str) -> bool:
    """Whether two expressions are equal as math (math-verify), both short and screened (`_math_safe`):
    what fails the screen is not handed to sympy, and compares as text."""
    if a == b:
        return True
    if not (_math_safe(a) and _math_safe(b)):
        return False
    x, y = sorted((a, b))
    return _math_equal(x, y)


def _math_safe(expression: str) -> bool:
    """Whether sympy can compare `expression` in well under a second, judged from its text alone (so
    that the verdict never depends on a clock): no longer than `_MAX_MATH`; no factorial, sum,
    product, integral or limit; no number of more than 30 digits; every exponent a number up to 100,
    a letter or a small fraction (no tower); at most `_MAX_SYMBOLS` variables; and the powers and
    products of sums it would expand ("(x+y)^{12}", "(a+b)(c+d)...") of degree `_MAX_DEGREE` at most
    in all. Measured on ZeroEval's math answers and on hostile ones: tests/test_same_answer.py."""
    if len(expression) > _MAX_MATH or _HEAVY.search(expression) or _LONG_NUMBER.search(expression):
        return False
    text = expression.replace("**", "^")
    if len(set(_LETTER.findall(_COMMAND.sub(" ", text)))) > _MAX_SYMBOLS:
        return False
    if len(_FUNCTION.findall(text)) > _MAX_FUNCTIONS:
        return False
    degree = len(_SUM_GROUP.findall(text))  # each factor that is a sum of terms with a variable
    for at in (i for i, c in enumerate(text) if c == "^"):
        exponent = _exponent(text, at + 1)
        if exponent is None:
            return False
        if exponent.lstrip("-").isdigit():
            power = abs(int(exponent))
            if power > 100:
                return False
        elif re.fullmatch(r"-?[a-zA-Z]|-?\d+/\d+|\\frac\{\d+\}\{\d+\}", exponent):
            power = 1
        else:
            return False  # a power tower, or a power of something that is not a small number
        base = _group_base(text[:at])
        if base is not None:  # a power of a sum: of the power of the sum's own powers ("((x+y)^5+1)^5": 25)
            inner = [int(e) for e in re.findall(r"\^\s*\{?\s*(\d+)", base)]
            degree += power * max(inner, default=1)
    return degree <= _MAX_DEGREE


def _group_base(before: str) -> str | None:
    """The base of a power that ends `before` where it is a group that holds a sum ("(x+y)",
    "(\\sqrt{2}+\\sqrt{3})"), costly to raise to a power; None where it is a letter, a number or a
    group of one ("(-2)", "(5/3)", "\\sqrt{2}", "\\left(\\frac{1}{2}\\right)"), cheap to raise to
    any power up to 100."""
    before = before.rstrip()
    if not before or before[-1] not in ")]}":
        return None
    depth = 0
    for index in range(len(before) - 1, -1, -1):
        depth += {")": 1, "]": 1, "}": 1, "(": -1, "[": -1, "{": -1}.get(before[index], 0)
        if depth == 0:
            inside = before[index + 1 : -1].replace("\\right", "").replace("\\left", "")
            return inside if _SUM.search(inside.lstrip(" -")) else None
    return before  # unbalanced: counted as a sum


def _exponent(text: str, start: int) -> str | None:
    """The exponent after a `^` at `start`: a braced group (balanced), else a number or a letter."""
    rest = text[start:].lstrip()
    if rest.startswith("{"):
        depth = 0
        for index, char in enumerate(rest):
            depth += {"{": 1, "}": -1}.get(char, 0)
            if depth == 0:
                return rest[1:index].strip()
        return None
    token = re.match(r"-?\d+|[a-zA-Z]", rest)
    return token.group() if token else None


@lru_cache(maxsize=8192)
def _math_equal(a: str, b: str) -> bool:
    """math-verify's verdict, the same on any thread and at any load: its timeouts are off (they are
    SIGALRM alarms, which only the main thread can take, and which cancel any alarm of the caller's
    own), so no comparison's outcome depends on the clock; `_math_safe` and `_MAX_MATH` keep each
    one short instead (benchmarks/perf/math_agreement.json: the slowest of ZeroEval's math pairs).
    One comparison at a time: math-verify's LaTeX parser is not known to be thread-safe."""
    try:
        from math_verify import parse, verify
    except ImportError:  # pragma: no cover - a dependency; without it, math compares as text
        return False
    _quiet_math_verify()
    try:
        with _math_lock:
            left = parse(f"${a}$", parsing_timeout=None)  # None: no alarm
            right = parse(f"${b}$", parsing_timeout=None)
            if not left or not right:
                return False
            return bool(verify(left, right, timeout_seconds=None))
    except Exception:  # noqa: BLE001 - a comparison never takes a run down with it
        return False


class _NoTimeoutNotice(logging.Filter):
    """math-verify warns once, on stderr, that its timeouts are off: they are, on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


@lru_cache(maxsize=1)
def _quiet_math_verify() -> None:
    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).addFilter(_NoTimeoutNotice())


# --- readers ------------------------------------------------------------------------------------


def _json_answer(text: str) -> str | None:
    matches = _JSON_ANSWER.findall(text)
    if not matches:
        return None
    raw = str(matches[-1])
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw.strip('"')
        return value if isinstance(value, str) else None
    return None if raw.lower() in ("null", "none") else raw


def _segment(text: str) -> str | None:
    """Where a response states its final answer: the last `\\boxed{}`, else the last "answer is" /
    "Answer:" line; None where it has neither."""
    boxed = unboxed(text)
    if boxed is not None:
        return boxed
    lines = _ANSWER_LINE.findall(text)
    return str(lines[-1]) if lines else None


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


def _plain_number(text: str) -> Final | None:
    """`text` as exactly one number ("1,000", "$5", "25%", "-3/4"), or None."""
    cleaned = text.replace("**", "").strip(_EDGE).removesuffix("%").strip().strip("$").strip()
    if not cleaned or len(cleaned) > 2 * MAX_DIGITS + 20:
        return None
    if not re.fullmatch(r"-?[\d,]*\.?\d*(?:[eE][-+]?\d+)?(?:\s*/\s*-?[\d,]*\.?\d+)?", cleaned):
        return None
    value = exact_value(cleaned)
    return None if value is None else Final("number", canonical(value))


def _math_or_number(segment: str) -> Final | None:
    """A segment as a number where it is one, else as math where it is an expression, else None."""
    plain = delatex(segment)
    if "=" in plain:  # "x = 5", "16 - 7 = 9": what it comes to
        plain = plain.rsplit("=", 1)[1]
    number = _plain_number(plain)
    if number is not None:
        return number
    if _MATHY.search(plain):
        key = _math_key(plain)
        return Final("math", key) if key else None
    return None


def _math_key(expression: str) -> str:
    text = expression.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("$", "")
    text = text.replace("**", "").strip(" \t\n.,;:")
    return "".join(text.split())


def _number(text: str, field: str | None) -> Final | None:
    """A `number` item's answer: the stated one (a JSON field, a box, an "answer is" line) read as
    a number, or as math where it is an expression; else the last number in the text."""
    segment = field if field is not None else unboxed(text)
    if segment is None:
        anchors = list(_ANCHOR.finditer(text))
        if anchors:
            segment = text[anchors[-1].end() :].split("\n", 1)[0]
    if segment is not None:
        found = _math_or_number(segment)
        if found is not None:
            return found
        first = _numbers(delatex(segment))
        if first:
            return first[0]
    everywhere = _numbers(delatex(text))
    return everywhere[-1] if everywhere else None


def _numbers(text: str) -> list[Final]:
    values = (exact_value(token) for token in NUMBER.findall(text))
    return [Final("number", canonical(value)) for value in values if value is not None]


def _text(segment: str) -> Final | None:
    """A short free answer, normalised: a number where it is one."""
    inner = unboxed(segment)
    text = delatex(inner if inner is not None else segment)
    number = _plain_number(text)
    if number is not None:
        return number
    text = text.replace("**", "").strip(_EDGE)
    text = " ".join(text.casefold().split())
    return Final("text", text) if text else None


def _choice(text: str, field: str | None, options: Sequence[str] | None) -> Final | None:
    """An option letter, among the letters of `options` where they are known (A-Z else): the letter
    the response commits to (a JSON field, else the response: a `\\boxed{}` first, its content and
    then the rest), else the letter of the option whose text is the response's final answer (read
    as `exact` reads it, where the options are known), else the last "(C)" or "**C**" near the end."""
    letters = _LETTERS[: len(options)] if options else _LETTERS
    said = field if field is not None else text
    boxed = unboxed(said)
    parts = (delatex(boxed), said) if boxed is not None else (said,)
    for part in parts:
        letter = _committed_letter(part, letters)
        if letter is not None:
            return Final("letter", letter)
    if options:
        final = _exact(text, field)
        for letter, option in zip(letters, options):
            if final is not None and same_final(final, _text(option)):
                return Final("letter", letter)
    marks = f"[{letters if options else letters[:10]}]"  # unlisted options: A-J, never a stray "(Z)"
    for part in reversed(parts):
        emphasised = re.findall(rf"\(({marks})\)|\*\*({marks})\*\*", part[-400:])
        if emphasised:
            return Final("letter", "".join(emphasised[-1]))
    return None


def _committed_letter(text: str, letters: str) -> str | None:
    """The letter `text` is ("C", "(c)", "**C.**"), else the last "answer is (C)" / "Answer: C" /
    "answer: **C**", else a last line that is the letter ("C", "(C)", "C.", "C) text"); only
    `letters` count, and never a letter inside a word."""
    stripped = text.strip(_EDGE + "()[]")
    if len(stripped) == 1 and stripped.upper() in letters and stripped.isalpha():
        return stripped.upper()
    marked = re.findall(
        rf"(?i:answer)\W{{0,4}}(?:(?i:is)|:|=)?\W{{0,4}}(?:(?i:option|choice)\s*)?[\s*_(\[]*([{letters}])(?!\w)", text
    )
    if marked:
        return str(marked[-1])
    lines = [line.strip(" \t*_#>") for line in text.splitlines() if line.strip(" \t*_#>")]
    last = re.match(r"^[(\[]?([A-Za-z])(?:[)\].:]|$)", lines[-1]) if lines else None
    if last and last.group(1).upper() in letters:
        return last.group(1).upper()
    return None


def _literal(text: str, field: str | None) -> Final | None:
    """A code output or string literal: the stated literal, compared as a Python value, case kept.
    A JSON `answer` field that is present and empty states the empty string (`""` is `''`), as
    ZeroEval's CRUXEval scorer reads it, not a missing answer."""
    if field is not None and not field.strip():
        return Final("literal", repr(""))
    segment = field
    if segment is None:
        asserted = re.findall(r"assert\s+.*?==\s*(.+)", text)
        segment = str(asserted[-1]) if asserted else _segment(text)
    if segment is None:
        lines = [line for line in text.splitlines() if line.strip() and not line.strip().startswith("```")]
        segment = lines[-1] if lines else None
    if segment is None:
        return None
    segment = segment.strip().strip("`").strip()
    value = _python_literal(segment)
    if value is not None:
        return Final("literal", value)
    shown = " ".join(segment.split())
    return Final("literal", shown) if shown else None


def _python_literal(text: str) -> str | None:
    """`text` as a Python literal's canonical repr ('a' and "a" are one), or None where it is no
    literal, is too long, or is a bare name."""
    if not text or len(text) > _MAX_LITERAL:
        return None
    try:
        with warnings.catch_warnings():  # "invalid decimal literal" and the like: not a literal, said quietly
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text.strip())
        return _literal_key(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _literal_key(value: object) -> str:
    """`repr(value)`, but with a set's members in sorted order: a set's repr follows string hashing,
    which differs from process to process, so one set would print two ways."""
    if isinstance(value, set | frozenset):
        members = ", ".join(sorted(_literal_key(member) for member in value))
        if isinstance(value, frozenset):
            return f"frozenset({{{members}}})" if value else "frozenset()"
        return f"{{{members}}}" if value else "set()"
    if isinstance(value, list):
        return "[" + ", ".join(_literal_key(member) for member in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal_key(member) for member in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal_key(k)}: {_literal_key(v)}" for k, v in value.items()) + "}"
    return repr(value)
