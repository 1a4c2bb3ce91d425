"""`stiva bench` end to end on the real scripted HTTP provider: exact figures, concurrency, 429s,
errors, the judge, the budget, resume after a kill, and the report's JSON shape."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from stiva_tui.bench.report import build_report, wilson
from stiva_tui.bench.runner import BenchError, BenchRunner
from stiva_tui.config import load_config
from stiva_tui.evals.loaders import load_suite
from stiva_tui.runtime import Runtime
from stiva_tui.runtime.systems import SystemNameError, parse_systems
from tests.support.cli import STIVA, run_stiva
from tests.support.fakeprovider import Reply
from tests.support.pool import write_lab_config

PLAN = 'model_id = [1]\nsubtasks = ["Add the two numbers."]\naccess_list = [[]]'
QUESTION = re.compile(r"What is (\d+) \+ (\d+)\?")


def _sum(request) -> int:
    a, b = QUESTION.search(request.user_text).groups()
    return int(a) + int(b)


def script_pool(fake, *, latency_s: float = 0.0):
    """cond plans [right]; `right` always adds correctly, `wrong` is always off by one."""
    fake.default("cond", Reply(PLAN, usage=(50, 20), latency_s=latency_s))
    fake.default("right", lambda r: Reply(f"The sum is {_sum(r)}.", usage=(10, 2), latency_s=latency_s))
    fake.default("wrong", lambda r: Reply(f"The sum is {_sum(r) + 1}.", usage=(12, 3), latency_s=latency_s))


def write_config(path: Path, base_url: str, **sections) -> Path:
    """cond plans [right]; `right` and `wrong` priced apart; no embedded model."""
    models = [("cond", 1.0, 1.0), ("right", 1.0, 2.0), ("wrong", 3.0, 5.0)]
    return write_lab_config(path, base_url, models, embedded_worker=False, **sections)


def write_suite(path: Path, n: int) -> Path:
    lines = [
        json.dumps({"id": f"add-{i}", "question": f"What is {i} + {i * 2}?", "answer": str(3 * i), "grader": "numeric"})
        for i in range(1, n + 1)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


async def _runner(config_path: Path, suite_path: Path, systems: str, **kwargs):
    runtime = await Runtime.create(load_config(config_path), discover=False)
    return runtime, BenchRunner(runtime, load_suite(str(suite_path)), parse_systems([systems]), **kwargs)


async def test_accuracy_tokens_and_cost_are_exact_on_a_pool_whose_truth_is_known(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 5)
    runtime, runner = await _runner(config, suite, "direct:right,direct:wrong,conductor", concurrency=3)
    try:
        outcome = await runner.run()
        # every item is a run in the history, from the bench
        traces = [runtime.store.get_trace(r.run_id) for r in outcome.records]
    finally:
        await runtime.aclose()
    assert len(traces) == 15 and {t.source for t in traces} == {"bench"}
    assert outcome.status == "finished"
    report = build_report(
        "s",
        outcome.bench_id,
        ["direct:right", "direct:wrong", "conductor"],
        [f"add-{i}" for i in range(1, 6)],
        outcome.records,
    ).model_dump()
    rows = {row["system"]: row for row in report["systems"]}
    assert (rows["direct:right"]["n"], rows["direct:right"]["correct"], rows["direct:right"]["accuracy"]) == (5, 5, 1.0)
    assert (rows["direct:wrong"]["correct"], rows["direct:wrong"]["accuracy"], rows["direct:wrong"]["errors"]) == (
        0,
        0.0,
        0,
    )
    assert rows["conductor"]["accuracy"] == 1.0
    assert rows["direct:right"]["tokens_per_question"] == 12
    assert rows["direct:right"]["cost_per_question"] == pytest.approx((10 * 1.0 + 2 * 2.0) / 1e6)
    assert rows["direct:wrong"]["cost_per_question"] == pytest.approx((12 * 3.0 + 3 * 5.0) / 1e6)
    # the conductor's own plan counts: 50 + 20 tokens at 1.0/1.0, then the step on `right`
    assert rows["conductor"]["tokens_per_question"] == 50 + 20 + 10 + 2
    assert rows["conductor"]["cost_per_question"] == pytest.approx((50 + 20 + 10 * 1.0 + 2 * 2.0) / 1e6)
    assert rows["direct:right"]["ci95"] == list(wilson(5, 5)) and rows["direct:right"]["ci95"][0] < 1.0
    items = {(i["system"], i["id"]): i for i in report["items"]}
    assert (
        items["direct:wrong", "add-2"]["extracted"] == "7"
        and items["direct:wrong", "add-2"]["answer"] == "The sum is 7."
    )
    assert len(fake.requests_for("right")) == 10 and len(fake.requests_for("wrong")) == 5


async def test_items_run_concurrently(fake, tmp_path, stiva_home):
    script_pool(fake)
    # `right` answers only once all eight items have asked it: items run fewer at a time never
    # all meet, and those asked alone get a wrong answer. Event order, not a clock.
    all_asked = threading.Barrier(8)

    def right(request):
        try:
            all_asked.wait(timeout=10)
        except threading.BrokenBarrierError:
            return Reply("asked alone", usage=(10, 2))
        return Reply(f"The sum is {_sum(request)}.", usage=(10, 2))

    fake.default("right", right)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 8)
    runtime, runner = await _runner(config, suite, "direct:right", concurrency=8)
    try:
        outcome = await runner.run()
    finally:
        await runtime.aclose()
    assert len(outcome.records) == 8 and all(r.correct for r in outcome.records), [r.extracted for r in outcome.records]
    assert len(fake.requests_for("right")) == 8  # all eight were in flight at once


async def test_a_429_slows_the_provider_down_and_fails_no_item(fake, tmp_path, stiva_home):
    fake.script(
        "right",
        Reply(status=429, retry_after="0"),
        Reply(status=429, retry_after="0"),
        Reply(status=429, retry_after="0"),
    )
    fake.default("right", lambda r: Reply(f"The sum is {_sum(r)}.", usage=(10, 2)))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 4)
    runtime, runner = await _runner(config, suite, "direct:right", concurrency=4)
    try:
        outcome = await runner.run()
    finally:
        await runtime.aclose()
    assert [r.status for r in outcome.records] == ["graded"] * 4 and all(r.correct for r in outcome.records)
    assert runner.progress.throttled == {"lab": 3}
    assert runner._limited.window("lab").window < 4  # the window shrank


async def test_latency_counts_from_the_first_call_and_the_queue_wait_is_reported_apart(
    fake, tmp_path, stiva_home, capsys
):
    from stiva_tui.bench.report import percentile
    from stiva_tui.cli.bench import print_table

    # two 429s halve the provider's window twice, to 1, while 4 items are in flight: from then on
    # each item waits for its slot about three calls' time before its one call (0.3 s) starts
    fake.script("right", Reply(status=429, retry_after="0.05"), Reply(status=429, retry_after="0.05"))
    script_pool(fake, latency_s=0.3)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    runtime, runner = await _runner(config, write_suite(tmp_path / "s.jsonl", 8), "direct:right", concurrency=4)
    try:
        outcome = await runner.run()
    finally:
        await runtime.aclose()
    assert runner._limited.window("lab").window == 1
    records = outcome.records
    assert len(records) == 8 and all(r.correct for r in records)
    latencies = [r.latency_s for r in records]
    waits = [r.queue_wait_s for r in records]
    # p50 is one call's time, not inflated by the wait (counted in, it made p50 3-4 times that:
    # a ratio, which a busy machine's slower calls leave alone)
    with_waits = percentile([a + b for a, b in zip(latencies, waits)], 50)  # what p50 was before
    assert 0.3 <= percentile(latencies, 50) and percentile(latencies, 50) * 2 < with_waits, (latencies, waits)
    assert sum(w >= 0.5 for w in waits) >= 4, (latencies, waits)
    # the wait is stored, and reported apart in report.json and the printed table
    report = build_report("s", runner.bench_id, ["direct:right"], [f"add-{i}" for i in range(1, 9)], records)
    row = report.systems[0]
    assert row.queue_wait_p95_s >= 0.5 and row.latency_p50_s == pytest.approx(percentile(latencies, 50), abs=1e-3)
    assert sorted(item.queue_wait_s for item in report.items) == sorted(waits)
    print_table(report)
    printed = capsys.readouterr().out
    assert f"queued before the first call, p50/p95 s: direct:right {row.queue_wait_p50_s:.1f}/" in printed


async def test_a_failing_item_is_an_error_not_a_wrong_answer_and_direct_never_falls_back(fake, tmp_path, stiva_home):
    fake.default(
        "right",
        lambda r: (
            Reply(status=400, error_message="no such thing")
            if "2 + 4" in r.user_text
            else Reply(f"The sum is {_sum(r)}.", usage=(10, 2))
        ),
    )
    fake.default("wrong", lambda r: Reply(f"The sum is {_sum(r) + 1}.", usage=(12, 3)))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 3)
    runtime, runner = await _runner(config, suite, "direct:right")
    try:
        outcome = await runner.run()
        again = await BenchRunner(runtime, load_suite(str(suite)), parse_systems(["direct:right"])).run()
    finally:
        await runtime.aclose()
    failed = next(r for r in outcome.records if r.item_id == "add-2")
    assert failed.status == "error" and "no such thing" in failed.error and not failed.correct
    assert fake.requests_for("wrong") == []  # a direct system measures its model, nothing else
    report = build_report("s", outcome.bench_id, ["direct:right"], ["add-1", "add-2", "add-3"], outcome.records)
    assert report.systems[0].n == 3 and report.systems[0].errors == 1
    assert report.systems[0].accuracy == pytest.approx(2 / 3)
    # the same bench again: the error is asked again, the graded items are not
    assert again.bench_id == outcome.bench_id
    asked = [QUESTION.search(r.user_text).group(0) for r in fake.requests_for("right")]
    assert asked.count("What is 1 + 2?") == 1 and asked.count("What is 2 + 4?") == 2


async def test_judge_items_are_graded_by_the_judge_model_and_its_cost_is_apart(fake, tmp_path, stiva_home):
    fake.default("right", Reply("Paris, on the Seine.", usage=(10, 2)))
    fake.default(
        "wrong",
        lambda r: Reply(
            "Judgement: the answer names Paris.\nCORRECT" if "Paris" in r.user_text else "INCORRECT", usage=(100, 10)
        ),
    )
    config = write_config(tmp_path / "c.toml", fake.base_url, bench={"judge": "wrong"})
    suite = tmp_path / "open.jsonl"
    suite.write_text(
        json.dumps({"id": "q1", "question": "Where is the Louvre?", "answer": "Paris", "grader": "judge"}) + "\n"
    )
    runtime, runner = await _runner(config, suite, "direct:right")
    try:
        outcome = await runner.run()
    finally:
        await runtime.aclose()
    (record,) = outcome.records
    assert record.status == "graded" and record.correct
    assert record.cost_usd == pytest.approx((10 * 1.0 + 2 * 2.0) / 1e6)  # the system's alone
    assert record.judge_cost_usd == pytest.approx((100 * 3.0 + 10 * 5.0) / 1e6)
    (judged,) = fake.requests_for("wrong")
    assert "Paris, on the Seine." in judged.user_text and "Where is the Louvre?" in judged.user_text


async def test_judge_items_without_a_judge_fail_before_anything_is_asked(fake, tmp_path, stiva_home):
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = tmp_path / "open.jsonl"
    suite.write_text(json.dumps({"id": "q1", "question": "Q?", "answer": "A", "grader": "judge"}) + "\n")
    runtime, runner = await _runner(config, suite, "direct:right")
    try:
        with pytest.raises(BenchError, match=r"\[bench\] judge"):
            await runner.run()
    finally:
        await runtime.aclose()
    assert fake.requests == []


def test_system_names():
    names = [s.name for s in parse_systems(["conductor,moa", "direct:gpt-5", "conductor-mini"])]
    assert names == ["conductor", "moa", "direct:gpt-5", "conductor-mini"]
    for bad in (["nope"], ["direct:"], ["conductor,conductor"], [""], ["adapter:/no/such/dir"]):
        with pytest.raises(SystemNameError):
            parse_systems(bad)


# --- the real command ------------------------------------------------------------------------------


ITEM_KEYS = {
    "id",
    "system",
    "run_id",
    "status",
    "correct",
    "answer",
    "extracted",
    "error",
    "failure",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
    "queue_wait_s",
}
SYSTEM_KEYS = {
    "system",
    "n",
    "correct",
    "errors",
    "accuracy",
    "ci95",
    "tokens_per_question",
    "cost_per_question",
    "judge_cost_usd",
    "latency_p50_s",
    "latency_p95_s",
    "queue_wait_p50_s",
    "queue_wait_p95_s",
}


def test_json_report_shape_and_report_files(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 3)
    out = tmp_path / "out"
    result = run_stiva(
        "bench",
        str(suite),
        "--systems",
        "conductor,direct:wrong",
        "--config",
        str(config),
        "--json",
        "--out",
        str(out),
        home=stiva_home,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)  # exactly one JSON object on stdout
    assert {"suite", "bench_id", "systems", "items", "frontier", "pool"} <= set(report)
    assert report["pool"] is None  # a real pool: no "simulated pool" label
    assert report["suite"] == "s" and isinstance(report["bench_id"], str)
    assert [set(row) for row in report["systems"]] == [SYSTEM_KEYS, SYSTEM_KEYS]
    assert len(report["items"]) == 6 and all(set(item) == ITEM_KEYS for item in report["items"])
    assert all(item["status"] in ("graded", "error") for item in report["items"])
    assert isinstance(report["systems"][0]["ci95"], list) and len(report["systems"][0]["ci95"]) == 2
    assert json.loads((out / "report.json").read_text()) == report
    markdown = (out / "report.md").read_text()
    assert "| conductor | 3 | 3 | 0 | 1.000 |" in markdown and "| one step | 3 | 100% |" in markdown
    assert "| right | 3 | 100% |" in markdown
    assert (out / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the runs are in the history, marked as the bench's
    listing = json.loads(run_stiva("history", "--json", home=stiva_home).stdout)
    runs = listing["runs"] if isinstance(listing, dict) else listing
    assert sum(1 for r in runs if r["source"] == "bench") == 6


def test_a_killed_bench_resumes_and_asks_nothing_twice(fake, tmp_path, stiva_home):
    script_pool(fake, latency_s=0.3)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 12)
    command = [
        STIVA,
        "bench",
        str(suite),
        "--systems",
        "direct:right",
        "--config",
        str(config),
        "--json",
        "--concurrency",
        "2",
    ]
    env = {**os.environ, "STIVA_HOME": str(stiva_home)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    database = stiva_home / "data" / "stiva.db"
    graded_before: set[str] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(graded_before) < 4:
        time.sleep(0.1)
        if database.exists():
            try:
                with sqlite3.connect(database) as conn:
                    graded_before = {
                        r[0] for r in conn.execute("SELECT item_id FROM bench_items WHERE status = 'graded'")
                    }
            except sqlite3.Error:
                continue
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    assert 4 <= len(graded_before) < 12
    # the next look at the history sweeps the killed bench: interrupted, not "running"
    listed = run_stiva("history", "--json", home=stiva_home)
    assert listed.returncode == 0, listed.stderr
    with sqlite3.connect(database) as conn:
        ((status, reason),) = conn.execute("SELECT status, stop_reason FROM bench_runs").fetchall()
    assert status == "interrupted" and "was killed" in reason
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["systems"][0]["n"] == 12 and report["systems"][0]["correct"] == 12
    asked: dict[str, int] = {}
    for request in fake.requests_for("right"):
        question = QUESTION.search(request.user_text).group(0)
        asked[question] = asked.get(question, 0) + 1
    for item_id in graded_before:  # graded before the kill: never asked again
        i = int(item_id.split("-")[1])
        assert asked[f"What is {i} + {i * 2}?"] == 1, (item_id, asked)
    assert len(asked) == 12


def wait_until_a_bench_runs(database: Path, timeout: float = 60) -> None:
    """Until the history at `database` holds a bench marked running (a process has claimed it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            with sqlite3.connect(database) as conn:
                if conn.execute("SELECT 1 FROM bench_runs WHERE status = 'running'").fetchone() is not None:
                    return
        except sqlite3.Error:
            continue
    raise AssertionError(f"no bench started running in {timeout:.0f} s")


def test_a_second_bench_on_the_same_bench_refuses_with_the_first_ones_pid_and_nothing_is_asked_twice(
    fake, tmp_path, stiva_home
):
    script_pool(fake, latency_s=0.5)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 12)
    command = [
        STIVA,
        "bench",
        str(suite),
        "--systems",
        "direct:right",
        "--config",
        str(config),
        "--json",
        "--concurrency",
        "1",
    ]
    env = {**os.environ, "STIVA_HOME": str(stiva_home)}
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    wait_until_a_bench_runs(stiva_home / "data" / "stiva.db")  # the first one has claimed the bench
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    still_running = first.poll() is None
    out, err = first.communicate(timeout=120)
    assert still_running, "the first bench ended before the second one started: make its items slower"
    assert second.returncode == 1, second.stderr
    assert len(second.stderr.strip().splitlines()) == 1, second.stderr
    assert f"already running in process {first.pid}" in second.stderr and "Traceback" not in second.stderr
    assert second.stdout == ""  # no report of a bench it did not run
    assert first.returncode == 0, err
    assert json.loads(out)["systems"][0]["correct"] == 12
    assert len(fake.requests_for("right")) == 12  # every item asked, and paid for, once


