"""`stiva bench import`: recorded answers of real models, made into a suite and a bench.

    summary = import_recorded(store, rows, name="zeroeval", source="zeroeval: result_dirs/", prices=...)

- **The suite** (`<data dir>/imports/NAME.jsonl`): one `recorded` item per question, holding every
  model's recorded answer's score (evals/suite.py), with `meta.split` and `meta.domain`. It is what
  `stiva bench` and `stiva train` take (its path), `--split` included.
- **The bench:** each model as `direct:MODEL`, every (item, model) graded by its recorded score,
  finished; its id works as `--pool replay:ID`, whose answers are these recordings.
- **Cost:** the recorded `cost_usd` where a record has one; else its tokens times the model's price
  (`--prices FILE.toml`, or the config's `[[models]]` of that name); else none, and the summary
  says so (`cost: "none"`): reports then compare tokens only. Tokens not recorded are estimated
  from the text (about four characters a token) and counted as estimated.

Nothing is half-imported: the rows are all checked first (evals/recorded), the suite is written
to a new file and renamed into place, and the bench is one transaction; a fault on the bench
removes the suite file again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core import toml_bounds
from ..core.files import scratch_beside
from ..core.reading import ReadError, read_text
from ..evals.recorded import RecordsError
from ..evals.recorded.records import RecordedRow
from ..evals.suite import answer_key, parse_suite, recorded_answer_line
from ..store.benches import IMPORTED
from ..store.records import BenchItemRecord

__all__ = ["ImportSummary", "Price", "import_recorded", "read_prices", "rows_of"]

FORMATS = ("records", "routerbench", "zeroeval")
DESCRIPTION = "recorded answers: "  # how an imported suite's description starts; the source follows
PRICES_LIMIT = 1024 * 1024  # bytes of a --prices file (a price is one line)


def source_of(description: str) -> str:
    """Where an imported suite's answers came from ("zeroeval result_dirs"), from its description."""
    return description.removeprefix(DESCRIPTION).rsplit("; ", 1)[0] if description.startswith(DESCRIPTION) else ""


@dataclass(frozen=True)
class Price:
    """USD per million tokens, in and out."""

    price_in: float
    price_out: float


@dataclass
class ImportSummary:
    bench: str
    suite: str
    name: str
    source: str
    models: list[str]
    items: int
    records: int
    splits: dict[str, int]
    cost: str  # "recorded", "priced", "mixed" or "none"
    tokens_estimated: int = 0
    unpriced: list[str] = field(default_factory=list)  # models with neither recorded cost nor a price
    # Where NAME.jsonl already held other records: what was done instead, in words ("" otherwise)
    note: str = ""
    # How many items got each answer kind (core/answers.py): inferred, or --kind
    kinds: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {
            "bench": self.bench,
            "suite": self.suite,
            "name": self.name,
            "source": self.source,
            "models": self.models,
            "items": self.items,
            "records": self.records,
            "splits": self.splits,
            "cost": self.cost,
            "note": self.note,
            "tokens_estimated": self.tokens_estimated,
            "unpriced": self.unpriced,
            "kinds": self.kinds,
        }


def detect_format(path: Path) -> str:
    """The format a path is in when `--format` is not given: a folder is ZeroEval's result_dirs,
    a .csv (or .csv.gz) RouterBench's, anything else `records`."""
    if path.is_dir():
        return "zeroeval"
    name = path.name.lower()
    return "routerbench" if name.endswith((".csv", ".csv.gz")) else "records"


