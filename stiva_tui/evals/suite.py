"""Suites: the item format, reading a JSONL suite, and what is asked (loading one by name, path or
public format is `loaders.load_suite`).

A suite is a JSONL file, one question per line:

    {"_suite": "One line saying what the suite measures"}          (optional, first line only)
    {"id": "add-1", "question": "What is 17 * 23?", "answer": "391", "grader": "numeric"}
    {"id": "cap-1", "question": "...", "answer": "B", "grader": "choice", "choices": ["...", "..."]}

Keys of an item (anything else is an error, so a typo does not silently change grading; keys
starting with "_" are comments and ignored):

- `id` (required, unique in the suite), `question` (required), `grader` (required, see `GraderName`).
- `answer`: the reference. Required for every grader but `code`. For `numeric` it must be one
  number (`1,000`, `-2.5`, `3/4`, `\\frac{3}{4}`); for `contains`, `|` separates accepted answers.
- `choices` (`choice` only, 2-26 distinct options): `answer` is the letter of the right option or
  its exact text; either way the stored `answer` becomes the letter.
- `shuffle` (`choice` only): present the options in an order fixed by the item id (see
  `shuffled_choices`), so a resumed run sees the same order; `answer` follows its option.
- `tests` (`code` only, required): Python asserts as a string, run after the answer's code, or an
  object with `stdin_stdout` cases and/or `functional` cases (see `CodeTests`).
- `tolerance` (`numeric` only): relative tolerance; without one, a reference written as an integer
  is matched only by the same value, any other within 1e-6 (see `graders`).
- `timeout_s` (`code` only): seconds per run of the answer's code, default 10.
- `meta`: flat labels carried into reports (source, subject, level...), never graded.
- `recorded` (`recorded` only, required): the recorded answers of real models to this item and
  their recorded scores, as {`answer_key(text)`: score 0..1}. Written by `stiva bench import`: an
  answer of a recorded pool is graded by the score recorded for it, not graded again, and an
  answer that is none of them (no model's recorded answer) is wrong.

Errors are `SuiteError`s naming the file and line. `Suite.content_hash` fingerprints the
normalised items so a runner can key resume state on it.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from ..core import reading
from .numbers import parse_number

__all__ = [
    "GRADERS",
    "LETTERS",
    "CodeTests",
    "FunctionalCase",
    "FunctionalTests",
    "GraderName",
    "IOCase",
    "Suite",
    "SuiteError",
    "SuiteItem",
    "answer_key",
    "json_loads",
    "load_suite_file",
    "parse_suite",
    "question_text",
    "shuffled_choices",
    "split_of",
    "validate_item",
]

GraderName = Literal["numeric", "exact", "contains", "choice", "math", "code", "judge", "recorded"]
GRADERS: tuple[str, ...] = ("numeric", "exact", "contains", "choice", "math", "code", "judge", "recorded")
LETTERS = string.ascii_uppercase


class SuiteError(ValueError):
    """A suite that cannot be used, with where: `source` (a path, a built-in, a dataset), and the
    JSONL `line` or the `record` number (1-based) of a loaded dataset where one item is at fault."""

    def __init__(self, message: str, *, source: str = "", line: int | None = None, record: int | None = None) -> None:
        self.message, self.source, self.line, self.record = message, source, line, record
        where = source
        if line is not None:
            where = f"{source}:{line}"
        elif record is not None:
            where = f"{source} (record {record})"
        super().__init__(f"{where}: {message}" if where else message)


# --- the item ------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    def __hash__(self) -> int:
        # Frozen, so hashable; pydantic's own hash fails on the dict and list fields.
        return hash(self.model_dump_json())


class IOCase(_Strict):
    """One run of a whole program: `input` on stdin, `output` expected on stdout."""

    input: str
    output: str


class FunctionalCase(_Strict):
    """One call: `fn_name(*input)` must return `output` (compared after JSON round-tripping)."""

    input: list[Any]
    output: Any


class FunctionalTests(_Strict):
    """Calls of one function, or of that method on `Solution()` where the code defines it."""

    fn_name: str = Field(min_length=1)
    cases: tuple[FunctionalCase, ...] = Field(min_length=1)


class CodeTests(_Strict):
    """Structured tests of a `code` item (LiveCodeBench's shape). `note` says what a loader left
    out (such as private cases it could not decode safely) and is repeated in every grade."""

    stdin_stdout: tuple[IOCase, ...] = ()
    functional: FunctionalTests | None = None
    note: str | None = None

    @model_validator(mode="after")
    def _has_cases(self) -> CodeTests:
        if not self.stdin_stdout and self.functional is None:
            raise ValueError("tests has no cases: give stdin_stdout cases or functional cases")
        return self


class SuiteItem(_Strict):
    """One question with its reference and the grader that judges answers to it. Immutable."""

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    grader: GraderName
    answer: str = ""
    choices: tuple[str, ...] | None = None
    shuffle: StrictBool = False
    tests: str | CodeTests | None = None
    tolerance: float | None = Field(default=None, gt=0)
    timeout_s: float | None = Field(default=None, gt=0, le=600)
    meta: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    recorded: dict[str, float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _resolve_choice(cls, data: Any) -> Any:
        """Turn a choice item's answer into the letter of its option, after the optional shuffle.

        Done before field validation because the model is frozen; a shape this cannot read is
        left alone for the field and after-validators to report."""
        if not isinstance(data, dict) or data.get("grader") != "choice":
            return data
        choices, answer = data.get("choices"), data.get("answer")
        if not (
            isinstance(choices, list | tuple)
            and all(isinstance(c, str) for c in choices)
            and isinstance(answer, str)
            and isinstance(data.get("id"), str | int)
        ):
            return data
        options = [c.strip() for c in choices]
        if len(set(options)) != len(options) or not 2 <= len(options) <= len(LETTERS):
            return data
        correct = _correct_option(options, answer.strip())
        if correct is None:
            return data
        if data.get("shuffle") is True:
            options = shuffled_choices(str(data["id"]), options)
        return {**data, "choices": options, "answer": LETTERS[options.index(correct)]}

    @model_validator(mode="after")
    def _check_grader_fields(self) -> SuiteItem:
        if not self.question.strip():
            raise ValueError("question is blank")
        if self.grader not in ("code", "recorded") and not self.answer.strip():
            raise ValueError(f"a {self.grader} item needs an answer")
        _only_for(self, "choices", self.choices is not None, "choice")
        _only_for(self, "shuffle", self.shuffle, "choice")
        _only_for(self, "tests", self.tests is not None, "code")
        _only_for(self, "tolerance", self.tolerance is not None, "numeric")
        _only_for(self, "timeout_s", self.timeout_s is not None, "code")
        _only_for(self, "recorded", self.recorded is not None, "recorded")
        if self.grader == "recorded" and (
            not self.recorded or not all(0 <= score <= 1 for score in self.recorded.values())
        ):
            raise ValueError("a recorded item needs recorded answers' scores, each from 0 to 1")
        if self.grader == "choice":
            _check_choice(self)
        elif self.grader == "code" and (self.tests is None or (isinstance(self.tests, str) and not self.tests.strip())):
            raise ValueError("a code item needs tests")
        elif self.grader == "numeric":
            if parse_number(self.answer) is None:
                raise ValueError(f"a numeric item's answer must be one number, not {self.answer!r}")
        return self


def _only_for(item: SuiteItem, key: str, present: bool, grader: str) -> None:
    if present and item.grader != grader:
        raise ValueError(f"{key} is only for {grader} items, not {item.grader}")


def _check_choice(item: SuiteItem) -> None:
    if item.choices is None or len(item.choices) < 2:
        raise ValueError("a choice item needs at least two choices")
    if len(item.choices) > len(LETTERS):
        raise ValueError(f"a choice item has at most {len(LETTERS)} choices")
    if len(set(item.choices)) != len(item.choices):
        raise ValueError("choices must be distinct")
    if item.answer not in LETTERS[: len(item.choices)]:
        raise ValueError(
            f"answer {item.answer!r} is neither a letter A-{LETTERS[len(item.choices) - 1]} "
            "nor the text of one of the choices"
        )


def _correct_option(options: list[str], answer: str) -> str | None:
    """The option an answer names: a letter in range wins over an option that is that letter."""
    if len(answer) == 1 and answer in LETTERS[: len(options)]:
        return options[LETTERS.index(answer)]
    return answer if answer in options else None


def shuffled_choices(item_id: str, choices: Iterable[str]) -> list[str]:
    """`choices` in an order fixed by `item_id`: sorted by a hash of (id, option).

    Deterministic across runs and machines (no RNG state), and idempotent: shuffling an already
    shuffled list gives the same list, so re-validating a normalised item changes nothing."""
    return sorted(choices, key=lambda c: hashlib.sha256(f"{item_id}\n{c}".encode()).hexdigest())


def answer_key(text: str) -> str:
    """The key of an answer in a `recorded` item: a hash of its text without the whitespace at its
    ends (a worker's stream may end in a newline the recording did not have)."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def recorded_answer_line(text: str) -> str:
    """What a recorded answer says last (its last line that is not blank), where an answer usually
    is: the `extracted` of an answer graded by its recorded score, since nothing is read from it."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


_ANSWER_KIND = {"choice": "choice", "numeric": "number", "math": "math", "exact": "exact"}


def answer_kind(item: SuiteItem) -> str:
    """How a vote or an agreement gate reads an answer to `item` (core/answers.py): its grader's
    kind; a recorded item's as its import set it (`meta["kind"]`: `stiva bench import` infers one
    from the reference and the question, or takes --kind), else inferred the same way; `auto` where
    answers have no checkable form (contains, code, judge)."""
    if item.grader == "recorded":
        from ..core.answers import ANSWER_KINDS, infer_kind

        given = item.meta.get("kind")
        if isinstance(given, str) and given in ANSWER_KINDS:
            return given
        return infer_kind(item.answer, item.question) if item.answer else "auto"
    return _ANSWER_KIND.get(item.grader, "auto")


def answer_options(item: SuiteItem) -> tuple[str, ...]:
    """A `choice` item's option texts, as its grader reads them (evals/graders.py), so that votes,
    gates and the router's training read an answer that is an option's text as that option's
    letter, as the grader does; () for any other item."""
    return tuple(item.choices or ()) if answer_kind(item) == "choice" else ()


def question_text(item: SuiteItem) -> str:
    """What the system under test is asked.

    `choice`: the question, the options lettered "A. ...", and a line asking for the letter (the
    options are already in their shuffled order where the item asked for one). `code`: the
    question and a line asking for one Python code block. Anything else: the question as is."""
    question = item.question.rstrip()
    if item.grader == "choice" and item.choices:
        letters = LETTERS[: len(item.choices)]
        options = "\n".join(f"{letter}. {choice}" for letter, choice in zip(letters, item.choices))
        span = f"{', '.join(letters[:-1])} or {letters[-1]}"
        return (
            f"{question}\n\n{options}\n\nAnswer with the letter of the correct option ({span}) alone on the last line."
        )
    if item.grader == "code":
        return f"{question}\n\nWrite your solution in Python and give it as one ```python code block."
    return question


# --- the suite -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Suite:
    """A named, ordered set of items with distinct ids. `content_hash` is the sha256 of the
    normalised items (canonical JSON, defaults left out so a new optional key does not change old
    hashes); it changes when any item, or their order, changes, and never otherwise."""

    name: str
    items: tuple[SuiteItem, ...]
    description: str = ""
    source: str = ""
    content_hash: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))
        seen: set[str] = set()
        for index, item in enumerate(self.items, 1):
            if item.id in seen:
                raise SuiteError(f"duplicate id {item.id!r}", source=self.source, record=index)
            seen.add(item.id)
        canonical = [item.model_dump(mode="json", exclude_defaults=True) for item in self.items]
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        object.__setattr__(self, "content_hash", hashlib.sha256(text.encode("utf-8")).hexdigest())

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[SuiteItem]:
        return iter(self.items)

    def item(self, item_id: str) -> SuiteItem:
        """The item with that id (KeyError if none): a runner resuming by id needs it."""
        for item in self.items:
            if item.id == item_id:
                return item
        raise KeyError(item_id)


def split_of(suite: Suite, split: str) -> Suite:
    """The items of `suite` whose `meta.split` is `split` (`--split heldout`), as a suite of its own
    named `NAME:SPLIT`. A split no item has is an error that names the splits there are."""
    items = tuple(item for item in suite.items if item.meta.get("split") == split)
    if not items:
        splits = sorted({str(item.meta["split"]) for item in suite.items if item.meta.get("split") is not None})
        raise SuiteError(
            f"no item has meta.split = {split!r} (splits here: {', '.join(splits) or 'none'})",
            source=suite.source or suite.name,
        )
    return Suite(f"{suite.name}:{split}", items, description=suite.description, source=suite.source)


MAX_SUITE_BYTES = 1024 * 1024 * 1024
"""Bytes of a JSONL suite file (a file past it is refused before it is read)."""
MAX_LINE_CHARS = 64 * 1024 * 1024
"""Characters of one line of it, one item (a longer one is refused, read no further)."""


def load_suite_file(path: str | Path) -> Suite:
    """A JSONL suite file, read a line at a time (`MAX_SUITE_BYTES`, `MAX_LINE_CHARS`); its name
    is the file's stem."""
    path = Path(path)
    source = str(path)
    try:
        with reading.open_text(path, MAX_SUITE_BYTES, decompress=False) as handle:
            return _parse_lines(reading.bounded_lines(handle, MAX_LINE_CHARS, source=source), path.stem, source)
    except reading.ReadError as error:
        raise SuiteError(error.message, source=source, line=error.line) from None
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"cannot read: {error}", source=source) from error