def test_a_budget_stops_cleanly_with_a_partial_report_and_the_next_run_continues(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 10)
    # each item costs 36 + 15 = 51 microdollars on `wrong`: the cap lands after the third item
    args = ("bench", str(suite), "--systems", "direct:wrong", "--config", str(config), "--json", "--concurrency", "1")
    result = run_stiva(*args, "--budget-usd", "0.00015", home=stiva_home)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "stopped" and report["stop_reason"].startswith("budget")
    assert report["systems"][0]["n"] == 3
    assert "stopped: budget" in result.stderr and "run the same command again" in result.stderr
    result = run_stiva(*args, home=stiva_home)
    report = json.loads(result.stdout)
    assert report["status"] == "finished" and report["systems"][0]["n"] == 10
    assert len(fake.requests_for("wrong")) == 10


async def test_fresh_with_a_limit_redoes_only_those_items_and_keeps_the_rest(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 4)
    runtime, runner = await _runner(config, suite, "direct:right")
    try:
        await runner.run()
        assert len(fake.requests_for("right")) == 4
        again = BenchRunner(runtime, load_suite(str(suite)), parse_systems(["direct:right"]), limit=2, fresh=True)
        await again.run()
        kept = {r.item_id for r in runtime.store.bench_items(runner.bench_id) if r.status == "graded"}
    finally:
        await runtime.aclose()
    assert len(fake.requests_for("right")) == 4 + 2  # the two it redoes, nothing else
    assert kept == {"add-1", "add-2", "add-3", "add-4"}  # --fresh --limit 2 deleted nothing outside its two