def rows_of(path: Path, fmt: str, models: Sequence[str] | None = None) -> list[RecordedRow]:
    """The checked rows of one file or folder in one of `FORMATS` (RecordsError otherwise)."""
    if fmt not in FORMATS:
        raise RecordsError(f"unknown format {fmt!r}: use {', '.join(FORMATS)}", source=str(path))
    if not path.exists():
        raise RecordsError("no such file or folder", source=str(path))
    if fmt == "zeroeval":
        from ..evals.recorded.records import check_rows
        from ..evals.recorded.zeroeval import read_zeroeval

        if not path.is_dir():
            raise RecordsError("--format zeroeval reads a folder of ZeroEval's result_dirs", source=str(path))
        from ..evals.recorded.records import MAX_FILE_BYTES

        rows = check_rows(enumerate(read_zeroeval(path, models, MAX_FILE_BYTES), start=1), str(path))
    elif path.is_dir():
        raise RecordsError(f"--format {fmt} reads a file, not a folder", source=str(path))
    elif fmt == "routerbench":
        from ..evals.recorded.routerbench import read_routerbench

        rows = read_routerbench(path)
    else:
        from ..evals.recorded.records import read_records

        rows = read_records(path)
    if models:
        wanted = set(models)
        missing = sorted(wanted - {row.model for row in rows})
        if missing:
            raise RecordsError(f"--models: no records of {', '.join(missing)}", source=str(path))
        rows = [row for row in rows if row.model in wanted]
    return rows


def read_prices(path: Path) -> dict[str, Price]:
    """`--prices FILE.toml`: `[[models]]` tables of `name` (or `id`) with `price_in` and
    `price_out` (or `input_per_mtok` and `output_per_mtok`), USD per million tokens."""
    source = str(path)
    try:
        data = toml_bounds.loads(read_text(path, PRICES_LIMIT))
    except ReadError as exc:
        raise RecordsError(exc.message, source=source) from None
    except toml_bounds.TomlShapeError as exc:
        raise RecordsError(exc.message, source=source, line=exc.line) from None
    except OSError as exc:
        raise RecordsError(f"cannot read: {exc.strerror or exc}", source=source) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecordsError(f"not TOML: {exc}", source=source) from None
    tables = data.get("models")
    if not isinstance(tables, list) or not tables:
        raise RecordsError("no [[models]] tables (name, price_in, price_out per million tokens)", source=source)
    prices: dict[str, Price] = {}
    for number, table in enumerate(tables, start=1):
        where = f"[[models]] number {number}"
        name = table.get("name", table.get("id"))
        if not isinstance(name, str) or not name.strip():
            raise RecordsError(f"{where} has no name", source=source)
        numbers = []
        for keys in (("price_in", "input_per_mtok"), ("price_out", "output_per_mtok")):
            value = next((table[k] for k in keys if k in table), None)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e6:
                raise RecordsError(f"{where} ({name}): {keys[0]} is a number of USD per million tokens", source=source)
            numbers.append(float(value))
        prices[name.strip()] = Price(*numbers)
    return prices


