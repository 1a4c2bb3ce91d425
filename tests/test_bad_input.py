"""Bad input gets a line, not a traceback (issue 40, part 7): a plan whose step number is no
ASCII number, and 5,000-digit integers in a suite file, a LiveCodeBench file or the config."""

from __future__ import annotations

import json

import pytest
from conftest import pool_models

from stiva_tui.conductor.remote import RemoteConductor
from stiva_tui.engine.executor import Engine
from stiva_tui.pool.client import HttpWorker
from tests.support.cli import Result, run_stiva
from tests.support.fakeprovider import Reply


def _plan(models: list, subtasks: list, access: list) -> str:
    return (
        f"Plan.\nmodel_id = {json.dumps(models, ensure_ascii=False)}\nsubtasks = {json.dumps(subtasks)}\n"
        f"access_list = {json.dumps(access, ensure_ascii=False)}"
    )


@pytest.mark.parametrize(
    "bad", [{"model_id": ["²"]}, {"model_id": ["١"]}, {"access": ["³"]}, {"model_id": ["1" * 5000]}]
)
async def test_a_plan_with_a_step_number_int_refuses_goes_to_the_repair_retry(fake, bad):
    """A remote planner (a real HTTP server) first writes a plan whose step number str.isdigit()
    accepts but is no ASCII number, then a valid one: the run succeeds on the repair retry."""
    models = bad.get("model_id", [1, 1])
    access = [[], bad["access"]] if "access" in bad else [[]]
    if "access" in bad:
        models = [1, 1]
    first = _plan(models, ["draft", "check"][: len(models)], access)
    fake.script("cond", Reply(first), Reply(_plan([1], ["answer it"], [[]])))
    fake.script("w1", Reply("the repaired answer"))
    pool = pool_models(fake, "cond", "w1")
    worker = HttpWorker(retries=0)
    try:
        result = await Engine(pool, worker, RemoteConductor(pool[0], worker)).run("Q")
    finally:
        await worker.aclose()
    assert result.status == "finished", result.error
    assert result.answer == "the repaired answer"
    asks = fake.requests_for("cond")
    assert len(asks) == 2
    repair = asks[1].messages[-1]["content"]
    field = "access_list[1]" if "access" in bad else "model_id[0]"
    assert "could not be read" in repair and field in repair
    steps = fake.requests_for("w1")
    assert len(steps) == 1 and "answer it" in steps[0].user_text  # only the repaired plan ran


# --- 5,000-digit integers: one line naming the file and line, through the real `stiva` ----------

BIG = "9" * 5000  # Python's int() refuses more than 4300 digits (sys.get_int_max_str_digits())


def _one_line_error(result: Result, *needles: str) -> str:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "digits" in lines[0] and len(lines[0]) < 400, lines[0]
    return lines[0]


def _lcb_record(**changes) -> dict:
    record = {
        "question_title": "t",
        "question_content": "Print the number.",
        "platform": "atcoder",
        "question_id": "abc1",
        "contest_id": "abc",
        "contest_date": "2024-01-01",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
        "private_test_cases": "",
        "metadata": "{}",
    }
    record.update(changes)
    return record


def test_a_huge_integer_in_a_suite_file_is_one_line_naming_file_and_line(tmp_path):
    suite = tmp_path / "huge.jsonl"
    suite.write_text(
        '{"id": "a", "question": "1+1?", "answer": "2", "grader": "numeric"}\n'
        "\n"
        f'{{"id": "b", "question": "2+2?", "answer": "4", "grader": "numeric", "tolerance": {BIG}}}\n'
    )
    _one_line_error(run_stiva("bench", str(suite), "--systems", "direct:x", home=tmp_path / "home"), "huge.jsonl:3:")


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_a_huge_integer_in_a_livecodebench_json_file_is_one_line_naming_file_and_line(tmp_path, where):
    """A LiveCodeBench .json file: the number in the file itself (found at its line), or inside a
    test case's own JSON (the record's line is named)."""
    good, bad = _lcb_record(), _lcb_record(question_id="abc2")
    if where == "outside":
        bad["rating"] = 0
    else:
        bad["metadata"] = json.dumps({"func_name": "f"})
        bad["public_test_cases"] = json.dumps([{"input": BIG, "output": "1", "testtype": "functional"}])
    text = json.dumps([good, bad], indent=1)
    if where == "outside":
        text = text.replace('"rating": 0', f'"rating": {BIG}')
        line = 1 + text[: text.index(BIG)].count("\n")
        needles = ("lcb.json", f"line {line}")
    else:
        needles = ("lcb.json (record 2)",)
    (tmp_path / "lcb.json").write_text(text)
    _one_line_error(
        run_stiva("bench", f"livecodebench:{tmp_path / 'lcb.json'}", "--systems", "direct:x", home=tmp_path / "home"),
        *needles,
    )


def test_a_huge_integer_in_a_livecodebench_jsonl_file_is_one_line_naming_file_and_line(tmp_path):
    bad = _lcb_record(
        question_id="abc2",
        metadata=json.dumps({"func_name": "f"}),
        public_test_cases=json.dumps([{"input": "1", "output": BIG, "testtype": "functional"}]),
    )
    lines = [json.dumps(_lcb_record()), json.dumps(bad), json.dumps(_lcb_record(question_id="abc3"))]
    lines[2] = lines[2].replace('"platform"', f'"rating": {BIG}, "platform"')
    (tmp_path / "lcb.jsonl").write_text("\n".join(lines) + "\n")
    _one_line_error(
        run_stiva("bench", f"livecodebench:{tmp_path / 'lcb.jsonl'}", "--systems", "direct:x", home=tmp_path / "home"),
        "lcb.jsonl:2:",
    )
    (tmp_path / "lcb.jsonl").write_text("\n".join([lines[0], lines[2]]) + "\n")
    _one_line_error(
        run_stiva("bench", f"livecodebench:{tmp_path / 'lcb.jsonl'}", "--systems", "direct:x", home=tmp_path / "home"),
        "lcb.jsonl:2:",
    )


@pytest.mark.parametrize("number", [BIG, "-" + BIG, "1_" + "_".join(["999"] * 1500), "+" + BIG])
def test_a_huge_integer_in_the_config_is_one_config_error_naming_file_and_line(tmp_path, number):
    from stiva_tui.config import ConfigError, load_config

    config = tmp_path / "huge.toml"
    config.write_text(
        f"catalog = false\n[discovery]\nenabled = false\n[workers]\nretries = {number}\n"
        f"# a comment with {BIG} in it, after the line at fault\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert "huge.toml" in str(info.value) and "line 5" in str(info.value) and "\n" not in str(info.value)
    for command in (["ask", "Q"], ["models"]):
        _one_line_error(run_stiva(*command, "--config", str(config), home=tmp_path / "home"), "huge.toml", "line 5")
