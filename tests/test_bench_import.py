"""`stiva bench import`: recorded answers of real models as a suite and a bench, replayed and
graded by their recorded score; every bad input one line with its line number, nothing half-imported."""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

import pytest

from stiva_tui.cli.main import main
from stiva_tui.evals.recorded.records import split_for

QUESTIONS = {
    "q1": "What is 2+2?",
    "q2": "Name the capital of France.",
    "q3": "What is 10*3?",
    "q4": "Spell cat backwards.",
    "q5": "What is 7*6?",
    "q6": "Name a primary colour.",
}


def records(tmp_path: Path, rows=None, name="rec.jsonl") -> Path:
    if rows is None:
        rows = []
        for index, (qid, question) in enumerate(QUESTIONS.items()):
            rows.append({"id": qid, "question": question, "model": "big", "response": f"big on {qid}", "correct": True})
            rows.append(
                {
                    "id": qid,
                    "question": question,
                    "model": "small",
                    "response": f"small on {qid}",
                    "correct": index % 2 == 0,
                    "cost_usd": 0.0001,
                    "prompt_tokens": 10,
                    "completion_tokens": 5,
                }
            )
    path = tmp_path / name
    text = "\n".join(json.dumps(r) for r in rows) + "\n"
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def imported(capsys, *args: str) -> dict:
    code, out, err = run(capsys, "bench", "import", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def nothing_imported() -> None:
    folder = Path(os.environ["STIVA_HOME"]) / "data" / "imports"
    assert not folder.exists() or not any(folder.iterdir()), list(folder.iterdir())
    db = Path(os.environ["STIVA_HOME"]) / "data" / "stiva.db"
    if db.exists():
        import sqlite3

        assert sqlite3.connect(db).execute("SELECT count(*) FROM bench_runs").fetchone()[0] == 0


def test_import_prints_the_suite_and_a_bench_that_replays_graded_by_the_recorded_score(tmp_path, capsys):
    summary = imported(capsys, str(records(tmp_path, name="rec.jsonl.gz")))
    assert summary["models"] == ["big", "small"]
    assert summary["items"] == 6 and summary["records"] == 12
    assert summary["splits"] == {
        s: sum(split_for(q, 0.5) == s for q in QUESTIONS)
        for s in ("heldout", "train")
        if any(split_for(q, 0.5) == s for q in QUESTIONS)
    }
    assert Path(summary["suite"]).is_file()
    code, out, err = run(
        capsys,
        "bench",
        summary["suite"],
        "--pool",
        f"replay:{summary['bench']}",
        "--systems",
        "direct:*,oracle",
        "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    accuracy = {row["system"]: row["accuracy"] for row in report["systems"]}
    assert accuracy == {"direct:replay:big": 1.0, "direct:replay:small": 0.5, "oracle": 1.0}
    assert "recorded pool" in json.dumps(report) and "records rec.jsonl.gz" in json.dumps(report)


def test_a_recorded_judgement_is_not_graded_again(tmp_path, capsys):
    """The answer is the reference word for word, but its record says wrong: the recorded
    judgement is the truth of a recorded pool (a re-grade would say right)."""
    rows = [
        {"id": "a", "question": "What is 2+2?", "answer": "4", "model": "m", "response": "4", "correct": False},
        {"id": "b", "question": "What is 3+3?", "answer": "6", "model": "m", "response": "seven", "correct": 0.75},
    ]
    summary = imported(capsys, str(records(tmp_path, rows)))
    code, out, err = run(
        capsys, "bench", summary["suite"], "--pool", f"replay:{summary['bench']}", "--systems", "direct:*", "--json"
    )
    assert code == 0, err
    (row,) = json.loads(out)["systems"]
    assert row["accuracy"] == 0.5 and row["n"] == 2


def test_routerbench_wide_csv_keeps_recorded_cost(tmp_path, capsys):
    path = tmp_path / "rb.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["sample_id", "prompt", "eval_name", "gpt-4", "gpt-4|model_response", "gpt-4|total_cost",
             "llama", "llama|model_response", "llama|total_cost", "oracle_model_to_route_to"]
        )  # fmt: skip
        writer.writerow(["mmlu.1", "Q one, with a comma", "mmlu", "1.0", "A", "0.003", "0.0", "B", "0.0001", "gpt-4"])
        writer.writerow(["gsm.2", "Q two\nwith a newline", "gsm", "1", "42", "0.002", "1", "42", "0.0002", "llama"])
    summary = imported(capsys, str(path), "--holdout", "0")
    assert summary["models"] == ["gpt-4", "llama"] and summary["items"] == 2
    assert summary["cost"] == "recorded" and summary["splits"] == {"train": 2}
    code, out, err = run(
        capsys, "bench", summary["suite"], "--pool", f"replay:{summary['bench']}", "--systems", "direct:*", "--json"
    )
    assert code == 0, err
    rows = {row["system"]: row for row in json.loads(out)["systems"]}
    assert rows["direct:replay:gpt-4"]["accuracy"] == 1.0 and rows["direct:replay:llama"]["accuracy"] == 0.5