def test_the_live_view_clock_ticks_between_items():
    import io

    from rich.console import Console

    from stiva_tui.bench.runner import BenchProgress, SystemProgress
    from stiva_tui.cli.view import ProgressView

    out = io.StringIO()
    view = ProgressView(Console(file=out, force_terminal=True, width=100))
    progress = BenchProgress("b1", "s", {"direct:x": SystemProgress("direct:x", 4)}, time.monotonic())
    with view:
        view.update(progress)  # one update, then nothing finishes for 2.3 s
        time.sleep(2.3)
    drawn = out.getvalue()
    assert "0/4 items · 0.0s" in drawn and re.search(r"0/4 items · 2\.\ds", drawn)


def test_out_never_writes_through_a_planted_symlink(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "shared"
    out.mkdir()
    for name in ("report.json", "report.md", "frontier.png"):
        (out / name).symlink_to(victim)
    result = run_stiva(
        "bench",
        str(write_suite(tmp_path / "s.jsonl", 2)),
        "--systems",
        "direct:right",
        "--config",
        str(config),
        "--out",
        str(out),
        home=stiva_home,
    )
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "precious"
    assert not any((out / n).is_symlink() for n in ("report.json", "report.md", "frontier.png"))
    assert json.loads((out / "report.json").read_text())["suite"] == "s"
    assert sorted(p.name for p in out.iterdir()) == ["frontier.png", "report.json", "report.md"]


def test_bad_suites_and_systems_are_one_line_errors(tmp_path, stiva_home):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "Q", "grader": "numeric", "answer": "x"}\n')
    for args in ((str(bad),), ("no-such-suite",), ("basic", "--systems", "nope")):
        result = run_stiva("bench", *args, home=stiva_home)
        assert result.returncode == 2, result
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    listing = run_stiva("bench", "--list", home=stiva_home)
    assert "basic" in listing.stdout and "gpqa" in listing.stdout and "offline" in listing.stdout


