"""RouterBench's wide CSV (`--format routerbench`): one row per prompt, columns per model.

    sample_id, prompt, eval_name, <model>, <model>|model_response, <model>|total_cost, ...

A model is a column `M` for which `M|model_response` exists too; `M` holds its score (0..1),
`M|total_cost` its recorded cost in USD (optional). `eval_name` becomes the domain. Other columns
(`oracle_model_to_route_to`, ...) are left alone. Each (row, model) becomes one record, checked as
the `records` format's are (records.check_rows), so a bad cell names its line.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...core import reading
from . import records
from .errors import RecordsError
from .records import RecordedRow, check_rows, open_text

__all__ = ["read_routerbench"]

_RESPONSE = "|model_response"
_COST = "|total_cost"


def read_routerbench(path: str | Path) -> list[RecordedRow]:
    """Every (row, model) of the CSV as a checked row, read a line at a time (records.MAX_LINE_CHARS
    a line and a cell, records.MAX_FILE_BYTES in all); only the checked rows are kept."""
    path = Path(path)
    source = str(path)
    previous = csv.field_size_limit(records.MAX_LINE_CHARS)  # answers of many kB in one cell
    try:
        with open_text(path) as handle:
            reader = csv.DictReader(
                line for _, line in reading.bounded_lines(handle, records.MAX_LINE_CHARS, source=source)
            )
            header = reader.fieldnames or []
            for needed in ("sample_id", "prompt"):
                if needed not in header:
                    raise RecordsError(
                        f"no {needed!r} column: not RouterBench's wide CSV (sample_id, prompt, eval_name, "
                        "<model>, <model>|model_response, <model>|total_cost)",
                        source=source,
                        line=1,
                    )
            models = [c for c in header if c and c + _RESPONSE in header]
            if not models:
                raise RecordsError(
                    "no model columns: a model M needs a score column M and a column M|model_response",
                    source=source,
                    line=1,
                )
            return check_rows(_records(reader, models, source), source, empty="no rows under the header")
    except reading.ReadError as exc:
        raise RecordsError(exc.message, source=source, line=exc.line) from None
    except OSError as exc:
        raise RecordsError(f"cannot read: {exc.strerror or exc}", source=source) from None
    except (UnicodeDecodeError, EOFError) as exc:
        raise RecordsError(f"not UTF-8 CSV text (or a damaged .gz): {exc}", source=source) from None
    except csv.Error as exc:
        raise RecordsError(f"not CSV: {exc}", source=source) from None
    finally:
        csv.field_size_limit(previous)  # the limit is the process's: a suite's CSV keeps its own


def _records(reader: csv.DictReader, models: list[str], source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for row in reader:
        line = reader.line_num
        if None in row:
            raise RecordsError("more cells than the header has columns", source=source, line=line)
        for model in models:
            yield line, _record(row, model, source, line)


def _record(row: dict[str, str | None], model: str, source: str, line: int) -> dict[str, Any]:
    score_text = (row.get(model) or "").strip()
    try:
        score = float(score_text)
    except ValueError:
        raise RecordsError(
            f"{model}'s score {score_text[:40]!r} is not a number from 0 to 1", source=source, line=line
        ) from None
    record: dict[str, Any] = {
        "id": (row.get("sample_id") or "").strip(),
        "question": row.get("prompt") or "",
        "model": model,
        "response": row.get(model + _RESPONSE) or "",
        "correct": score,
    }
    if row.get("eval_name"):
        record["domain"] = row["eval_name"]
    cost_text = (row.get(model + _COST) or "").strip()
    if cost_text:
        try:
            record["cost_usd"] = float(cost_text)
        except ValueError:
            raise RecordsError(
                f"{model}'s total_cost {cost_text[:40]!r} is not a number", source=source, line=line
            ) from None
    return record