def test_prices_turn_tokens_into_cost_and_no_cost_is_said(tmp_path, capsys):
    rows = [
        {"id": "a", "question": "Q?", "model": "m", "response": "x", "correct": True, "prompt_tokens": 1000,
         "completion_tokens": 2000},
    ]  # fmt: skip
    path = records(tmp_path, rows)
    code, out, _ = run(capsys, "bench", "import", str(path))
    assert code == 0 and "none recorded and no prices given" in out
    prices = tmp_path / "prices.toml"
    prices.write_text('[[models]]\nname = "m"\nprice_in = 1.0\nprice_out = 3.0\n')
    summary = imported(capsys, str(path), "--prices", str(prices))
    assert summary["cost"] == "priced"
    from stiva_tui.store import Store

    store = Store.open()
    try:
        (item,) = store.bench_items(summary["bench"])
    finally:
        store.close()
    assert item.cost_usd == pytest.approx((1000 * 1.0 + 2000 * 3.0) / 1e6)


def test_splits_are_fixed_by_the_id_and_a_recorded_split_is_kept(tmp_path, capsys):
    rows = [
        {"id": f"i{n}", "question": f"Question {n}?", "model": "m", "response": "r", "correct": True} for n in range(40)
    ]
    rows[0]["split"] = "dev"
    first = imported(capsys, str(records(tmp_path, rows)))
    again = imported(capsys, str(records(tmp_path, list(reversed(rows)), name="rev.jsonl")))
    assert first["splits"] == again["splits"]
    assert first["splits"]["dev"] == 1 and 8 <= first["splits"]["heldout"] <= 32
    code, out, err = run(capsys, "bench", first["suite"], "--split", "dev", "--pool", f"replay:{first['bench']}",
                         "--systems", "direct:*", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["systems"][0]["n"] == 1


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "question": "q", "model": "m", "response": "r", "correct": true}', "{not json"], ":2: not JSON"),
        (
            ['{"id": "a", "question": "q", "model": "m", "response": "r", "correct": true}'] * 2,
            ":2: a second record of item 'a' by model 'm'",
        ),
        (['{"id": "a", "question": "q", "model": "m", "response": "r", "correct": 2}'], ":1: 'correct' is true, false"),
        (['{"id": "a", "question": "q", "model": "m", "response": "r", "correct": 1, "cost": 3}'], "unknown field 'cost'"),
        (['{"id": "a", "question": "q", "model": "m", "correct": 1}'], ":1: missing 'response'"),
        (['[1, 2]'], ":1: a record is a JSON object"),
        (
            [
                '{"id": "a", "question": "q", "model": "m", "response": "r", "correct": 1}',
                '{"id": "a", "question": "other", "model": "n", "response": "r", "correct": 1}',
            ],
            ":2: item 'a' is asked with another question",
        ),
        (['{"id": "a", "question": "q", "model": "m", "response": "r", "correct": 1, "prompt_tokens": ' + "9" * 5000 + "}"], ":1: "),
    ],
)  # fmt: skip
def test_bad_records_are_one_line_with_the_line_and_nothing_is_imported(tmp_path, capsys, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "bench", "import", str(path))
    assert code == 2 and out == ""
    error = err.strip().splitlines()[-1]
    assert error.startswith(f"stiva: {path}") and message in error, err
    assert len(error) < 300
    nothing_imported()


def test_a_prices_file_of_one_long_dotted_key_is_refused_at_once_with_its_line(tmp_path, capsys):
    """Issue 56, item 5: a key of 20,000 parts cost tomllib seconds and gigabytes; it is refused
    before the parser sees it, in one line naming the file and the line."""
    import time

    path = records(tmp_path)
    prices = tmp_path / "prices.toml"
    prices.write_text('[[models]]\nname = "m"\n' + ".".join(["price_in"] * 20_000) + " = 1.0\n")
    started = time.perf_counter()
    code, out, err = run(capsys, "bench", "import", str(path), "--prices", str(prices))
    assert time.perf_counter() - started < 1.0
    assert code == 2 and out == ""
    assert err.strip() == f"stiva: {prices}:3: a dotted key of more than 32 parts"
    nothing_imported()


