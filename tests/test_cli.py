"""The real `stiva` command against scripted local providers: in this process (`run_stiva`), and as
a process of its own where the process is the point (signals, a closed pipe, a terminal, argv bytes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import STIVA, run_stiva
from tests.support.fakeprovider import Reply
from tests.support.pool import write_lab_config

PLAN = 'Two drafts, one judge.\nmodel_id = [1, 2, 1]\nsubtasks = ["draft A", "draft B", "combine"]\naccess_list = [[], [], [0, 1]]'


def write_config(path: Path, base_url: str) -> Path:
    """cond plans; w1 and w2 work; the embedded model stays in the pool, last."""
    models = [("cond", 1.0, 1.0), {"id": "w1", "price_in": 2.0, "price_out": 4.0, "description": "fast drafts"}, "w2"]
    return write_lab_config(path, base_url, models)


def answering_config(fake, path: Path) -> Path:
    """`write_config` at `path` on `fake`, its models answering every ask alike: cond plans PLAN,
    w1 says "the combined answer", w2 "draft two", each with its usage."""
    fake.default("cond", Reply(PLAN, usage=(50, 20)))
    fake.default("w1", Reply("the combined answer", usage=(10, 3)))
    fake.default("w2", Reply("draft two", usage=(12, 2)))
    return write_config(path, fake.base_url)


@pytest.fixture
def config(fake, tmp_path):
    fake.script("cond", Reply(PLAN, usage=(50, 20)))
    fake.default("w1", Reply("the combined answer", usage=(10, 3)))
    fake.default("w2", Reply("draft two", usage=(12, 2)))
    return write_config(tmp_path / "c.toml", fake.base_url)


def test_ask_json_trace(config, stiva_home):
    result = run_stiva("ask", "What is it?", "--config", str(config), "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["question"] == "What is it?"
    assert trace["answer"] == "the combined answer"
    assert trace["conductor"]["backend"] == "remote" and trace["conductor"]["model"] == "cond"
    assert trace["conductor"]["usage"] == {"prompt_tokens": 50, "completion_tokens": 20}
    (round1,) = trace["rounds"]
    assert round1["workflow"] == {
        "model_id": [1, 2, 1],
        "subtasks": ["draft A", "draft B", "combine"],
        "access_list": [[], [], [0, 1]],
    }
    steps = round1["steps"]
    assert [s["model"] for s in steps] == ["w1", "w2", "w1"]
    assert steps[2]["access"] == [0, 1] and steps[2]["status"] == "finished"
    assert steps[0]["usage"] == {"prompt_tokens": 10, "completion_tokens": 3}
    assert steps[0]["cost_usd"] == pytest.approx((10 * 2 + 3 * 4) / 1e6)
    assert all(s["attempts"] == 1 and s["latency_s"] >= 0 for s in steps)
    totals = trace["totals"]
    assert (totals["prompt_tokens"], totals["completion_tokens"]) == (50 + 10 + 12 + 10, 20 + 3 + 2 + 3)
    assert totals["cost_usd"] == pytest.approx(
        (70 + 2 * (10 * 2 + 3 * 4)) / 1e6
    )  # conductor + two w1 steps; w2 is free
    # History lives under STIVA_HOME.
    assert (stiva_home / "data" / "stiva.db").exists()


def test_stiva_in_this_process_leaves_the_process_as_it_found_it(config, tmp_path):
    """`run_stiva` puts back what a command changes: ctrl+c reaches pytest again (every command
    leaves it to os._exit(130)), and the environment, the working folder and the streams are this
    test's again; the command had its own STIVA_HOME, folder and stdin."""
    import signal

    handler, environ, cwd = signal.getsignal(signal.SIGINT), dict(os.environ), os.getcwd()
    streams = (sys.stdin, sys.stdout, sys.stderr)
    home = tmp_path / "its-home"
    result = run_stiva("ask", "-", "--config", str(config), "--json", home=home, cwd=tmp_path, stdin="What is it?")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["question"] == "What is it?" and (home / "data" / "stiva.db").exists()
    assert signal.getsignal(signal.SIGINT) is handler
    assert dict(os.environ) == environ and os.getcwd() == cwd and (sys.stdin, sys.stdout, sys.stderr) == streams
    usage = run_stiva("no-such-command")
    assert usage.returncode == 2 and "invalid choice: 'no-such-command'" in usage.stderr and usage.stdout == ""
    version = run_stiva("--version")
    assert version.returncode == 0 and version.stdout.startswith("stiva ")