class _HugeInteger(Exception):
    def __init__(self, digits: str) -> None:
        self.digits = digits


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > sys.get_int_max_str_digits() > 0:
        raise _HugeInteger(digits)
    return int(digits)


def json_loads(text: str) -> Any:
    """`json.loads`, where an integer of more digits than Python converts (`sys.get_int_max_str_digits()`,
    4300 by default) is a `json.JSONDecodeError` at that number like any other fault in the text,
    rather than a bare ValueError without a place."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        pass
    try:  # again, to find the number: the hook sees it, in the order of the text
        return json.loads(text, parse_int=_bounded_int)
    except _HugeInteger as huge:
        found = re.search(r"(?<![0-9.\"])" + re.escape(huge.digits) + r"(?![0-9])", text)
        raise json.JSONDecodeError(
            f"a whole number of {len(huge.digits.lstrip('-'))} digits (at most "
            f"{sys.get_int_max_str_digits()} are read)",
            text,
            found.start() if found else 0,
        ) from None


def parse_suite(text: str, *, name: str, source: str = "") -> Suite:
    """Read JSONL suite text. Blank lines are skipped; a `{"_suite": "..."}` line before the first
    item gives the description; any error names `source` and the line."""
    # JSONL lines end at "\n" only: str.splitlines() would also cut at U+0085, U+2028 and the like,
    # which JSON leaves unescaped inside strings (an MMLU question holds one)
    return _parse_lines(enumerate(text.split("\n"), 1), name, source)


def _parse_lines(lines: Iterable[tuple[int, str]], name: str, source: str) -> Suite:
    description = ""
    items: list[SuiteItem] = []
    first_line: dict[str, int] = {}
    for number, raw in lines:
        if not raw.strip():
            continue
        try:
            data = json_loads(raw)
        except json.JSONDecodeError as error:
            raise SuiteError(
                f"not valid JSON: {error.msg} (column {error.colno})", source=source, line=number
            ) from error
        except RecursionError:
            raise SuiteError(
                "JSON nested too deeply (more levels than the parser's recursion limit)", source=source, line=number
            ) from None
        if not isinstance(data, dict):
            raise SuiteError("each line must be a JSON object", source=source, line=number)
        if "_suite" in data:
            if items or description or not isinstance(data["_suite"], str):
                raise SuiteError(
                    'the {"_suite": "description"} line must come first and hold a string', source=source, line=number
                )
            description = data["_suite"].strip()
            continue
        item = validate_item(data, source=source, line=number)
        if item.id in first_line:
            raise SuiteError(
                f"duplicate id {item.id!r} (first on line {first_line[item.id]})", source=source, line=number
            )
        first_line[item.id] = number
        items.append(item)
    if not items:
        raise SuiteError("the suite has no items", source=source)
    return Suite(name=name, items=tuple(items), description=description, source=source)


def validate_item(
    data: dict[str, Any], *, source: str = "", line: int | None = None, record: int | None = None
) -> SuiteItem:
    """A `SuiteItem` from a dict (keys starting with "_" dropped), or a `SuiteError` saying where
    and what is wrong, in one line."""
    data = {key: value for key, value in data.items() if not key.startswith("_")}
    try:
        return SuiteItem.model_validate(data)
    except ValidationError as error:
        raise SuiteError(_one_line(error, data), source=source, line=line, record=record) from None


def _one_line(error: ValidationError, data: dict[str, Any]) -> str:
    problems = []
    for problem in error.errors()[:3]:
        where = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "unknown key (see stiva_tui.evals.suite for the keys an item may have)"
        elif problem["type"] == "literal_error" and where == "grader":
            message = f"unknown grader {data.get('grader')!r}; graders are {', '.join(GRADERS)}"
        problems.append(f"{where}: {message}" if where else message)
    item_id = data.get("id")
    prefix = f"item {item_id!r}: " if isinstance(item_id, str | int) else ""
    return prefix + "; ".join(problems)