def test_an_unknown_format_or_missing_file_is_one_line(tmp_path, capsys):
    path = records(tmp_path)
    code, _, err = run(capsys, "bench", "import", str(path), "--format", "parquet")
    assert code == 2 and "unknown format 'parquet': use records, routerbench, zeroeval" in err
    code, _, err = run(capsys, "bench", "import", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "no such file or folder" in err
    code, _, err = run(capsys, "bench", "import", str(path), "--name", "../up")
    assert code == 2 and "--name '../up'" in err
    nothing_imported()


def test_a_history_that_cannot_be_written_leaves_no_suite(tmp_path, capsys, monkeypatch):
    from stiva_tui.store import Store, StoreError

    def broken(self, *args, **kwargs):
        raise StoreError("database or disk is full")

    monkeypatch.setattr(Store, "import_bench", broken)
    code, _, err = run(capsys, "bench", "import", str(records(tmp_path)))
    assert code == 1 and "nothing imported: database or disk is full" in err
    folder = Path(os.environ["STIVA_HOME"]) / "data" / "imports"
    assert not any(folder.iterdir())


def test_a_second_import_under_the_same_name_keeps_the_first_replayable(tmp_path, capsys):
    """Other records under a name already imported: the first import's suite stays as it was (its
    bench still replays on it), the second gets a file of its own, and the summary says so."""
    first = imported(capsys, str(records(tmp_path)), "--name", "lab")
    other = [
        dict(r, response=r["response"] + " again")
        for r in map(json.loads, records(tmp_path).read_text().split("\n")[:-1])
    ]
    other = [dict(r, correct=not r["correct"]) if r["model"] == "big" else r for r in other]
    code, out, err = run(capsys, "bench", "import", str(records(tmp_path, other, name="other.jsonl")), "--name", "lab")
    assert code == 0, err
    assert "lab.jsonl already holds an earlier import" in out, out
    second = imported(capsys, str(records(tmp_path, other, name="other.jsonl")), "--name", "lab")
    assert second["suite"] != first["suite"] and second["bench"] != first["bench"]
    assert Path(first["suite"]).name == "lab.jsonl" and Path(second["suite"]).name.startswith("lab-")
    for summary, big in ((first, 1.0), (second, 0.0)):
        code, out, err = run(
            capsys, "bench", summary["suite"], "--pool", f"replay:{summary['bench']}", "--systems", "direct:*", "--json"
        )
        assert code == 0, err
        accuracy = {row["system"]: row["accuracy"] for row in json.loads(out)["systems"]}
        assert accuracy["direct:replay:big"] == big, accuracy
    # The same records again: the same suite file and bench, nothing new written.
    again = imported(capsys, str(records(tmp_path)), "--name", "lab")
    assert again["suite"] == first["suite"] and again["bench"] == first["bench"]
    assert sorted(p.name for p in Path(first["suite"]).parent.iterdir()) == sorted(
        {Path(first["suite"]).name, Path(second["suite"]).name}
    )


def _kinded(tmp_path: Path, name: str = "kinds.jsonl") -> Path:
    """Items whose references are an option letter, a number, an expression, a code output and a name."""
    items = {
        "mc": ("Which organelle?\nA. Nucleus\nB. Ribosome\nC. Mitochondria", "C", "The answer is (C)"),
        "gsm": ("How many eggs are left?", "9", "So 9 eggs."),
        "math": ("Simplify sqrt(12).", "2\\sqrt{3}", "\\boxed{2\\sqrt{3}}"),
        "crux": ("Complete the assertion with a literal: assert f('a') == ??", "'A'", "'A'"),
        "free": ("Name the capital of France.", "Paris", "Paris."),
    }
    rows = [
        {"id": i, "question": q, "model": m, "response": r, "correct": True, "answer": a}
        for i, (q, a, r) in items.items()
        for m in ("big", "small")
    ]
    return records(tmp_path, rows, name)


def test_import_infers_each_items_answer_kind_says_how_many_and_takes_kind(tmp_path, capsys):
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.evals.suite import answer_kind

    info = imported(capsys, str(_kinded(tmp_path)), "--name", "kinds")
    assert info["kinds"] == {"choice": 1, "exact": 1, "literal": 1, "math": 1, "number": 1}
    kinds = {item.id: answer_kind(item) for item in load_suite(info["suite"]).items}
    assert kinds == {"mc": "choice", "gsm": "number", "math": "math", "crux": "literal", "free": "exact"}
    forced = imported(capsys, str(_kinded(tmp_path, "forced.jsonl")), "--name", "forced", "--kind", "exact")
    assert forced["kinds"] == {"exact": 5}
    assert {answer_kind(item) for item in load_suite(forced["suite"]).items} == {"exact"}
    with pytest.raises(SystemExit) as exited:
        run(capsys, "bench", "import", str(_kinded(tmp_path, "bad.jsonl")), "--kind", "letters")
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "--kind" in err and "choice" in err


def test_the_import_summary_fits_80_columns_and_its_next_command_still_pastes(tmp_path, capsys, monkeypatch):
    import shlex

    monkeypatch.setenv("COLUMNS", "80")
    rows = [
        {
            "id": f"q{i}",
            "question": f"What is {i}+{i}?",
            "model": f"provider/a-rather-long-model-name-{m}",
            "response": str(2 * i),
            "correct": True,
        }
        for i in range(4)
        for m in range(12)
    ]
    code, out, err = run(
        capsys, "bench", "import", str(records(tmp_path / "", rows, "a-long-file-name-of-records.jsonl"))
    )
    assert code == 0, err
    # a path longer than the line is one word: it stands alone on its line, never breaks
    too_long = [line for line in (out + err).splitlines() if len(line) > 80 and len(line.split(" \\")[0].split()) > 1]
    assert not too_long, too_long
    lines = out.splitlines()
    at = lines.index("next:")
    folded = " ".join(line.strip().removesuffix("\\").strip() for line in lines[at + 1 :])
    words = shlex.split(folded)
    assert words[:2] == ["stiva", "bench"] and "--pool" in words and words[-1] == "direct:*,oracle,random"
