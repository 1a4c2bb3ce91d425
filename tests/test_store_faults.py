"""The history on broken disks, with real parts: the real `stiva` command (in a process of its own
where the disk is broken for that process alone), real SQLite files, a file size limit
(RLIMIT_FSIZE) for a full disk, a read-only bind mount (or, without root, a
read-only folder), and byte surgery on a real page for a damaged file."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest
from test_bench_runner import script_pool, write_config, write_suite

from tests.support.cli import Result, run_stiva, stiva


def said(result: Result | subprocess.CompletedProcess) -> list[str]:
    """The lines the command wrote to stderr that are not the report's pointer."""
    return [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("bench ")]


def graded(database: Path) -> set[str]:
    with closing(sqlite3.connect(database)) as conn:
        return {row[0] for row in conn.execute("SELECT item_id FROM bench_items WHERE status = 'graded'")}


def test_a_full_disk_stops_the_bench_in_one_line_keeps_what_was_graded_and_reads_still_work(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 30)
    assert run_stiva("history", home=stiva_home).returncode == 0  # the history exists, at its size
    database = stiva_home / "data" / "stiva.db"
    # room for the bench's first few items in the WAL, and no more
    room = database.stat().st_size + 33_001
    result = stiva(
        "bench",
        str(suite),
        "--systems",
        "direct:right",
        "--config",
        str(config),
        "--json",
        "--concurrency",
        "1",
        "--out",
        str(tmp_path / "out"),
        home=stiva_home,
        fsize=room,
    )
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 1, result.stderr
    lines = said(result)
    assert len(lines) == 1 and lines[0].startswith("stiva: the disk is full") and str(database) in lines[0], lines
    stored = graded(database)
    assert stored, "the bench got no item in before the disk filled up: give it more room"
    # nothing graded is lost: the report holds every item the history kept (and the one it could not)
    report = json.loads(result.stdout)
    reported = {item["id"] for item in report["items"] if item["status"] == "graded"}
    assert stored <= reported and len(reported) <= len(stored) + 1
    assert len(fake.requests_for("right")) < 30  # it stopped at the full disk, not after asking all
    # reads work while the disk stays full
    listed = stiva("history", "--json", home=stiva_home, fsize=room)
    assert listed.returncode == 0, listed.stderr
    with closing(sqlite3.connect(database)) as conn:
        ((runs,),) = conn.execute("SELECT count(*) FROM runs WHERE source = 'bench'").fetchall()
    assert runs >= 1 and sum(run["source"] == "bench" for run in json.loads(listed.stdout)) == runs
    # once there is room again, the bench continues where it stopped
    again = run_stiva(
        "bench", str(suite), "--systems", "direct:right", "--config", str(config), "--json", home=stiva_home
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["systems"][0]["correct"] == 30
    # and reads work even where SQLite cannot make the 32 KiB -shm file it reads a WAL database with
    assert not (database.parent / "stiva.db-shm").exists()  # the bench closed the history cleanly
    tight = stiva("history", "--json", "--limit", "100", home=stiva_home, fsize=16 * 1024)
    assert tight.returncode == 0, tight.stderr
    with closing(sqlite3.connect(database)) as conn:
        ((runs,),) = conn.execute("SELECT count(*) FROM runs WHERE source = 'bench'").fetchall()
    assert runs >= 29 and sum(run["source"] == "bench" for run in json.loads(tight.stdout)) == runs
    assert "disk is full" in tight.stderr and "Traceback" not in tight.stderr


def _read_only(folder: Path) -> tuple[str, ...] | None:
    """A command prefix that runs the command with `folder` read-only: a read-only bind mount in
    a mount namespace of its own (as root; root ignores mode bits), else a folder without write
    permission (for anyone else). None when neither is possible here."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        for child in folder.iterdir():
            if child.is_file():
                child.chmod(0o444)
        return ()
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
    probe = subprocess.run(
        [unshare, "-m", "sh", "-c", script, str(folder), "touch", str(folder / "probe")], capture_output=True, text=True
    )
    if "Read-only file system" not in probe.stderr:
        return None
    return (unshare, "-m", "sh", "-c", script, str(folder))


def test_a_read_only_history_is_called_read_only_and_still_read(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 3)
    first = run_stiva(
        "bench", str(suite), "--systems", "direct:right", "--config", str(config), "--json", home=stiva_home
    )
    assert first.returncode == 0, first.stderr
    prefix = _read_only(stiva_home / "data")
    if prefix is None:
        pytest.skip("no way to make a folder read-only here (no unshare as root)")
    listed = stiva("history", "--json", home=stiva_home, prefix=prefix)
    assert listed.returncode == 0, listed.stderr
    assert sum(run["source"] == "bench" for run in json.loads(listed.stdout)) == 3
    assert "read-only" in listed.stderr and "not a Stiva history" not in listed.stderr
    shown = stiva("history", "show", json.loads(listed.stdout)[0]["id"], home=stiva_home, prefix=prefix)
    assert shown.returncode == 0 and "What is" in shown.stdout, shown.stderr
    bench = stiva(
        "bench",
        str(suite),
        "--systems",
        "direct:right",
        "--config",
        str(config),
        "--fresh",
        home=stiva_home,
        prefix=prefix,
    )
    assert bench.returncode == 1
    lines = said(bench)
    assert len(lines) == 1 and "is read-only" in lines[0], lines
    assert "move it away" not in bench.stderr and "not a Stiva history" not in bench.stderr
    assert len(fake.requests_for("right")) == 3  # nothing was asked that could not be kept


def _smash_root_page(database: Path, table: str) -> None:
    """Overwrite the first b-tree page of `table` with garbage, as a bad sector or a torn write would."""
    with closing(sqlite3.connect(database)) as conn:
        ((root,),) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchall()
        ((page_size,),) = conn.execute("PRAGMA page_size").fetchall()
    with database.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(bytes([0xA5]) * page_size)


def test_a_damaged_page_stops_the_bench_in_one_line_that_points_to_sqlite_recover(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    first = run_stiva(
        "bench",
        str(write_suite(tmp_path / "a.jsonl", 3)),
        "--systems",
        "direct:right",
        "--config",
        str(config),
        "--json",
        home=stiva_home,
    )
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["items"][0]["run_id"]
    database = stiva_home / "data" / "stiva.db"
    _smash_root_page(database, "steps")
    suite = tmp_path / "b.jsonl"
    suite.write_text(
        "".join(
            json.dumps({"id": f"b-{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i), "grader": "numeric"})
            + "\n"
            for i in range(1, 6)
        )
    )
    before = len(fake.requests)
    result = run_stiva(
        "bench",
        str(suite),
        "--systems",
        "direct:right",
        "--config",
        str(config),
        "--json",
        "--concurrency",
        "1",
        home=stiva_home,
    )
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 1, result.stderr
    lines = said(result)
    assert len(lines) == 1 and "is damaged" in lines[0] and f"sqlite3 {database} .recover" in lines[0], lines
    assert len(fake.requests) - before == 1  # stopped at the first run it could not record
    # reading what the damage reaches is one line too
    shown = run_stiva("history", "show", run_id, home=stiva_home)
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1 and ".recover" in shown.stderr


def test_a_full_disk_while_grading_the_pool_stops_stiva_train_in_one_line(fake, tmp_path, stiva_home):
    """`stiva train --method graded-dpo` benches the pool first: a full disk under that bench is a
    failure (exit 1) said in the store's one line, not a usage error and not a traceback."""
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 30)
    assert run_stiva("history", home=stiva_home).returncode == 0
    database = stiva_home / "data" / "stiva.db"
    room = database.stat().st_size + 33_001
    result = stiva(
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
        home=stiva_home,
        fsize=room,
    )
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 1, result.stderr
    lines = said(result)
    assert len(lines) == 1 and lines[0].startswith("stiva: the disk is full") and str(database) in lines[0], lines
    assert graded(database)  # what was graded before the disk filled is kept
    assert not (tmp_path / "adapter").exists()
