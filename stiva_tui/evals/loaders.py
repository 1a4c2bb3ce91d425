"""Loading a suite: `load_suite(spec)` by public format, built-in name or file path, the built-ins
shipped in `stiva_tui/evals/data`, and the public benchmark formats (`FORMAT:PATH`) turned into suites.

PATH is a local file: JSONL (`.jsonl`, `.ndjson`), JSON (a list of records, or an object holding
one under "data", "rows", "train", "test" or "examples"), CSV, or Parquet (needs `pyarrow`). When
PATH is not a file it is a Hugging Face dataset, loaded with `datasets.load_dataset` if that
package is installed: `DATASET[:CONFIG][@SPLIT]`, e.g. `gpqa:Idavidrein/gpqa:gpqa_diamond@train`
(the split defaults per format). Records are strict: a missing column is a `SuiteError` naming
the record and the columns it has.

Formats:

- `aime`: `problem`/`Problem`/`question`, `answer`/`Answer`, `id`/`ID`/`problem_idx` (else the
  record number). AIME answers are integers 0-999, so the grader is `numeric`.
- `math500`: `problem`, `answer`, `unique_id` (MATH-500); grader `math`.
- `gpqa`: `Question`, `Correct Answer`, `Incorrect Answer 1..3`, `Record ID` (GPQA-Diamond);
  grader `choice`, options shuffled in an order fixed by the record id.
- `livecodebench`: LiveCodeBench code_generation_lite: `question_content`, `question_id`,
  `public_test_cases` and `private_test_cases` (JSON lists of {input, output, testtype}),
  `metadata` (JSON with `func_name` for functional problems), `starter_code`; grader `code`.
  The real dataset stores private cases as base64(zlib(pickle(a JSON string))). They are never
  unpickled: the pickle's opcodes are only read (`pickletools.genops`, which constructs nothing)
  and accepted when they hold one plain string and nothing else; anything else is skipped, and
  the item's `tests.note` says so, which every grade of it repeats.

Hostile files are one `SuiteError` each, read with bounded memory: JSON nested deeper than the
parser's recursion limit, a CSV field over the csv module's limit (128 KiB), a JSONL or CSV line
over `MAX_RECORD_CHARS`, a `.json` or `.csv` file over `MAX_FILE_BYTES`, a damaged Parquet file
(or one whose footer claims more than `MAX_FILE_BYTES` of data, checked before any of it is
read), text that is not UTF-8.
"""

from __future__ import annotations

import base64
import binascii
import csv
import json
import pickletools
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from ..core import reading
from .suite import Suite, SuiteError, json_loads, load_suite_file, parse_suite, validate_item

__all__ = [
    "FORMATS",
    "BuiltinInfo",
    "FormatInfo",
    "list_builtins",
    "list_formats",
    "load_builtin",
    "load_format",
    "load_suite",
]

Record = dict[str, Any]

MAX_RECORD_CHARS = 64 * 1024 * 1024
"""Characters one JSONL line may hold (a record of a public suite is kilobytes; LiveCodeBench's
largest private test cases are a few MB)."""
MAX_FILE_BYTES = 1024 * 1024 * 1024
"""Bytes a suite read whole may take: a `.json` file, or a Parquet file's data once decompressed."""


@dataclass(frozen=True, slots=True)
class FormatInfo:
    """A public format as `stiva bench --list` shows it; `split` is the dataset split used when
    PATH is a Hugging Face dataset without `@SPLIT`."""

    name: str
    grader: str
    description: str
    split: str


def list_formats() -> list[FormatInfo]:
    """Every format `FORMAT:PATH` accepts."""
    return [fmt.info for fmt in FORMATS.values()]


def load_format(fmt: str, target: str) -> Suite:
    """The suite in `target` (a file, or a Hugging Face dataset) read as format `fmt`."""
    if fmt not in FORMATS:
        raise SuiteError(f"unknown format {fmt!r}; formats are {', '.join(FORMATS)}", source=fmt)
    spec = f"{fmt}:{target}"
    convert = FORMATS[fmt].convert
    path = Path(target).expanduser()
    if path.is_file():
        name, records = f"{fmt}:{path.stem}", _file_records(path, spec)
    else:
        if _looks_like_path(target):
            raise SuiteError("no such file", source=spec)
        dataset, config, split = _hub_target(target, FORMATS[fmt].info.split)
        name, records = f"{fmt}:{dataset}", _hub_records(dataset, config, split, spec)
    items, seen = [], {}
    for number, line, record in records:
        where = {"source": spec, "line": line} if line is not None else {"source": spec, "record": number}
        try:
            data = convert(record, number)
        except _MissingColumn as missing:
            raise SuiteError(str(missing), **where) from None
        except RecursionError:  # a column that holds JSON nested too deeply (LiveCodeBench's cases)
            raise SuiteError(TOO_DEEP, **where) from None
        item = validate_item(data, **where)
        if item.id in seen:
            raise SuiteError(f"duplicate id {item.id!r} (first in record {seen[item.id]})", **where)
        seen[item.id] = number
        items.append(item)
    if not items:
        raise SuiteError("no records", source=spec)
    return Suite(name=name, items=tuple(items), description=FORMATS[fmt].info.description, source=spec)