def config_prices(config) -> dict[str, Price]:
    """The config's `[[models]]` prices, by both the pool id and the provider's model name."""
    prices: dict[str, Price] = {}
    for model in getattr(config, "models", []):
        if model.price_in or model.price_out:
            price = Price(model.price_in, model.price_out)
            prices.setdefault(model.model, price)
            prices.setdefault(model.id, price)
    return prices


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def import_recorded(
    store,
    rows: Sequence[RecordedRow],
    *,
    name: str,
    source: str,
    prices: Mapping[str, Price],
    folder: Path,
    kind: str | None = None,
) -> ImportSummary:
    """Write the suite into `folder` and the bench into `store` (see the module's docstring). Each
    item's answer kind (how votes and gates read its answers) is `kind`, or else inferred from its
    reference and question (core/answers.py's `infer_kind`; `auto` where it has no reference)."""
    from ..core.answers import ANSWER_KINDS, infer_kind

    if kind is not None and kind not in ANSWER_KINDS:
        raise RecordsError(f"--kind {kind!r}: one of {', '.join(ANSWER_KINDS)}")
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise RecordsError(f"--name {name!r}: letters, digits, '-', '_' and '.' only")
    models = list(dict.fromkeys(row.model for row in rows))
    by_item: dict[str, list[RecordedRow]] = {}
    for row in rows:
        by_item.setdefault(row.id, []).append(row)
    lines = [json.dumps({"_suite": f"{DESCRIPTION}{source}; {len(models)} models"})]
    for item_id, answers in by_item.items():
        first = answers[0]
        scores: dict[str, list[float]] = {}
        for row in answers:
            scores.setdefault(answer_key(row.response), []).append(row.score)
        item_kind = kind or (infer_kind(first.answer, first.question) if first.answer else "auto")
        meta = {
            "split": first.split or None,
            "domain": first.domain or None,
            "source": "recorded",
            "kind": item_kind,
        }
        item = {
            "id": item_id,
            "question": first.question,
            "grader": "recorded",
            "recorded": {key: sum(values) / len(values) for key, values in scores.items()},
            "meta": {k: v for k, v in meta.items() if v is not None},
        }
        if first.answer:
            item["answer"] = first.answer
        lines.append(json.dumps(item, ensure_ascii=False))
    text = "\n".join(lines) + "\n"
    path, note = folder / f"{name}.jsonl", ""
    if path.exists() and path.read_bytes() != text.encode("utf-8"):
        # other records under this name: the earlier import's bench replays on that file, so it
        # stays as it is, and these go beside it, named by their content
        kept = path.name
        path = folder / f"{name}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}.jsonl"
        note = f"{kept} already holds an earlier import (its bench replays on it): these records are {path.name}"
    try:
        suite = parse_suite(text, name=name, source=str(path))
    except ValueError as exc:  # SuiteError: an item the suite format refuses (a blank question...)
        raise RecordsError(f"cannot make a suite of these records: {exc}", source=source) from None

    records, estimated, kinds, unpriced = [], 0, set(), set()
    for row in rows:
        prompt = row.prompt_tokens if row.prompt_tokens is not None else _tokens(row.question)
        completion = row.completion_tokens if row.completion_tokens is not None else _tokens(row.response)
        estimated += (row.prompt_tokens is None) + (row.completion_tokens is None)
        price = prices.get(row.model)
        if row.cost_usd is not None:
            cost, kind = row.cost_usd, "recorded"
        elif price is not None:
            cost, kind = (prompt * price.price_in + completion * price.price_out) / 1e6, "priced"
        else:
            cost, kind = 0.0, "none"
            unpriced.add(row.model)
        kinds.add(kind)
        records.append(
            BenchItemRecord(
                system=f"direct:{row.model}",
                item_id=row.id,
                status="graded",
                correct=row.correct,
                answer=row.response,
                extracted=recorded_answer_line(row.response),  # the score is the verdict, not an answer
                error=None if row.correct else f"recorded score {row.score:g}",
                prompt_tokens=prompt,
                completion_tokens=completion,
                cost_usd=cost,
                latency_s=row.latency_s or 0.0,
            )
        )
    systems = [f"direct:{model}" for model in models]
    bench_id = hashlib.sha256(f"{IMPORTED}\n{suite.content_hash}\n{','.join(systems)}".encode()).hexdigest()[:12]
    # the cost kind changes no answer, but a re-import with prices must replace the bench's cost
    cost_kind = kinds.pop() if len(kinds) == 1 else "mixed"

    folder.mkdir(parents=True, exist_ok=True)
    scratch = scratch_beside(path, text.encode("utf-8"))
    try:
        store.import_bench(
            bench_id,
            suite=str(path),
            suite_hash=suite.content_hash,
            systems=systems,
            items=len(by_item),
            records=records,
        )
        os.replace(scratch, path)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
    splits: dict[str, int] = {}
    kinds: dict[str, int] = {}
    for item in suite.items:
        split = str(item.meta.get("split") or "none")
        splits[split] = splits.get(split, 0) + 1
        kinds[str(item.meta["kind"])] = kinds.get(str(item.meta["kind"]), 0) + 1
    return ImportSummary(
        bench=bench_id,
        suite=str(path),
        name=name,
        source=source,
        models=models,
        items=len(by_item),
        records=len(records),
        splits=dict(sorted(splits.items())),
        cost=cost_kind,
        tokens_estimated=estimated,
        unpriced=sorted(unpriced),
        note=note,
        kinds=dict(sorted(kinds.items(), key=lambda pair: (-pair[1], pair[0]))),
    )