async def test_a_grader_that_breaks_makes_an_error_item_and_the_bench_goes_on(fake, tmp_path, stiva_home, monkeypatch):
    import stiva_tui.bench.runner as runner_module

    script_pool(fake)
    real = runner_module.grade_async

    async def flaky(item, answer, **options):
        if item.id == "add-2":
            raise RuntimeError("grader crashed")
        return await real(item, answer, **options)

    monkeypatch.setattr(runner_module, "grade_async", flaky)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    runtime, runner = await _runner(config, write_suite(tmp_path / "s.jsonl", 3), "direct:right")
    try:
        outcome = await runner.run()
    finally:
        await runtime.aclose()
    by_id = {r.item_id: r for r in outcome.records}
    assert outcome.status == "finished"
    assert by_id["add-2"].status == "error" and "grader crashed" in by_id["add-2"].error
    assert by_id["add-1"].correct and by_id["add-3"].correct


def test_an_adapter_system_runs_on_the_base_it_was_trained_on(tmp_path):
    from stiva_tui.runtime.modes import ConductorVariant

    def adapter(name: str, base: str | None) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "adapter_config.json").write_text("{}")
        if base is not None:
            (folder / "stiva_adapter.json").write_text(json.dumps({"base": base}))
        return folder

    embedded, local, plain = adapter("e", "embedded"), adapter("q", "Qwen/Qwen2.5-7B-Instruct"), adapter("p", None)
    (e, q, p) = parse_systems([f"adapter:{embedded}", f"adapter:{local}", f"adapter:{plain}"])
    assert e.mode.variant == ConductorVariant(backend="embedded", adapter=str(embedded))
    assert q.mode.variant == ConductorVariant(backend="local", model="Qwen/Qwen2.5-7B-Instruct", adapter=str(local))
    assert p.mode.variant == ConductorVariant(adapter=str(plain))  # the configured conductor