# --- a suite by name ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BuiltinInfo:
    """A built-in suite as `stiva bench --list` shows it."""

    name: str
    items: int
    description: str


def load_suite(spec: str) -> Suite:
    """The suite `spec` names, tried in this order:

    1. `FORMAT:PATH` where FORMAT is one of `list_formats()` (PATH: a local file, or a Hugging Face
       dataset id when the `datasets` package is installed; see `load_format`);
    2. the name of a built-in (`list_builtins()`: every `*.jsonl` shipped in `stiva_tui/evals/data`);
       write `./basic` for a local file that happens to share a built-in's name;
    3. a path to a JSONL suite file.
    """
    try:
        return _load_suite(spec)
    except RecursionError:  # nested too deeply for a step no loader names (validating, hashing)
        raise SuiteError("nested too deeply to read (more levels than Python's recursion limit)", source=spec) from None
    except MemoryError:
        raise SuiteError("too large to load into memory", source=spec) from None


def _load_suite(spec: str) -> Suite:
    fmt, colon, rest = spec.partition(":")
    if colon and fmt.lower() in FORMATS:
        return load_format(fmt.lower(), rest)
    builtins = _builtin_files()
    if spec in builtins:
        return load_builtin(spec)
    path = Path(spec).expanduser()
    if path.is_file():
        return load_suite_file(path)
    raise SuiteError(
        f"no such suite: not a file, not a built-in ({', '.join(builtins) or 'none'}), and not "
        f"FORMAT:PATH with a format among {', '.join(FORMATS)}",
        source=spec,
    )


def load_builtin(name: str) -> Suite:
    """A suite shipped with Stiva, by name (`basic`, `offline`, ...)."""
    files = _builtin_files()
    if name not in files:
        raise SuiteError(f"no built-in suite {name!r}; there are: {', '.join(files)}", source=name)
    return parse_suite(files[name].read_text(encoding="utf-8"), name=name, source=f"built-in {name}")


def list_builtins() -> list[BuiltinInfo]:
    """Every built-in suite with its size and description (the file's `{"_suite": ...}` line, or,
    when it has none, a summary of its graders)."""
    infos = []
    for name in _builtin_files():
        suite = load_builtin(name)
        graders = sorted({item.grader for item in suite.items})
        description = suite.description or f"{len(suite)} questions graded by {', '.join(graders)}"
        infos.append(BuiltinInfo(name, len(suite), description))
    return infos


def _builtin_files() -> dict[str, Traversable]:
    """Every `*.jsonl` in the package's data folder, by stem, sorted: a new file is a new built-in."""
    folder = _data_dir()
    found = {
        entry.name[: -len(".jsonl")]: entry
        for entry in folder.iterdir()
        if entry.name.endswith(".jsonl") and entry.is_file()
    }
    return dict(sorted(found.items()))


def _data_dir() -> Traversable:
    return resources.files("stiva_tui.evals").joinpath("data")


# --- reading records -----------------------------------------------------------------------------


