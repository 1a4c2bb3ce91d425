"""Smaller things a user met on the command line (issue 43, part 7): history turns and filters,
`ask --continue` by a prefix, piped widths, `stiva serve`'s log through a pipe, the conductor
override's error, `config --edit` without $EDITOR, the bench's queue wait on the embedded model,
`stiva train`'s stages and hint, and the offline model's note on code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import procs
from tests.support.cli import STIVA, run_stiva
from tests.test_cli import answering_config


@pytest.fixture
def config(fake, tmp_path):
    return answering_config(fake, tmp_path / "c.toml")


def _ask(config: Path, home: Path, question: str, *extra: str) -> dict:
    result = run_stiva("ask", question, "--config", str(config), "--json", *extra, home=home)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_conversation_shown_numbers_its_questions_and_continue_takes_a_unique_start(config, stiva_home):
    first = _ask(config, stiva_home, "Remember the number 7.")
    whole = first["conversation_id"]
    # `history show` takes a start of the id; `ask --continue` takes the same one
    second = _ask(config, stiva_home, "Multiply it by six.", "--continue", whole[:8])
    assert second["conversation_id"] == whole
    third = _ask(config, stiva_home, "And add one.", "--continue", whole[:8].upper())
    assert third["conversation_id"] == whole
    shown = run_stiva("history", "show", whole[:8], home=stiva_home)
    assert shown.returncode == 0, shown.stderr
    headings = [line.strip() for line in shown.stdout.splitlines() if line.strip().startswith("Question ")]
    assert headings == ["Question 1", "Question 2", "Question 3"], shown.stdout
    # a start of a run's id is no conversation, and a start shared by nothing is one line
    run_id = first["run_id"]
    refused = run_stiva("ask", "Q", "--config", str(config), "--continue", run_id[:8], home=stiva_home)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "is a run" in refused.stderr
    short = run_stiva("ask", "Q", "--config", str(config), "--continue", "ab", home=stiva_home)
    assert short.returncode == 2 and short.stderr.startswith("stiva: "), short.stderr


def test_history_conversations_takes_limit_and_history_filters_by_source(config, stiva_home, tmp_path):
    for question in ("one", "two", "three"):
        _ask(config, stiva_home, question)
    listed = run_stiva("history", "conversations", "--limit", "2", "--json", home=stiva_home)
    assert listed.returncode == 0, listed.stderr
    assert [c["title"] for c in json.loads(listed.stdout)] == ["three", "two"]
    assert len(json.loads(run_stiva("history", "--limit", "1", "conversations", "--json", home=stiva_home).stdout)) == 1

    suite = tmp_path / "s.jsonl"
    suite.write_text(json.dumps({"id": "a", "question": "What is 1 + 1?", "answer": "2", "grader": "numeric"}) + "\n")
    bench = run_stiva("bench", str(suite), "--systems", "direct:w1", "--config", str(config), home=stiva_home)
    assert bench.returncode == 0, bench.stderr
    everything = json.loads(run_stiva("history", "--json", home=stiva_home).stdout)
    assert {r["source"] for r in everything} == {"cli", "bench"}
    asked = json.loads(run_stiva("history", "--source", "cli", "--json", home=stiva_home).stdout)
    assert [r["question"] for r in asked] == ["three", "two", "one"]
    benched = json.loads(run_stiva("history", "--source", "bench", "--json", home=stiva_home).stdout)
    assert [r["source"] for r in benched] == ["bench"]
    wrong = run_stiva("history", "--source", "nowhere", home=stiva_home)
    assert wrong.returncode == 2 and "--source" in wrong.stderr


def _widths(text: str) -> list[int]:
    return [len(line) for line in text.splitlines()]


def _table_widths(text: str) -> list[int]:
    """The widths of a table's lines (a prose line that rich may soft-wrap is the reader's to wrap)."""
    return [len(line) for line in text.splitlines() if any(c in line for c in "│┃━─")]


def test_piped_output_is_as_wide_as_columns_says_or_80_with_no_trailing_padding(config, stiva_home):
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    environment["STIVA_HOME"] = str(stiva_home)
    models = run_stiva("models", "--no-discovery", env=environment)
    assert models.returncode == 0, models.stderr
    assert max(_table_widths(models.stdout)) <= 80, models.stdout
    assert all(line == line.rstrip() for line in models.stdout.splitlines())
    wide = run_stiva("models", "--no-discovery", env={**environment, "COLUMNS": "200"})
    assert 80 < max(_table_widths(wide.stdout)) <= 200
    assert all(line == line.rstrip() for line in wide.stdout.splitlines())

    asked = _ask(config, stiva_home, "What is it?")
    for argv in (("history",), ("history", "show", asked["run_id"]), ("history", "conversations")):
        shown = run_stiva(*argv, env=environment)
        assert shown.returncode == 0, shown.stderr
        assert max(_widths(shown.stdout)) <= 80, shown.stdout
        assert all(line == line.rstrip() for line in shown.stdout.splitlines()), argv
    assert asked["run_id"] in run_stiva("history", env=environment).stdout  # the id stays whole


def test_serve_says_its_url_through_a_pipe_at_once_and_names_the_conductor(config, stiva_home):
    port = procs.free_port()
    process = subprocess.Popen(
        [STIVA, "serve", "--no-auth", "--port", str(port), "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "STIVA_HOME": str(stiva_home)},
    )
    try:
        # while it serves: its stdout is a pipe (`stiva serve | tee`), and the URL line is there
        out = procs.read_until(process.stdout, f"http://127.0.0.1:{port}/v1", 60)
        assert f"http://127.0.0.1:{port}/v1" in out, out
        said = procs.read_until(process.stderr, "conductor:", 60)
        assert "conductor: remote · cond" in said, said
        assert process.poll() is None  # it said both while serving
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_a_conductor_override_naming_no_pool_model_names_the_option(config, stiva_home):
    for command in (["ask", "Q"], ["models"]):
        result = run_stiva(*command, "--config", str(config), "--conductor", "remote:nope", home=stiva_home)
        assert result.returncode == 2, result.stderr
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith("stiva: --conductor remote:nope: 'nope' is not a model of the pool"), line
        assert "conductor.model" not in line and "config" not in line.split(":")[1]


def test_config_edit_without_editor_falls_back_as_git_does(stiva_home, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opened = tmp_path / "opened"
    for name in ("editor", "vi"):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $1" >> "{opened}"\n')
        script.chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k not in ("EDITOR", "VISUAL")}
    environment |= {"STIVA_HOME": str(stiva_home), "PATH": str(bin_dir)}
    result = run_stiva("config", "--edit", env=environment)
    assert result.returncode == 0, result.stderr
    path = result.stdout.strip()
    assert opened.read_text() == f"editor {path}\n"  # `editor` first, as git does
    (bin_dir / "editor").unlink()
    assert run_stiva("config", "--edit", env=environment).returncode == 0
    assert opened.read_text().splitlines()[-1] == f"vi {path}"
    (bin_dir / "vi").unlink()
    none = run_stiva("config", "--edit", env=environment)
    assert none.returncode == 2 and none.stderr.count("\n") == 1 and "$EDITOR" in none.stderr
    # $VISUAL before $EDITOR, and both before the fallbacks
    visual = bin_dir / "v"
    visual.write_text(f'#!/bin/sh\necho "visual $1" >> "{opened}"\n')
    visual.chmod(0o755)
    chosen = run_stiva("config", "--edit", env={**environment, "VISUAL": str(visual), "EDITOR": "nope-editor"})
    assert chosen.returncode == 0 and opened.read_text().splitlines()[-1] == f"visual {path}"
    gone = run_stiva("config", "--edit", env={**environment, "EDITOR": "nope-editor"})
    assert gone.returncode == 1 and gone.stderr.count("\n") == 1 and "nope-editor" in gone.stderr


async def test_a_bench_on_the_embedded_model_counts_its_wait_as_queue_wait(tmp_path, stiva_home, monkeypatch):
    """The one in-process model answers one call at a time: items behind it wait in the queue (their
    `queue_wait_s`), not inside a call that runs slower beside three others (their latency)."""
    import asyncio

    from stiva_tui.bench.runner import BenchRunner
    from stiva_tui.config import parse_config
    from stiva_tui.core.usage import Usage
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.pool.embedded import EmbeddedWorker
    from stiva_tui.pool.types import TextDelta, UsageReport
    from stiva_tui.runtime import Runtime
    from stiva_tui.runtime.systems import parse_systems

    busy = {"now": 0, "most": 0}

    async def one_at_a_time(self, model, messages, **kwargs):  # the model's time, without loading it
        busy["now"] += 1
        busy["most"] = max(busy["most"], busy["now"])
        try:
            await asyncio.sleep(0.2 * busy["now"])  # side by side, each call is slower
            yield TextDelta("The answer is 2.")
            yield UsageReport(Usage(10, 4))
        finally:
            busy["now"] -= 1

    monkeypatch.setattr(EmbeddedWorker, "stream_chat", one_at_a_time)
    suite = tmp_path / "s.jsonl"
    suite.write_text(
        "".join(
            json.dumps({"id": f"i{i}", "question": f"What is 1 + 1? ({i})", "answer": "2", "grader": "numeric"}) + "\n"
            for i in range(4)
        )
    )
    runtime = await Runtime.create(parse_config({"catalog": False, "discovery": {"enabled": False}}), discover=False)
    try:
        runner = BenchRunner(
            runtime, load_suite(str(suite)), parse_systems(["direct:local/gemma-3-270m"]), concurrency=4
        )
        outcome = await runner.run()
    finally:
        await runtime.aclose()
    records = outcome.records
    assert len(records) == 4 and all(r.correct for r in records), records
    assert busy["most"] == 1  # never two calls of the one model at once
    assert all(r.latency_s < 0.6 for r in records), [r.latency_s for r in records]
    assert sorted(r.queue_wait_s > 0.1 for r in records) == [False, True, True, True], records


def test_train_says_each_stage_before_step_1_and_its_hint_names_the_pool(stiva_home, tmp_path, monkeypatch):
    """Piped, `stiva train grpo` said nothing until step 1 (minutes on a CPU); its closing hint's
    bench left out the pool it trained on. The trainer here only says its stages: the CLI is the point."""
    from stiva_tui.train import trainer

    def stages_only(config, suite, options, *, on_step=None, progress=None, should_stop=None):
        for message in ("loading embedded for training on cpu", "starting the engine for rollouts", "training"):
            progress(message)
        return trainer.TrainSummary(1, 0.1, 0.2, str(tmp_path / "adapter"), 0.0)

    monkeypatch.setattr(trainer, "train", stages_only)
    result = run_stiva(
        "--pool", "sim", "train", "grpo", "skills", "--base", "embedded", "--split", "train", "--out", str(tmp_path / "adapter"),
        home=stiva_home,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("stiva train grpo: ")]
    assert [line.split(": ", 1)[1].split(":")[0] for line in said] == [
        "loading embedded for training on cpu",
        "starting the engine for rollouts",
        "training",
    ]
    assert "writes plans, runs them on the pool and grades them" in said[-1]
    assert "stiva bench skills --pool sim --systems conductor,adapter:" in " ".join(result.stderr.split())