def test_auto_falling_back_to_the_embedded_conductor_keeps_only_an_adapter_made_for_it(tmp_path):
    from stiva_tui.conductor.embedded import EmbeddedConductor
    from stiva_tui.config import ConductorConfig

    for base, kept in (("embedded", True), ("Qwen/Qwen2.5-7B-Instruct", False)):
        folder = tmp_path / base.replace("/", "_")
        folder.mkdir()
        (folder / "stiva_adapter.json").write_text(json.dumps({"base": base}))
        conductor = EmbeddedConductor.from_config(ConductorConfig(backend="auto", adapter=str(folder)))
        assert (conductor.adapter == str(folder)) is kept


def test_the_bootstrap_interval_of_a_skewed_cost_stays_inside_what_costs_can_be():
    import statistics

    from stiva_tui.bench.report import bootstrap_mean

    costs = [0.0] * 22 + [0.001, 0.0012]  # a free model answered most questions, a dear one two
    mean = statistics.fmean(costs)
    normal_low = mean - 1.96 * statistics.stdev(costs) / len(costs) ** 0.5
    assert normal_low < 0  # what preferences.json printed before: a cost interval below zero
    got, low, high = bootstrap_mean(costs)
    assert got == pytest.approx(mean) and 0.0 <= low < mean < high <= max(costs)
    assert bootstrap_mean(costs) == (got, low, high)  # seeded: a report is reproduced exactly
    assert bootstrap_mean([]) == (0.0, 0.0, 0.0) and bootstrap_mean([0.5]) == (0.5, 0.5, 0.5)