def _file_records(path: Path, spec: str) -> Iterator[tuple[int, int | None, Record]]:
    """(record number, JSONL line or None, record) for every record in a local file."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl_records(path, spec)
    if suffix == ".json":
        return _numbered(_json_records(path, spec))
    if suffix == ".csv":
        return _numbered(_csv_records(path, spec))
    if suffix == ".parquet":
        return _numbered(_parquet_records(path, spec))
    raise SuiteError("unsupported file type: use .jsonl, .json, .csv or .parquet", source=spec)


def _jsonl_records(path: Path, spec: str) -> Iterator[tuple[int, int | None, Record]]:
    """Line by line, each line read up to `MAX_RECORD_CHARS` (a longer one is refused unread)."""
    number = line = 0
    with path.open(encoding="utf-8") as handle:
        while True:
            try:
                raw = handle.readline(MAX_RECORD_CHARS + 1)
            except UnicodeDecodeError:
                raise SuiteError("not UTF-8 text", source=spec, line=line + 1) from None
            if not raw:
                return
            line += 1
            if len(raw) > MAX_RECORD_CHARS:
                raise SuiteError(f"a line longer than {MAX_RECORD_CHARS // 2**20} MB", source=spec, line=line)
            if not raw.strip():
                continue
            try:
                record = json_loads(raw)
            except json.JSONDecodeError as error:
                raise SuiteError(f"not valid JSON: {error.msg}", source=spec, line=line) from None
            except RecursionError:
                raise SuiteError(TOO_DEEP, source=spec, line=line) from None
            if not isinstance(record, dict):
                raise SuiteError("each line must be a JSON object", source=spec, line=line)
            number += 1
            yield number, line, record


TOO_DEEP = "JSON nested too deeply (more levels than the parser's recursion limit)"


def _read_whole(path: Path, spec: str) -> str:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise SuiteError(f"larger than {MAX_FILE_BYTES // 2**30} GB: give it as JSONL, read line by line", source=spec)
    try:
        return reading.read_text(path, MAX_FILE_BYTES)  # a file that grew since: cut off at the cap
    except reading.ReadError as error:
        raise SuiteError(error.message, source=spec) from None
    except UnicodeDecodeError:
        raise SuiteError("not UTF-8 text", source=spec) from None


def _json_records(path: Path, spec: str) -> list[Record]:
    try:
        data = json_loads(_read_whole(path, spec))
    except json.JSONDecodeError as error:
        raise SuiteError(f"not valid JSON: {error.msg} (line {error.lineno})", source=spec) from None
    except RecursionError:
        raise SuiteError(TOO_DEEP, source=spec) from None
    if isinstance(data, dict):
        lists = [data[key] for key in ("data", "rows", "train", "test", "examples") if isinstance(data.get(key), list)]
        data = lists[0] if lists else None
    if not isinstance(data, list) or not all(isinstance(record, dict) for record in data):
        raise SuiteError(
            "expected a list of records (objects), or an object with one under "
            '"data", "rows", "train", "test" or "examples"',
            source=spec,
        )
    return data


def _parquet_records(path: Path, spec: str) -> list[Record]:
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise SuiteError(
            "reading Parquet needs pyarrow: pip install pyarrow (or convert the file to JSONL or CSV)", source=spec
        ) from None
    import pyarrow

    try:
        handle = parquet.ParquetFile(path)
        metadata = handle.metadata
        size = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
        if size > MAX_FILE_BYTES:  # told by the footer: nothing of it is read yet
            raise SuiteError(
                f"its data take {size / 2**30:.1f} GB once read, more than the "
                f"{MAX_FILE_BYTES // 2**30} GB a suite may",
                source=spec,
            )
        return handle.read().to_pylist()
    except (pyarrow.ArrowException, OSError, ValueError, MemoryError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise SuiteError(f"not a readable Parquet file ({reason})", source=spec) from None


def _csv_records(path: Path, spec: str) -> list[Record]:
    """Every row; a field over the csv module's limit (128 KiB), a line over `MAX_RECORD_CHARS` or
    a file over `MAX_FILE_BYTES` is an error, never read whole."""
    try:
        opened = reading.open_text(path, MAX_FILE_BYTES, "utf-8-sig", decompress=False, newline="")
    except reading.ReadError as error:
        raise SuiteError(error.message, source=spec) from None
    with opened as handle:
        reader = csv.DictReader(line for _, line in reading.bounded_lines(handle, MAX_RECORD_CHARS))
        try:
            return list(reader)
        except reading.ReadError as error:
            raise SuiteError(error.message, source=spec, line=error.line) from None
        except csv.Error as error:
            message = str(error)
            if "field larger than field limit" in message:
                message = f"a field longer than {csv.field_size_limit():,} characters"
            raise SuiteError(f"not a usable CSV file: {message}", source=spec, line=reader.line_num + 1) from None
        except UnicodeDecodeError:
            raise SuiteError("not UTF-8 text", source=spec, line=reader.line_num + 1) from None


def _numbered(records: list[Record]) -> Iterator[tuple[int, int | None, Record]]:
    for number, record in enumerate(records, 1):
        yield number, None, record


def _looks_like_path(target: str) -> bool:
    """A target meant as a local file (so a typo is "no such file", not a hub download)."""
    return (
        target.startswith(("/", ".", "~"))
        or "\\" in target
        or Path(target).suffix.lower() in (".jsonl", ".ndjson", ".json", ".csv", ".parquet")
    )


def _hub_target(target: str, default_split: str) -> tuple[str, str | None, str]:
    """`DATASET[:CONFIG][@SPLIT]` split into its parts."""
    rest, _, split = target.partition("@")
    dataset, _, config = rest.partition(":")
    return dataset, config or None, split or default_split


def _hub_records(dataset: str, config: str | None, split: str, spec: str) -> Iterator[tuple[int, int | None, Record]]:
    try:
        import datasets
    except ImportError:
        raise SuiteError(
            "not a file; loading a Hugging Face dataset needs the `datasets` package "
            "(pip install datasets), or download the file and give its path",
            source=spec,
        ) from None
    try:
        loaded = datasets.load_dataset(dataset, config, split=split)
    except Exception as error:  # network, auth, unknown dataset: all end the same way for the user
        raise SuiteError(f"cannot load the dataset: {type(error).__name__}: {error}", source=spec) from None
    # the split is an Arrow table mapped from datasets' cache; its size is known before any of it
    # becomes Python records
    size = getattr(getattr(loaded, "data", None), "nbytes", 0)
    if isinstance(size, int) and size > MAX_FILE_BYTES:
        raise SuiteError(
            f"its data take {size:,} bytes once read, more than the {reading.size_words(MAX_FILE_BYTES)} a suite may",
            source=spec,
        )
    return _numbered([dict(record) for record in loaded])


# --- the formats ---------------------------------------------------------------------------------


class _MissingColumn(Exception):
    pass


def _column(record: Record, *names: str) -> Any:
    """The first of `names` the record has (not None), or `_MissingColumn` naming what it has."""
    for name in names:
        if record.get(name) is not None:
            return record[name]
    raise _MissingColumn(f"no column {' / '.join(names)} (the record has: {', '.join(sorted(record))})")


def _optional(record: Record, *names: str) -> Any:
    try:
        return _column(record, *names)
    except _MissingColumn:
        return None


def _text(value: Any) -> str:
    return str(value).strip()


def _aime(record: Record, number: int) -> Record:
    ident = _optional(record, "id", "ID", "problem_idx", "idx")
    return {
        "id": _text(ident) if ident is not None else f"aime-{number}",
        "question": _text(_column(record, "problem", "Problem", "question")),
        "answer": _text(_column(record, "answer", "Answer")),
        "grader": "numeric",
    }


def _math500(record: Record, number: int) -> Record:
    meta = {key: record[key] for key in ("subject", "level") if isinstance(record.get(key), str | int)}
    return {
        "id": _text(_optional(record, "unique_id") or f"math500-{number}"),
        "question": _text(_column(record, "problem")),
        "answer": _text(_column(record, "answer")),
        "grader": "math",
        "meta": meta,
    }


def _gpqa(record: Record, number: int) -> Record:
    correct = _text(_column(record, "Correct Answer"))
    wrong = [_text(_column(record, f"Incorrect Answer {i}")) for i in (1, 2, 3)]
    domain = _optional(record, "High-level domain")
    return {
        "id": _text(_optional(record, "Record ID") or f"gpqa-{number}"),
        "question": _text(_column(record, "Question")),
        "choices": [correct, *wrong],
        "answer": correct,
        "shuffle": True,
        "grader": "choice",
        "meta": {"domain": _text(domain)} if domain is not None else {},
    }


def _livecodebench(record: Record, number: int) -> Record:
    ident = _text(_column(record, "question_id"))
    cases = _json_list(_column(record, "public_test_cases"), "public_test_cases")
    private, note = _private_cases(record.get("private_test_cases"))
    cases += private
    metadata = _json_object(record.get("metadata"))
    fn_name = metadata.get("func_name")
    stdio = [
        {"input": str(c.get("input", "")), "output": str(c.get("output", ""))}
        for c in cases
        if c.get("testtype", "stdin") == "stdin"
    ]
    calls = [c for c in cases if c.get("testtype") == "functional"]
    tests: dict[str, Any] = {"stdin_stdout": stdio}
    if calls:
        if not isinstance(fn_name, str) or not fn_name:
            raise _MissingColumn("functional test cases but no metadata.func_name")
        tests["functional"] = {"fn_name": fn_name, "cases": [_functional_case(c) for c in calls]}
    if note:
        tests["note"] = note
    question = _text(_column(record, "question_content"))
    starter = _text(record.get("starter_code") or "")
    if starter:
        question += f"\n\nComplete this starter code:\n```python\n{starter}\n```"
    if stdio and not calls:
        question += "\n\nRead the input from standard input and write the answer to standard output."
    meta = {
        key: _text(record[key]) for key in ("platform", "difficulty", "contest_date") if record.get(key) is not None
    }
    return {"id": ident, "question": question, "grader": "code", "tests": tests, "meta": meta}


def _functional_case(case: Record) -> Record:
    """LiveCodeBench keeps one JSON value per line of `input` (one per argument), and the return
    value as JSON in `output`."""
    try:
        arguments = [json_loads(line) for line in str(case.get("input", "")).split("\n") if line.strip()]
        return {"input": arguments, "output": json_loads(str(case.get("output", "null")))}
    except json.JSONDecodeError as error:
        raise _MissingColumn(f"a functional test case is not JSON: {error.msg}") from None


def _json_list(value: Any, column: str) -> list[Record]:
    if isinstance(value, str):
        try:
            value = json_loads(value) if value.strip() else []
        except json.JSONDecodeError as error:
            raise _MissingColumn(f"{column} is not JSON: {error.msg}") from None
    if not isinstance(value, list) or not all(isinstance(case, dict) for case in value):
        raise _MissingColumn(f"{column} is not a list of test cases")
    return value


def _json_object(value: Any) -> Record:
    if isinstance(value, dict):
        return value
    try:
        loaded = json_loads(value) if isinstance(value, str) and value.strip() else {}
    except json.JSONDecodeError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


PRIVATE_CASES_LIMIT = 64 * 1024 * 1024
"""Bytes an item's private cases may take once decompressed; past it they are skipped, with a note."""


