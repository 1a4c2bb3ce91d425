"""MMLU-Redux's recorded letters as `records` (issue 57, part 4): benchmarks/mmlu_redux_records.py on a
small git repository laid out as github.com/aryopg/mmlu-redux is, and the committed conversion
(benchmarks/data/mmlu_redux.records.jsonl.gz), read back through the real `stiva bench import`."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.mmlu_redux_records import SHARED, MmluReduxError, convert, question_text, slice_of
from tests.support.cli import run_stiva

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
CONVERTED = DATA / "mmlu_redux.records.jsonl.gz"
SLICE = ROOT / "tests" / "data" / "mmlu_redux_slice.records.jsonl.gz"
PRICES = DATA / "mmlu_redux_prices.toml"
NOTICE = DATA / "mmlu_redux.NOTICE.md"
COLUMNS = ["question", "choices", "groundtruth_answer", "error_type", *SHARED, "writer_palmyra-x-004", "extra"]


def _read_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _repo(tmp_path: Path, subjects: dict[str, list[dict]], columns: list[str] = COLUMNS) -> tuple[Path, str]:
    repo = tmp_path / "mmlu-redux"
    folder = repo / "outputs" / "multi_expert_helm"
    folder.mkdir(parents=True)
    for subject, rows in subjects.items():
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
        (folder / f"{subject}.csv").write_text(out.getvalue(), encoding="utf-8")
    (folder / "all.csv").write_text("question\nnot read\n")
    (folder / "summary_EM_per_error.csv").write_text("subject,em\n")  # not a subject's file
    (folder / "plot.png").write_bytes(b"\x89PNG")

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
        return done.stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "outputs")
    return repo, git("rev-parse", "HEAD")


def _row(question: str, truth: int, error: str = "ok", said: str = "B", **answers: str) -> dict:
    row = {"question": question, "choices": repr(["one", "two", "three", "four"]), "groundtruth_answer": str(truth),
           "error_type": error, "writer_palmyra-x-004": "A", "extra": ""}  # fmt: skip
    row.update({column: said for column in SHARED})
    row.update(answers)
    return row


def test_the_converter_keeps_ok_items_and_the_pools_models_under_the_pools_names(tmp_path):
    odd = "Which one?\x85 (a question with a next-line character, as MMLU has)"
    repo, commit = _repo(
        tmp_path,
        {
            "anatomy": [_row(odd, 1), _row("Dropped: its reference is doubtful", 0, error="wrong_groundtruth")],
            "virology": [
                _row(
                    "Second?",
                    3,
                    said="D",
                    **{"openai_gpt-4o-2024-05-13": " B", "meta_llama-3.1-70b-instruct-turbo": ""},
                )
            ],  # fmt: skip
        },
    )
    records, summary = convert(repo, commit)
    assert summary["read"] == 3 and summary["items"] == 2 and summary["dropped"] == {"wrong_groundtruth": 1}
    assert summary["left_out"] == ["writer_palmyra-x-004"]
    assert len(records) == 2 * len(SHARED)
    assert {r["model"] for r in records} == set(SHARED.values())
    first = next(r for r in records if r["id"] == "mmlu-redux/anatomy/0" and r["model"] == "gpt-4o-2024-05-13")
    assert first["question"] == question_text(odd, ["one", "two", "three", "four"])
    assert first["question"].endswith("\n\nA. one\nB. two\nC. three\nD. four")
    assert (first["answer"], first["response"], first["correct"]) == ("B", "B", True)
    second = {r["model"]: r for r in records if r["id"] == "mmlu-redux/virology/0"}
    assert second["gpt-4o-2024-05-13"]["response"] == " B" and not second["gpt-4o-2024-05-13"]["correct"]
    assert (
        second["Meta-Llama-3.1-70B-Instruct"]["response"] == "" and not second["Meta-Llama-3.1-70B-Instruct"]["correct"]
    )
    assert second["claude-3-5-sonnet-20240620"]["correct"]  # "D" is the reference 3
    assert summary["unreadable"]["Meta-Llama-3.1-70B-Instruct"] == 1
    assert all(r["completion_tokens"] == 1 and r["prompt_tokens"] > 10 for r in records)
    again, _ = convert(repo, commit)
    assert again == records


def test_a_file_without_a_pool_models_column_is_a_clear_error(tmp_path):
    columns = [c for c in COLUMNS if c != "qwen_qwen2-72b-instruct"]
    row = {k: v for k, v in _row("Q?", 0).items() if k in columns}
    repo, commit = _repo(tmp_path, {"anatomy": [row]}, columns)
    with pytest.raises(MmluReduxError, match="anatomy.csv lacks the columns qwen_qwen2-72b-instruct"):
        convert(repo, commit)


def test_the_committed_conversion_matches_its_notice_and_its_prices():
    records = _read_gz(CONVERTED)
    items = {r["id"] for r in records}
    assert len(items) == 5330 and len(records) == 5330 * len(SHARED)
    assert all(re.fullmatch(r"[ABCD]", r["answer"]) for r in records)
    right, total = Counter(), Counter()
    for r in records:
        total[r["model"]] += 1
        right[r["model"]] += r["correct"]
        assert r["correct"] == (r["response"].strip() == r["answer"])
    notice = NOTICE.read_text()
    for model in SHARED.values():
        assert f"| `{model}` |" in notice and f"| {100 * right[model] / total[model]:.2f} |" in notice, model
    prices = {p["name"]: p for p in tomllib.loads(PRICES.read_text())["models"]}
    assert set(prices) == set(SHARED.values())
    assert all(p["input_per_mtok"] > 0 and p["source"] for p in prices.values())
    converted = {(r["id"], r["model"]): r for r in records}
    sliced = _read_gz(SLICE)
    assert sliced == slice_of(records)  # the tests' slice is a part of the conversion, unchanged
    assert all(converted[(r["id"], r["model"])] == r for r in sliced)


def test_stiva_bench_import_reads_every_item_of_the_slice_as_multiple_choice(tmp_path):
    done = run_stiva("bench", "import", str(SLICE), "--name", "mmlu-slice", "--prices", str(PRICES), "--json",
                     home=tmp_path / "home")  # fmt: skip
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    assert imported["kinds"] == {"choice": 40}, imported
    assert sorted(imported["models"]) == sorted(SHARED.values())