def test_the_paired_bootstrap_sees_a_difference_that_overlapping_intervals_hide():
    import random

    from stiva_tui.bench.report import bootstrap_difference, bootstrap_mean

    rng = random.Random(3)
    a = [rng.uniform(0.0, 1.0) for _ in range(40)]  # questions differ far more than the systems do
    b = [x + 0.02 for x in a]
    _, a_low, a_high = bootstrap_mean(a)
    _, b_low, b_high = bootstrap_mean(b)
    assert b_low < a_high  # each mean's interval overlaps the other's: no verdict that way
    diff, low, high = bootstrap_difference(list(zip(a, b)))
    assert diff == pytest.approx(0.02) and low > 0 and high < 0.03
    # and it does not invent one: the same values, shuffled against each other, straddle zero
    shuffled = b[:]
    random.Random(4).shuffle(shuffled)
    _, low, high = bootstrap_difference(list(zip(a, [x - 0.02 for x in shuffled])))
    assert low < 0 < high


def test_grading_a_pool_that_another_bench_is_grading_fails_with_its_pid(fake, tmp_path, stiva_home):
    """`stiva train --method graded-dpo` runs the same bench `stiva bench --systems direct:*` does: while
    one process runs it, the grading refuses with that process's pid, as a failure (exit 1), not a
    usage error, and asks nothing."""
    # each call takes 20 s: the first bench asks one item at a time, so however slowly the second
    # process starts on busy cores, the first cannot have asked more than one more meanwhile
    script_pool(fake, latency_s=20)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 12)
    env = {**os.environ, "STIVA_HOME": str(stiva_home)}
    first = subprocess.Popen(
        [STIVA, "bench", str(suite), "--systems", "direct:*", "--config", str(config), "--json", "--concurrency", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    wait_until_a_bench_runs(stiva_home / "data" / "stiva.db")
    asked = len(fake.requests_for("right")) + len(fake.requests_for("wrong"))
    second = subprocess.run(
        [
            STIVA,
            "--config",
            str(config),
            "train",
            str(suite),
            "--method",
            "graded-dpo",
            "--base",
            "embedded",
            "--out",
            str(tmp_path / "adapter"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    still_running = first.poll() is None
    first.kill()
    first.communicate(timeout=60)
    assert still_running, "the bench ended before the grading started: make its items slower"
    assert second.returncode == 1, second.stderr
    assert f"already running in process {first.pid}" in second.stderr and "Traceback" not in second.stderr
    assert len(fake.requests_for("right")) + len(fake.requests_for("wrong")) <= asked + 2  # the bench's own
    assert not (tmp_path / "adapter").exists()