def test_stiva_in_this_process_says_an_escaped_exception_as_the_interpreter_would(monkeypatch):
    """A traceback on stderr and exit 1, as `stiva` itself would end: the tests that say "no
    traceback" can fail in this process too."""
    import importlib

    def broken(args, config):
        raise RuntimeError("a bug")

    monkeypatch.setattr(importlib.import_module("stiva_tui.cli.models"), "run", broken)
    result = run_stiva("models")
    assert result.returncode == 1 and result.stdout == ""
    assert "Traceback" in result.stderr and result.stderr.rstrip().endswith("RuntimeError: a bug")


def test_ask_prints_the_answer(config, stiva_home):
    result = run_stiva("ask", "What is it?", "--config", str(config), home=stiva_home)
    assert result.returncode == 0
    assert result.stdout.strip() == "the combined answer"
    assert "conductor: remote" in result.stderr and "$" in result.stderr
    assert " · via http://127.0.0.1:" in result.stderr  # where the remote conductor is served


def test_direct_baseline_and_unknown_model(config, stiva_home):
    result = run_stiva("ask", "Q", "--config", str(config), "--baseline", "direct:w2", "--json", home=stiva_home)
    trace = json.loads(result.stdout)
    assert trace["answer"] == "draft two" and trace["mode"] == "direct"
    result = run_stiva("ask", "Q", "--config", str(config), "--baseline", "direct:nope", home=stiva_home)
    assert result.returncode == 2 and result.stderr.startswith(
        "stiva: model 'nope' is not available; available: cond, w1"
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_moa_baseline(config, stiva_home, fake):
    result = run_stiva("ask", "Q", "--config", str(config), "--baseline", "moa", "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["mode"] == "moa" and len(trace["rounds"][0]["steps"]) >= 3


def test_a_failing_provider_exits_non_zero_with_one_line(fake, tmp_path, stiva_home):
    fake.script("cond", Reply(PLAN))
    fake.default("w1", Reply(status=400, error_message="model overloaded"))
    fake.default("w2", Reply(status=400, error_message="model overloaded"))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    fake.default("cond", Reply(status=400, error_message="model overloaded"))
    result = run_stiva("ask", "Q", "--config", str(config), home=stiva_home)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    # Steps 1 and 2 run at the same time: whichever gives up first names itself.
    assert lines[-1].startswith(("stiva: step 1", "stiva: step 2")) and "model overloaded" in lines[-1]


def test_bad_config_is_a_one_line_error(tmp_path, stiva_home):
    bad = tmp_path / "bad.toml"
    bad.write_text("[conductor]\nmax_steps = 'five'\n")
    result = run_stiva("ask", "Q", "--config", str(bad), home=stiva_home)
    assert result.returncode == 2
    assert "conductor.max_steps" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    result = run_stiva("ask", "Q", "--config", str(tmp_path / "missing.toml"), home=stiva_home)
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_budget_flag_stops_the_run(config, stiva_home):
    result = run_stiva("ask", "Q", "--config", str(config), "--budget-tokens", "80", "--json", home=stiva_home)
    assert result.returncode == 1 and "budget" in result.stderr
    trace = json.loads(result.stdout)
    assert trace["status"] == "failed"


def test_models_json_lists_the_pool(config, stiva_home):
    result = run_stiva("models", "--config", str(config), "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    ids = [m["id"] for m in listing["models"]]
    assert ids[:3] == ["cond", "w1", "w2"] and "local/gemma-3-270m" in ids
    w1 = next(m for m in listing["models"] if m["id"] == "w1")
    assert (w1["price_in"], w1["price_out"], w1["description"]) == (2.0, 4.0, "fast drafts")
    assert "remote" in json.dumps(listing["conductor"])


def test_the_models_table_piped_to_a_file_cuts_no_cell(stiva_home):
    # the catalog; stdout is a pipe here, as wide as $COLUMNS asks (80 without it: test_cli_first_hour.py)
    result = run_stiva("models", "--no-discovery", env={**os.environ, "STIVA_HOME": str(stiva_home), "COLUMNS": "240"})
    assert result.returncode == 0, result.stderr
    from stiva_tui.catalog import load_catalog

    descriptions = [m.description for p in load_catalog().providers for m in p.models]
    assert "…" not in result.stdout and all(d in result.stdout for d in descriptions)  # each whole, on one line


def test_options_before_the_command_reach_it(config, stiva_home):
    result = run_stiva("--config", str(config), "models", "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    assert [m["id"] for m in json.loads(result.stdout)["models"]][:3] == ["cond", "w1", "w2"]


def test_help_is_fast_and_imports_no_torch():
    code = (
        "import sys; from stiva_tui import cli; "
        "import contextlib, io\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()): cli.main(['--help'])\n"
        "assert 'torch' not in sys.modules and 'textual' not in sys.modules, sorted(sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_serve_show_token_is_created_once_then_shown(stiva_home, tmp_path):
    first = run_stiva("serve", "--show-token", home=stiva_home)
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip().splitlines()[-1].strip()
    assert len(token) >= 20
    second = run_stiva("serve", "--show-token", home=stiva_home)
    assert second.returncode == 0 and second.stdout.strip().splitlines()[-1].strip() == token


def test_serve_refuses_no_auth_off_loopback(stiva_home):
    result = run_stiva("serve", "--no-auth", "--host", "0.0.0.0", home=stiva_home)
    assert result.returncode == 2 and "--no-auth is refused" in result.stderr


def test_unknown_conductor_backend_is_a_one_line_error(config, stiva_home):
    for command in (["ask", "Q"], ["models"]):
        result = run_stiva(*command, "--config", str(config), "--conductor", "quantum", home=stiva_home)
        assert result.returncode != 0
        assert result.stderr.strip().splitlines()[-1].startswith("stiva: unknown conductor backend 'quantum'")


def test_ctrl_c_cancels_the_run_and_keeps_it_as_cancelled(fake, tmp_path, stiva_home):
    import signal
    import sqlite3

    process = _start_slow_run(fake, tmp_path, stiva_home)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and err.strip().splitlines()[-1] == "stiva: cancelled"
    db = sqlite3.connect(stiva_home / "data" / "stiva.db")
    assert db.execute("select status from runs").fetchall() == [("cancelled",)]
    assert fake.wait_idle(5)  # the upstream call was closed


def test_each_ask_is_a_conversation_and_continue_adds_to_it(config, fake, stiva_home):
    first = run_stiva("ask", "Remember the number 7.", "--config", str(config), "--json", home=stiva_home)
    assert first.returncode == 0, first.stderr
    conversation_id = json.loads(first.stdout)["conversation_id"]
    assert conversation_id
    second = run_stiva(
        "ask", "Multiply it by six.", "--config", str(config), "--continue", conversation_id, home=stiva_home
    )
    assert second.returncode == 0, second.stderr
    assert f"stiva ask --continue {conversation_id}" in second.stderr
    # The conductor of the second question was shown the first exchange.
    planner = json.dumps(fake.requests_for("cond")[-1].messages)
    assert "Remember the number 7." in planner and "the combined answer" in planner

    from stiva_tui.store import Store

    with Store.open(stiva_home / "data" / "stiva.db") as store:
        conversation = store.get_conversation(conversation_id)
        assert conversation.kind == "ask"
        assert [(m.role, m.content) for m in conversation.messages] == [
            ("user", "Remember the number 7."),
            ("assistant", "the combined answer"),
            ("user", "Multiply it by six."),
            ("assistant", "the combined answer"),
        ]
        assert [r.source for r in conversation.runs] == ["cli", "cli"]

    unknown = run_stiva("ask", "Q", "--config", str(config), "--continue", "nope", home=stiva_home)
    assert unknown.returncode == 2 and unknown.stderr.startswith("stiva: no conversation nope")


def test_the_mini_preset_bounds_the_plan(fake, tmp_path, stiva_home):
    fake.script("cond", Reply(PLAN, usage=(50, 20)))  # three steps: more than the preset allows
    config = write_config(tmp_path / "c.toml", fake.base_url)
    result = run_stiva("ask", "Q", "--config", str(config), "--preset", "conductor-mini", "--json", home=stiva_home)
    # the remote conductor was held to 2 steps: its plan is no plan, and one step on the fallback
    # model answers instead, the round's reasoning saying why
    assert result.returncode == 0, result.stderr
    (round_,) = json.loads(result.stdout)["rounds"]
    assert "at most 2 are allowed" in round_["reasoning"] and len(round_["steps"]) == 1
    prompt = json.dumps(fake.requests_for("cond")[0].messages)
    assert "at most 2 steps" in prompt


def test_the_cli_knows_every_preset():
    from stiva_tui.cli import PRESET_NAMES
    from stiva_tui.runtime import PRESETS

    assert set(PRESET_NAMES) == set(PRESETS)


def test_a_reply_that_is_no_chat_completion_fails_the_step_then_falls_back(fake, tmp_path, stiva_home):
    malformed = Reply(body={"choices": [{"message": ["a"]}]})
    fake.default("w1", malformed)
    fake.default("w2", Reply("the fallback's answer", usage=(5, 3)))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    # direct:MODEL means that model: it fails, and no other model answers instead
    result = run_stiva("ask", "Q", "--config", str(config), "--baseline", "direct:w1", home=stiva_home)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines()[-1].startswith("stiva: step 1 (round 1) failed: ")
    assert "the reply is no chat completion" in result.stderr and not fake.requests_for("w2")
    # a planned step moves on to the fallbacks, and the human output says whose answer it is
    fake.script("cond", Reply('model_id = [1]\nsubtasks = ["Answer the question."]\naccess_list = [[]]'))
    fake.default("cond", malformed)  # the first fallback in pool order
    result = run_stiva("ask", "Q", "--config", str(config), "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["answer"] == "the fallback's answer"
    (step,) = trace["rounds"][0]["steps"]
    assert step["model"] == "w2" and [a["model"] for a in step["attempt_log"]] == ["w1", "cond"]
    assert all("no chat completion" in a["error"] for a in step["attempt_log"])
    fake.script("cond", Reply('model_id = [1]\nsubtasks = ["Answer the question."]\naccess_list = [[]]'))
    human = run_stiva("ask", "Q", "--config", str(config), home=stiva_home)
    assert human.returncode == 0 and human.stdout.strip() == "the fallback's answer"
    assert "fallback: step 1 of round 1 was answered by w2: w1 failed" in human.stderr


@pytest.mark.parametrize(
    "content", [b'theme = "caf\xe9"\n', b"keymap = " + b"[" * 5000 + b"]" * 5000 + b"\n", b"[budget]\nusd = inf\n"]
)
def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path, stiva_home, content):
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    result = run_stiva("models", "--config", str(path), home=stiva_home)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"stiva: {path}: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_escape_sequences_never_reach_the_terminal(fake, tmp_path, stiva_home):
    hostile = "\x1b]0;pwned\x07The answer\x1b[2J is\x07 42.\x1b[31m\n\tDone.\x9b1;1H"
    fake.default("w1", Reply(hostile, usage=(5, 5)))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    result = run_stiva("ask", "Q\x1b[2J?", "--config", str(config), "--baseline", "direct:w1", home=stiva_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The answer is 42.\n\tDone.\n"
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    # --json holds the answer every path holds: made printable before the keys were masked in it
    # (issue 56), as the history and `stiva serve` hold it.
    result = run_stiva("ask", "Q", "--config", str(config), "--baseline", "direct:w1", "--json", home=stiva_home)
    assert json.loads(result.stdout)["answer"] == "The answer is 42.\n\tDone."

    for model in ("w1", "cond", "w2"):  # the step's model and its fallbacks
        fake.default(model, Reply(status=400, error_message="bad \x1b]0;pwned\x07 request"))
    result = run_stiva("ask", "Q", "--config", str(config), "--baseline", "direct:w1", home=stiva_home)
    assert result.returncode == 1 and "\x1b" not in result.stderr and "bad ]0;pwned" not in result.stderr
    assert "bad  request" in result.stderr


def _start_slow_run(fake, tmp_path, stiva_home, *extra):
    import time

    fake.script("cond", Reply('model_id = [1]\nsubtasks = ["a"]\naccess_list = [[]]'))
    fake.default("w1", Reply("slow " * 100, chunk_delay_s=0.1))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    process = subprocess.Popen(
        [STIVA, "ask", "Q", "--config", str(config), *extra],
        text=True,
        env={**os.environ, "STIVA_HOME": str(stiva_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not fake.requests_for("w1") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    return process


def test_sigterm_stops_the_run_like_ctrl_c_and_exits_143(fake, tmp_path, stiva_home):
    import signal
    import sqlite3

    process = _start_slow_run(fake, tmp_path, stiva_home)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 143 and err.strip().splitlines()[-1] == "stiva: terminated"
    db = sqlite3.connect(stiva_home / "data" / "stiva.db")
    assert db.execute("select status, failure from runs").fetchall() == [("cancelled", "cancelled")]
    assert fake.wait_idle(5)


def test_a_second_ctrl_c_still_exits_130_without_a_traceback(fake, tmp_path, stiva_home):
    import signal
    import time

    process = _start_slow_run(fake, tmp_path, stiva_home)
    for _ in range(3):
        process.send_signal(signal.SIGINT)
        time.sleep(0.02)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and "Traceback" not in err and "stiva: cancelled" in err


def test_ctrl_c_before_the_run_starts_is_one_line(monkeypatch, capsys):
    from stiva_tui import cli, config

    def interrupted(path):
        raise KeyboardInterrupt

    monkeypatch.setattr(config, "load_config", interrupted)
    assert cli.main(["models"]) == cli.EXIT_CANCELLED
    assert capsys.readouterr().err == "stiva: cancelled\n"


def test_a_reader_that_closes_the_pipe_early_ends_it_quietly(config, stiva_home):
    process = subprocess.Popen(
        [STIVA, "ask", "What is it?", "--config", str(config), "--json"],
        env={**os.environ, "STIVA_HOME": str(stiva_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()  # as `| head -c0` would
    err = process.stderr.read().decode()
    process.wait(30)
    assert process.returncode == 141 and "Traceback" not in err and "BrokenPipe" not in err


def test_a_provider_that_never_finishes_meets_the_deadline(fake, tmp_path, stiva_home):
    """Keep-alive comments every 0.1 s keep the idle timeout from firing; [workers] deadline_s
    bounds the whole call, and a model that never answers is named (direct: no fallback)."""
    import time

    for model in ("w1", "cond"):
        fake.default(model, Reply(fault="keepalive"))
    fake.default("w2", Reply("in time", usage=(3, 2)))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    config.write_text(config.read_text().replace("retries = 0", "retries = 0\ndeadline_s = 1"))
    started = time.monotonic()
    result = run_stiva("ask", "Q", "--config", str(config), "--baseline", "direct:w1", "--json", home=stiva_home)
    # direct:w1 never falls back: one call of 1 s, then the failure that names the deadline
    assert result.returncode == 1 and 1 <= time.monotonic() - started < 20
    assert "no complete reply within 1 s ([workers] deadline_s)" in result.stderr and not fake.requests_for("w2")


def test_a_question_that_is_not_utf8_is_repaired_and_said_so(config, stiva_home):
    """As an argument (the interpreter's own decoding of argv bytes: a process of its own) and on stdin."""
    argv = subprocess.run(
        [STIVA.encode(), b"ask", b"caf\xe9?", b"--config", str(config).encode(), b"--json"],
        capture_output=True,
        env={**os.environ, "STIVA_HOME": str(stiva_home)},
        timeout=60,
    )
    assert argv.returncode == 0, argv.stderr
    piped = run_stiva("ask", "-", "--config", str(config), "--json", stdin=b"na\xefve question\n")
    assert piped.returncode == 0, piped.stderr
    for err, out, question in (
        (argv.stderr.decode(), argv.stdout, "caf\ufffd?"),
        (piped.stderr, piped.stdout, "na\ufffdve question\n"),
    ):
        assert err.count("\n") == 1 and "not UTF-8; they were replaced with \ufffd" in err
        assert json.loads(out)["question"] == question


def test_a_killed_run_is_interrupted_with_what_it_had_streamed(fake, tmp_path, stiva_home):
    """kill -9 mid-run: the next stiva that opens the history marks the run interrupted, and at
    most the last second of its streamed text is lost."""
    import signal
    import sqlite3
    import time

    process = _start_slow_run(fake, tmp_path, stiva_home)  # w1 streams a word every 0.1 s
    time.sleep(1.5)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    db = sqlite3.connect(stiva_home / "data" / "stiva.db")
    assert db.execute("select status from runs").fetchall() == [("running",)]  # nobody said otherwise

    fake.default("w1", Reply("quick"))
    config = tmp_path / "c.toml"
    result = run_stiva("ask", "Next", "--config", str(config), "--baseline", "direct:w1", home=stiva_home)
    assert result.returncode == 0, result.stderr
    ((status, finished),) = db.execute("select status, finished_at from runs where question = 'Q'").fetchall()
    assert status == "interrupted" and finished
    ((step_status, output),) = db.execute(
        "select s.status, s.output from steps s join runs r on r.id = s.run_id where r.question = 'Q'"
    ).fetchall()
    assert step_status == "interrupted" and output.startswith("slow slow")  # kept what it had written


def test_history_lists_runs_newest_first_and_shows_one(config, stiva_home):
    long_question = "What is it? " + "Tell me everything about it. " * 10
    for question in ("First question", long_question.strip()):
        assert run_stiva("ask", question, "--config", str(config), home=stiva_home).returncode == 0
    result = run_stiva("history", "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)
    assert [r["question"] for r in runs] == [long_question.strip(), "First question"]  # whole text
    assert set(runs[0]) == {
        "id",
        "started_at",
        "source",
        "question",
        "status",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
    }
    assert runs[0]["source"] == "cli" and runs[0]["status"] == "finished" and runs[0]["prompt_tokens"] > 0
    assert len(json.loads(run_stiva("history", "--json", "--limit", "1", home=stiva_home).stdout)) == 1

    table = run_stiva("history", home=stiva_home).stdout
    assert runs[1]["id"] in table and "First question" in table
    # shortened: at 80 columns (piped, no $COLUMNS) the question gets what the id, start and status leave
    assert "What is it? Tell me" in table and long_question.strip() not in table

    shown = run_stiva("history", "show", runs[1]["id"], "--json", home=stiva_home)
    trace = json.loads(shown.stdout)
    assert trace["run_id"] == runs[1]["id"] and trace["answer"] == "the combined answer"
    assert "the combined answer" in run_stiva("history", "show", runs[1]["id"], home=stiva_home).stdout
    missing = run_stiva("history", "show", "nope", home=stiva_home)
    assert missing.returncode == 2 and missing.stderr.startswith("stiva: 'nope' is no run or conversation id")
    absent = run_stiva("history", "show", "0123abcd", home=stiva_home)
    assert absent.returncode == 2 and "no run or conversation 0123abcd" in absent.stderr


def test_any_printed_id_and_any_unique_start_of_one_works_in_history_show(config, stiva_home):
    asked = run_stiva("ask", "What is it?", "--config", str(config), home=stiva_home)
    assert asked.returncode == 0, asked.stderr
    conversation_id = asked.stderr.split("conversation ", 1)[1].split()[0]  # as `stiva ask` prints it
    run_id = json.loads(run_stiva("history", "--json", home=stiva_home).stdout)[0]["id"]
    by_prefix = run_stiva("history", "show", run_id[:8], home=stiva_home)
    assert by_prefix.returncode == 0, by_prefix.stderr
    assert "Plan, round 1" in by_prefix.stdout and "Step 1" in by_prefix.stdout  # the plan, with subtasks
    assert "Draft an answer." in by_prefix.stdout or "w1" in by_prefix.stdout
    conversation = run_stiva("history", "show", conversation_id, home=stiva_home)
    assert conversation.returncode == 0, conversation.stderr
    assert conversation_id in conversation.stdout and "the combined answer" in conversation.stdout
    assert (
        json.loads(run_stiva("history", "show", conversation_id[:6], "--json", home=stiva_home).stdout)["id"]
        == conversation_id
    )
    wide = {**os.environ, "STIVA_HOME": str(stiva_home), "COLUMNS": "120"}  # at 80 the title gives way
    listed = run_stiva("history", "conversations", env=wide)
    assert listed.returncode == 0 and conversation_id in listed.stdout and "What is it?" in listed.stdout
    assert "finished" in next(line for line in listed.stdout.splitlines() if conversation_id in line)


def test_history_renames_and_deletes_a_conversation_by_any_unique_prefix(config, stiva_home):
    asked = run_stiva("ask", "What is it?", "--config", str(config), home=stiva_home)
    assert asked.returncode == 0, asked.stderr
    conversation_id = asked.stderr.split("conversation ", 1)[1].split()[0]
    run_id = json.loads(run_stiva("history", "--json", home=stiva_home).stdout)[0]["id"]
    renamed = run_stiva("history", "rename", conversation_id[:6], "Naming  things", home=stiva_home)
    assert renamed.returncode == 0, renamed.stderr
    listed = json.loads(run_stiva("history", "conversations", "--json", home=stiva_home).stdout)
    assert [(c["id"], c["title"], c["last_status"]) for c in listed] == [(conversation_id, "Naming things", "finished")]
    refused = run_stiva("history", "rename", run_id[:8], "x", home=stiva_home)
    assert refused.returncode == 2 and "is a run: only a conversation has a title" in refused.stderr
    deleted = run_stiva("history", "delete", conversation_id[:6], home=stiva_home)
    assert deleted.returncode == 0 and "deleted conversation" in deleted.stdout, deleted.stderr
    assert json.loads(run_stiva("history", "conversations", "--json", home=stiva_home).stdout) == []
    assert json.loads(run_stiva("history", "--json", home=stiva_home).stdout)[0]["id"] == run_id  # the run stays
    assert run_stiva("history", "delete", run_id, home=stiva_home).returncode == 0
    assert json.loads(run_stiva("history", "--json", home=stiva_home).stdout) == []
    gone = run_stiva("history", "delete", run_id, home=stiva_home)
    assert gone.returncode == 2 and "no run or conversation" in gone.stderr


def test_models_the_config_names_must_exist_and_say_when_they_are_unavailable(fake, tmp_path, stiva_home):
    config = write_config(tmp_path / "c.toml", fake.base_url)
    base = config.read_text()

    config.write_text(base.replace("retries = 0", 'retries = 0\nfallbacks = ["ghost"]'))
    for command in (["models"], ["ask", "Q"]):
        result = run_stiva(*command, "--config", str(config), home=stiva_home)
        assert result.returncode == 2, result.stderr
        assert "workers.fallbacks: 'ghost' is not a model of the pool" in result.stderr
        assert result.stderr.count("\n") == 1
    result = run_stiva("models", "--config", str(config), home=stiva_home)
    assert result.stderr.startswith(f"stiva: {config}: workers.fallbacks")  # names the file too

    config.write_text(base.replace('backend = "remote"\nmodel = "cond"', 'backend = "remote"\nmodel = "nobody"', 1))
    result = run_stiva("models", "--config", str(config), home=stiva_home)
    assert result.returncode == 2 and "conductor.model: 'nobody' (the remote conductor) is not a model" in result.stderr

    # Known but without a key right now: a warning line, and it still works.
    config.write_text(
        base.replace("catalog = false", "catalog = true").replace(
            "retries = 0", 'retries = 0\nfallbacks = ["openai/gpt-5"]'
        )
    )
    result = run_stiva("models", "--config", str(config), "--no-discovery", home=stiva_home)
    assert result.returncode == 0
    assert (
        "warning" in result.stderr and "workers.fallbacks: 'openai/gpt-5' is not available now (no key" in result.stderr
    )


def test_embedded_worker_false_keeps_the_270m_model_out_of_every_plan(config, fake, stiva_home):
    config.write_text("embedded_worker = false\n" + config.read_text())
    listing = json.loads(run_stiva("models", "--config", str(config), "--json", home=stiva_home).stdout)
    assert [m["id"] for m in listing["models"]] == ["cond", "w1", "w2"]
    result = run_stiva("ask", "What is it?", "--config", str(config), "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["answer"] == "the combined answer"
    (plan_request,) = fake.requests_for("cond")
    shown = plan_request.user_text
    assert "w1" in shown and "gemma" not in shown  # the conductor is not offered it


def test_an_empty_pool_is_one_line_saying_how_to_add_a_model(tmp_path, stiva_home):
    config = tmp_path / "empty.toml"
    # No keys, no catalog, no [[models]], and the embedded worker left out; the embedded model
    # stays the conductor, but nothing could answer: the question fails before anything loads.
    config.write_text(
        'embedded_worker = false\ncatalog = false\n[conductor]\nbackend = "embedded"\n[discovery]\nenabled = false\n'
    )
    result = run_stiva("ask", "What is 2 + 2?", "--config", str(config), home=stiva_home)
    assert result.returncode != 0 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "no available model" in line and "key" in line and "[[models]]" in line and "embedded_worker" in line
    assert "Traceback" not in result.stderr


def test_in_a_terminal_ask_prints_its_totals_once(config, stiva_home):
    """The live view's last frame ends on the totals: no second totals line after the answer."""
    import pty
    import re

    leader, follower = pty.openpty()
    env = {**os.environ, "STIVA_HOME": str(stiva_home), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    process = subprocess.Popen(
        [STIVA, "ask", "What is it?", "--config", str(config)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert process.wait(timeout=60) == 0
    os.close(leader)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r", "", b"".join(chunks).decode(errors="replace"))
    assert "the combined answer" in text and "finished · " in text  # the live view's own totals
    assert not re.search(r"(?m)^\s*[\d,]+ in · [\d,]+ out", text), text[-600:]  # and no second line of them


def test_the_usable_models_are_listed_first(stiva_home):
    result = run_stiva("models", "--no-discovery", "--json", home=stiva_home)  # no keys: only the embedded one works
    listed = json.loads(result.stdout)["models"]
    assert listed[0]["id"] == "local/gemma-3-270m" and listed[0]["available"]
    assert not any(m["available"] for m in listed[1:]) and len(listed) > 10
    table = run_stiva("models", "--no-discovery", home=stiva_home).stdout
    assert table.index("local/gemma-3-270m") < table.index("openai/")


def test_quitting_the_app_leaves_without_the_interpreters_slow_teardown(monkeypatch):
    """After the app closed its runtime, the interpreter's teardown of torch and the model took
    2.6 s with the screen already gone: `stiva` leaves at once instead, its streams flushed."""
    import importlib

    import stiva_tui.tui.app as app_module
    from stiva_tui import cli

    # the module, not the package's `main` (the function, as unittest.main is)
    monkeypatch.setattr(app_module, "run_app", lambda config, conductor=None: 0)
    monkeypatch.setattr(importlib.import_module("stiva_tui.cli.main"), "_closed_cleanly", False)
    monkeypatch.setattr(sys, "argv", ["stiva"])
    left: list[int] = []

    def leave(code):
        left.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", leave)
    with pytest.raises(SystemExit):
        cli.entry()
    assert left == [0]
