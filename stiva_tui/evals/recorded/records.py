"""Stiva's own `records` format, and what every importer's rows become: validated `RecordedRow`s.

One JSON object per line (JSONL, plain or `.gz`), one line per (item, model):

    {"id": "gsm/17", "question": "Janet has ...", "model": "gpt-4o", "response": "... 18", "correct": true}

- required: `id`, `question`, `model`, `response` (strings; `response` may be empty), `correct`
  (true/false, or a score from 0 to 1: right means a score of 0.5 or more);
- optional: `answer` (the reference), `domain`, `split` (strings), `prompt_tokens`,
  `completion_tokens` (whole numbers, 0 or more), `cost_usd`, `latency_s` (numbers, 0 or more);
- nothing else (a typo must not be dropped silently); keys starting with "_" are comments.

`check_rows` is the one validation all three formats go through: a wrong type, a duplicate
(item, model), or one item asked with two different questions is a `RecordsError` naming the file
and line (or record), and nothing is imported. `assign_splits` gives rows without a `split` a
deterministic one, by a hash of the item id.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core import reading
from .errors import RecordsError

__all__ = ["FIELDS", "RecordedRow", "assign_splits", "check_rows", "open_text", "read_records", "split_for"]

REQUIRED = ("id", "question", "model", "response", "correct")
OPTIONAL = ("answer", "domain", "split", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s")
FIELDS = REQUIRED + OPTIONAL
MAX_LINE_CHARS = 16 * 1024 * 1024
"""Characters of one line (one answer's record); a longer one is refused, read no further."""
MAX_FILE_BYTES = 1024 * 1024 * 1024
"""Bytes of one imported file, counted as read (a `.gz` once decompressed), and of a ZeroEval
folder's files together."""


@dataclass(frozen=True)
class RecordedRow:
    """One model's recorded answer to one item, validated."""

    id: str
    question: str
    model: str
    response: str
    score: float  # 0..1; `correct` true is 1.0
    answer: str = ""
    domain: str = ""
    split: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None

    @property
    def correct(self) -> bool:
        return self.score >= 0.5


def open_text(path: Path) -> io.TextIOWrapper:
    """The file as text, gunzipped when it is gzip (by its magic bytes, not its name); reading more
    than `MAX_FILE_BYTES` of it (decompressed) is a `ReadError`. The caller closes it."""
    return reading.open_text(path, MAX_FILE_BYTES)


def read_records(path: str | Path) -> list[RecordedRow]:
    """Every row of a `records` file (RecordsError, naming the line, for the first bad one), read
    a line at a time: each line to at most `MAX_LINE_CHARS`, and only the checked rows are kept."""
    path = Path(path)
    source = str(path)
    try:
        with open_text(path) as handle:
            return check_rows(_values(handle, source), source, empty="no records: one JSON object per line is expected")
    except reading.ReadError as exc:
        raise RecordsError(exc.message, source=source, line=exc.line) from None
    except OSError as exc:
        raise RecordsError(f"cannot read: {exc.strerror or exc}", source=source) from None
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise RecordsError(f"not UTF-8 JSONL text (or a damaged .gz): {exc}", source=source) from None


def _values(handle: io.TextIOWrapper, source: str) -> Iterator[tuple[int, Any]]:
    for number, line in reading.bounded_lines(handle, MAX_LINE_CHARS, source=source):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordsError(f"not JSON: {exc.msg} (column {exc.colno})", source=source, line=number) from None
        except (RecursionError, ValueError) as exc:  # nested too deep; an integer of 5,000 digits
            raise RecordsError(f"not a record: {str(exc).splitlines()[0][:120]}", source=source, line=number) from None
        yield number, value


def check_rows(raw: Iterable[tuple[int, Any]], source: str, *, empty: str = "no records") -> list[RecordedRow]:
    """Validate (line or record number, dict) pairs into rows, one at a time as `raw` gives them;
    the first fault is a RecordsError (`empty` its message when there is no row)."""
    rows: list[RecordedRow] = []
    seen: set[tuple[str, str]] = set()
    questions: dict[str, str] = {}
    splits: dict[str, str] = {}
    for number, value in raw:
        row = _row(value, source, number)
        key = (row.id, row.model)
        if key in seen:
            raise RecordsError(
                f"a second record of item {row.id!r} by model {row.model!r}: one per (item, model)",
                source=source,
                line=number,
            )
        seen.add(key)
        asked = questions.setdefault(row.id, row.question)
        if asked != row.question:
            raise RecordsError(
                f"item {row.id!r} is asked with another question than on an earlier line: one item, one question",
                source=source,
                line=number,
            )
        if row.split and splits.setdefault(row.id, row.split) != row.split:
            raise RecordsError(
                f"item {row.id!r} is in split {row.split!r} here and {splits[row.id]!r} on an earlier line",
                source=source,
                line=number,
            )
        rows.append(row)
    if not rows:
        raise RecordsError(empty, source=source)
    return rows


def _row(value: Any, source: str, line: int) -> RecordedRow:
    def bad(message: str) -> RecordsError:
        return RecordsError(message, source=source, line=line)

    if not isinstance(value, dict):
        raise bad(f"a record is a JSON object, not {type(value).__name__}")
    fields = {k: v for k, v in value.items() if not (isinstance(k, str) and k.startswith("_"))}
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise bad(f"unknown field {unknown[0]!r} (fields: {', '.join(FIELDS)})")
    missing = [name for name in REQUIRED if name not in fields]
    if missing:
        raise bad(f"missing {', '.join(repr(m) for m in missing)} (required: {', '.join(REQUIRED)})")
    for name in ("id", "question", "model", "response", "answer", "domain", "split"):
        if name in fields and not isinstance(fields[name], str):
            raise bad(f"{name!r} is a string, not {type(fields[name]).__name__}")
    for name in ("id", "question", "model"):
        if not fields[name].strip():
            raise bad(f"{name!r} is empty")
    if len(fields["id"]) > 200 or len(fields["model"]) > 200:
        raise bad("an 'id' or 'model' of more than 200 characters")
    score = _score(fields["correct"], bad)
    counts = {}
    for name in ("prompt_tokens", "completion_tokens"):
        if name in fields and fields[name] is not None:
            number = fields[name]
            if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 10**12:
                raise bad(f"{name!r} is a whole number from 0, not {_short(number)}")
            counts[name] = number
    amounts = {}
    for name in ("cost_usd", "latency_s"):
        if name in fields and fields[name] is not None:
            number = fields[name]
            if isinstance(number, bool) or not isinstance(number, int | float) or not 0 <= number < 1e9:
                raise bad(f"{name!r} is a number from 0, not {_short(number)}")
            if isinstance(number, float) and not math.isfinite(number):
                raise bad(f"{name!r} is a finite number")
            amounts[name] = float(number)
    return RecordedRow(
        id=fields["id"],
        question=fields["question"],
        model=fields["model"].strip(),
        response=fields["response"],
        score=score,
        answer=fields.get("answer") or "",
        domain=fields.get("domain") or "",
        split=fields.get("split") or "",
        prompt_tokens=counts.get("prompt_tokens"),
        completion_tokens=counts.get("completion_tokens"),
        cost_usd=amounts.get("cost_usd"),
        latency_s=amounts.get("latency_s"),
    )


def _score(value: Any, bad) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1:
        return float(value)
    raise bad(f"'correct' is true, false or a score from 0 to 1, not {_short(value)}")


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge integer"
    return text if len(text) <= 40 else text[:37] + "..."


def split_for(item_id: str, holdout: float) -> str:
    """ "heldout" for about `holdout` of all ids, else "train": fixed by a hash of the id alone, so
    every model of an item, and every import of the same data, puts it on the same side."""
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return "heldout" if int.from_bytes(digest[:8], "big") / 2**64 < holdout else "train"


def assign_splits(rows: list[RecordedRow], holdout: float) -> list[RecordedRow]:
    """Rows whose item has no recorded `split` get one by `split_for`; an item with one keeps it
    for all its models (the first recorded split of an item wins)."""
    if not 0 <= holdout <= 1:
        raise RecordsError(f"--holdout is a fraction from 0 to 1, not {holdout}")
    recorded: dict[str, str] = {}
    for row in rows:
        if row.split:
            recorded.setdefault(row.id, row.split)
    out = []
    for row in rows:
        split = recorded.get(row.id) or split_for(row.id, holdout)
        out.append(row if row.split == split else _replace(row, split=split))
    return out


def _replace(row: RecordedRow, **changes: Any) -> RecordedRow:
    from dataclasses import replace

    return replace(row, **changes)
