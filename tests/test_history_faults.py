"""`stiva ask` and every command that opens the history, on a history that fails: a full disk
(RLIMIT_FSIZE), a damaged file (garbage bytes, a truncated file, a smashed page), a file or folder
that cannot be written (an immutable file, a read-only bind mount), and the mode bits of what the
history creates. Real parts only: the real `stiva` command, real SQLite files, the fake provider on
127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
from contextlib import closing
from pathlib import Path

import pytest
from test_bench_runner import script_pool, write_config, write_suite
from test_store_faults import _read_only, _smash_root_page

from tests.support import procs
from tests.support.cli import Result, run_stiva, stiva

QUESTION = "What is 1 + 2?"
ANSWER = "The sum is 3."


def errors(result: Result | subprocess.CompletedProcess) -> list[str]:
    """The lines stderr says as `stiva: ...` (failures and notes), and any history log line."""
    return [
        line
        for line in result.stderr.splitlines()
        if line.startswith("stiva") or ("history" in line.lower() and "conductor:" not in line)
    ]


def assert_one_line(result: Result | subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 1, no traceback, one error line holding every needle, no conversation id offered."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = errors(result)
    assert len(lines) == 1, lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "--continue" not in result.stderr and "nobody heard" not in result.stderr
    return lines[0]


def ask(home: Path, config: Path, *extra: str, **process) -> Result | subprocess.CompletedProcess:
    """`stiva ask QUESTION`: in this process, or in one of its own where `process` breaks the disk
    for it alone (`fsize=`, `prefix=`)."""
    if process:
        return stiva("ask", QUESTION, "--config", str(config), *extra, home=home, **process)
    return run_stiva("ask", QUESTION, "--config", str(config), *extra, home=home)


def conversations(database: Path) -> set[str]:
    with closing(sqlite3.connect(database)) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM conversations")}


@pytest.fixture
def config(fake, tmp_path) -> Path:
    script_pool(fake)
    return write_config(tmp_path / "c.toml", fake.base_url)


# --- a full disk ----------------------------------------------------------------------------------


def test_a_full_disk_shows_the_answer_then_fails_in_one_line_and_offers_no_conversation(config, stiva_home):
    assert run_stiva("history", home=stiva_home).returncode == 0  # the history exists
    database = stiva_home / "data" / "stiva.db"
    before = conversations(database)
    # room for the 32 KiB -shm file SQLite reads a WAL database with, and for almost no WAL
    room = 32 * 1024 + 700
    result = ask(stiva_home, config, fsize=room)
    assert result.stdout.strip() == ANSWER  # the answer is shown
    line = assert_one_line(result, "the disk is full", str(database))
    assert "could not record" in line or "cannot be written" in line
    assert "history write failed" not in result.stderr and "subscriber" not in result.stderr
    # and --json still prints the run, with its answer, then the same one line
    as_json = ask(stiva_home, config, "--json", fsize=room)
    assert json.loads(as_json.stdout)["answer"] == ANSWER
    assert_one_line(as_json, "the disk is full")
    # with room again, an ask offers its conversation, and that conversation is on disk
    fine = ask(stiva_home, config)
    assert fine.returncode == 0, fine.stderr
    offered = fine.stderr.split("--continue ")[1].split()[0]
    assert offered in conversations(database) - before


# --- a damaged file -------------------------------------------------------------------------------


def _damage(database: Path, how: str, good: bytes) -> None:
    for name in ("stiva.db-wal", "stiva.db-shm"):
        (database.parent / name).unlink(missing_ok=True)
    if how == "garbage":
        database.write_bytes(bytes(range(256)) * 200)
    else:  # a file cut short, as a copy interrupted half-way leaves it
        database.write_bytes(good[: len(good) // 3])


@pytest.mark.parametrize("how", ["garbage", "truncated"])
def test_every_command_says_a_damaged_history_in_one_line_that_points_to_sqlite_recover(
    how, config, tmp_path, stiva_home
):
    assert ask(stiva_home, config).returncode == 0
    database = stiva_home / "data" / "stiva.db"
    good = database.read_bytes()
    suite = write_suite(tmp_path / "s.jsonl", 2)
    commands = {
        "ask": ("ask", QUESTION, "--config", str(config)),
        "ask --json": ("ask", QUESTION, "--config", str(config), "--json"),
        "history": ("history",),
        "history show": ("history", "show", "abcd1234"),
        "history conversations": ("history", "conversations"),
        "bench": ("bench", str(suite), "--systems", "direct:right", "--config", str(config)),
        "serve": ("serve", "--port", str(procs.free_port()), "--config", str(config)),
    }
    for name, command in commands.items():
        _damage(database, how, good)
        damaged = database.read_bytes()
        if name == "serve":  # a serve that missed the damage would serve on: a process, and a timeout
            result = stiva(*command, home=stiva_home, timeout=60)
        else:
            result = run_stiva(*command, home=stiva_home)
        assert "Traceback" not in result.stderr, (name, result.stderr[-3000:])
        assert result.returncode != 0, (name, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, (name, lines)
        assert str(database) in lines[0] and f"sqlite3 {database} .recover" in lines[0], (name, lines[0])
        assert database.read_bytes() == damaged, name  # left untouched


def test_a_damaged_page_met_while_asking_shows_the_answer_then_one_line(config, stiva_home):
    assert ask(stiva_home, config).returncode == 0
    database = stiva_home / "data" / "stiva.db"
    _smash_root_page(database, "runs")
    result = ask(stiva_home, config)
    assert result.stdout.strip() == ANSWER
    assert_one_line(result, "is damaged", f"sqlite3 {database} .recover")
    as_json = ask(stiva_home, config, "--json")
    assert json.loads(as_json.stdout)["answer"] == ANSWER
    assert_one_line(as_json, "is damaged")


async def test_the_app_says_a_damaged_history_with_the_recover_line(fake, stiva_home):
    from stiva_tui.tui import messages as msg
    from stiva_tui.tui.app import StivaApp
    from tests.support.tui import make_test_config, wait_for

    database = stiva_home / "data" / "stiva.db"
    database.parent.mkdir(parents=True)
    database.write_bytes(bytes(range(256)) * 200)
    app = StivaApp(make_test_config(fake))
    seen: list = []
    async with app.run_test(size=(140, 42), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, msg.StartupFailed) for m in seen), what="the failure")
    failed = next(m for m in seen if isinstance(m, msg.StartupFailed))
    assert str(database) in failed.error and f"sqlite3 {database} .recover" in failed.error


# --- a file or folder that cannot be written -----------------------------------------------------


def test_an_immutable_history_file_shows_the_answer_then_one_line(config, stiva_home):
    assert ask(stiva_home, config).returncode == 0
    database = stiva_home / "data" / "stiva.db"
    chattr = shutil.which("chattr")
    if (
        chattr is None
        or subprocess.run([chattr, "+i", str(database)], check=False, capture_output=True).returncode != 0
    ):
        pytest.skip("no chattr +i here (needs root and a file system that has the flag)")
    try:
        before = conversations(database)
        result = ask(stiva_home, config)
        assert result.stdout.strip() == ANSWER
        assert_one_line(result, "read-only", str(database))
        assert conversations(database) == before
    finally:
        subprocess.run([chattr, "-i", str(database)], check=True)


def test_a_read_only_history_folder_is_refused_in_one_line_before_anything_is_asked(config, fake, stiva_home):
    """A read-only folder is found as the history opens (SQLite cannot make the -shm file it
    reads a WAL database with): nothing is asked that could not be kept, and the line says why."""
    assert ask(stiva_home, config).returncode == 0
    prefix = _read_only(stiva_home / "data")
    if prefix is None:
        pytest.skip("no way to make a folder read-only here (no unshare as root)")
    asked = len(fake.requests)
    result = ask(stiva_home, config, prefix=prefix)
    assert result.stdout == ""
    assert_one_line(result, "read-only", str(stiva_home / "data"))
    assert len(fake.requests) == asked


# --- permissions ----------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_history_is_created_private_and_an_older_one_is_made_private(config, stiva_home):
    assert ask(stiva_home, config).returncode == 0, "fresh home"
    data = stiva_home / "data"
    database = data / "stiva.db"
    assert _mode(data) == 0o700
    assert _mode(database) == 0o600
    # the -wal and -shm files SQLite makes beside it are as private (it copies the file's mode)
    conn = sqlite3.connect(database)
    try:
        conn.execute("UPDATE conversations SET title = 'touched'")
        conn.commit()
        for name in ("stiva.db-wal", "stiva.db-shm"):
            assert _mode(data / name) == 0o600, name
    finally:
        conn.close()
    # a history an older Stiva left world-readable is made private when it is next opened
    os.chmod(data, 0o755)
    os.chmod(database, 0o644)
    assert run_stiva("history", home=stiva_home).returncode == 0
    assert _mode(data) == 0o700 and _mode(database) == 0o600


def test_an_sqlite_file_damaged_past_its_magic_is_called_damaged_and_another_file_is_left_as_it_was(tmp_path):
    from stiva_tui.store import CorruptError, Store, StoreError

    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64)  # a torn header page
    with pytest.raises(CorruptError, match=r"is damaged .*\.recover"):
        Store.open(damaged)
    # someone else's file, named by the caller: refused, its content and its mode kept
    notes = tmp_path / "notes.db"
    notes.write_text("not a database\n" * 100)
    notes.chmod(0o644)
    with pytest.raises(StoreError, match="not a Stiva history database") as refused:
        Store.open(notes)
    assert not isinstance(refused.value, CorruptError)
    assert _mode(notes) == 0o644 and notes.read_text() == "not a database\n" * 100


def test_a_history_at_a_path_the_caller_names_is_private_and_its_existing_folder_keeps_its_mode(tmp_path):
    from stiva_tui.store import Store

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with Store.open(shared / "new" / "h.db"):
        pass
    with Store.open(shared / "h.db"):
        pass
    assert _mode(shared / "new") == 0o700 and _mode(shared / "new" / "h.db") == 0o600
    assert _mode(shared) == 0o755 and _mode(shared / "h.db") == 0o600