def _private_cases(raw: Any) -> tuple[list[Record], str | None]:
    """LiveCodeBench's private cases, decoded without unpickling: plain JSON; base64(zlib(JSON));
    or base64(zlib(a pickle that holds one string of JSON)). Anything else: no cases and a note."""
    if raw is None or raw == "" or raw == []:
        return [], None
    if isinstance(raw, list):
        return _valid_cases(raw)
    text = str(raw).strip()
    if text.startswith("["):
        try:
            return _valid_cases(json_loads(text))
        except json.JSONDecodeError:
            return [], "private test cases skipped: not valid JSON"
    try:
        inflater = zlib.decompressobj()
        blob = inflater.decompress(base64.b64decode(text, validate=True), PRIVATE_CASES_LIMIT + 1)
    except (binascii.Error, ValueError, zlib.error):
        return [], "private test cases skipped: neither JSON nor base64+zlib"
    if len(blob) > PRIVATE_CASES_LIMIT or inflater.unconsumed_tail:
        return [], (
            f"private test cases skipped: more than {PRIVATE_CASES_LIMIT // 2**20} MB once "
            "decompressed (a zip bomb, or cases too large to grade)"
        )
    if blob.lstrip().startswith(b"["):
        payload: str | None = blob.decode("utf-8", errors="replace")
    else:
        payload = _pickled_string(blob)
    if payload is None:
        return [], "private test cases skipped: a pickle holding more than a string is never unpickled"
    try:
        return _valid_cases(json_loads(payload))
    except json.JSONDecodeError:
        return [], "private test cases skipped: the decoded text is not JSON"


def _valid_cases(value: Any) -> tuple[list[Record], str | None]:
    if isinstance(value, list) and all(isinstance(case, dict) for case in value):
        return value, None
    return [], "private test cases skipped: not a list of test cases"


_STRING_PICKLE_OPS = {"PROTO", "FRAME", "MEMOIZE", "STOP"}
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"}


def _pickled_string(blob: bytes) -> str | None:
    """The string a pickle of exactly one str holds, read from its opcodes without executing them
    (`pickletools.genops` only decodes opcodes and their arguments); None for any other pickle."""
    found: list[str] = []
    try:
        for opcode, argument, _ in pickletools.genops(blob):
            if opcode.name in _STRING_OPS and isinstance(argument, str):
                found.append(argument)
            elif opcode.name not in _STRING_PICKLE_OPS:
                return None
    except (ValueError, EOFError, UnicodeDecodeError):
        return None
    return found[0] if len(found) == 1 else None


@dataclass(frozen=True, slots=True)
class _Format:
    info: FormatInfo
    convert: Callable[[Record, int], Record]


FORMATS: dict[str, _Format] = {
    "aime": _Format(FormatInfo("aime", "numeric", "AIME problems (integer answers 0-999)", "train"), _aime),
    "math500": _Format(
        FormatInfo("math500", "math", "MATH-500 competition maths, checked with math-verify", "test"), _math500
    ),
    "gpqa": _Format(
        FormatInfo("gpqa", "choice", "GPQA(-Diamond) graduate science, four shuffled options", "train"), _gpqa
    ),
    "livecodebench": _Format(
        FormatInfo("livecodebench", "code", "LiveCodeBench code generation, run against its test cases", "test"),
        _livecodebench,
    ),
}
