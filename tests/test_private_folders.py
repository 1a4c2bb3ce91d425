"""The warm worker's private folder under the temporary folder is never followed through a link
(issue 56, item 7).

Where the data dir's path is too long for a socket, the worker's socket, lock and log go in
`$TMPDIR/stiva-<uid>`, which any other user may plant first: a link to a folder of theirs or to
/etc, a folder of their own, one open to all. Each is left exactly as it was, and a fresh
`mkdtemp` folder is used instead (and found again by the next process, through the data dir).
The last tests start the real worker through `stiva ask` with each of them planted.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

import pytest

from stiva_tui import paths
from tests.support.cli import run_stiva
from tests.support.other_user import LOGIN_UID, needs_root
from tests.support.warm import warm_pool

PLANTS = ["link", "others_folder", "open_folder", "file"]


@pytest.fixture
def temp_base(monkeypatch):
    """$TMPDIR for the test: a folder of its own, sticky and open to all, as /tmp is, and as short
    a path (a socket's path inside it must fit)."""
    base = Path(tempfile.mkdtemp(prefix="stv-", dir="/tmp"))
    os.chmod(base, 0o1777)
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def long_home(tmp_path, monkeypatch) -> Path:
    """A STIVA_HOME whose data dir is too long a path for a socket: the fallback is taken."""
    home = tmp_path / ("a-long-home-" + "x" * 90)
    home.mkdir()
    monkeypatch.setenv("STIVA_HOME", str(home))
    assert len(os.fsencode(home / "data" / "ask-worker-1.sock")) > paths.MAX_SOCKET_PATH
    return home


def what(path: Path) -> tuple:
    """Everything a test checks is unchanged about `path` (not following it) and what it holds."""
    info = os.lstat(path)
    inside = ()
    if stat.S_ISDIR(info.st_mode):
        inside = tuple(sorted((p.name, p.read_bytes(), os.lstat(p).st_mode) for p in path.iterdir()))
    target = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
    return info.st_mode, info.st_uid, info.st_gid, target, inside


def plant(kind: str, standard: Path, victim: Path) -> list[Path]:
    """What another user leaves at `standard`; returns every path whose state must not change."""
    victim.mkdir()
    os.chmod(victim, 0o755)
    (victim / "keep").write_text("theirs")
    if kind == "link":
        standard.symlink_to(victim)
    elif kind == "others_folder":
        needs_root()
        standard.mkdir()
        os.chmod(standard, 0o755)
        os.chown(standard, LOGIN_UID, LOGIN_UID)
    elif kind == "open_folder":
        standard.mkdir()
        os.chmod(standard, 0o777)
    else:
        standard.write_text("a file")
    return [standard, victim]


def assert_fresh(folder: Path, base: Path) -> None:
    info = os.lstat(folder)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid(), folder
    assert stat.S_IMODE(info.st_mode) == 0o700 and folder.parent == base, folder
    assert folder.name.startswith(f"stiva-{os.geteuid()}-"), folder


@pytest.mark.parametrize("kind", PLANTS)
def test_a_planted_folder_is_left_as_it_is_and_a_fresh_one_is_used(kind, temp_base, long_home, tmp_path):
    standard = temp_base / f"stiva-{os.geteuid()}"
    watched = plant(kind, standard, tmp_path / "victim")
    before = [what(p) for p in watched]
    folder = paths.runtime_dir()
    assert folder != standard
    assert_fresh(folder, temp_base)
    assert [what(p) for p in watched] == before
    # the next process finds the same folder: its name is kept in the data dir
    assert paths.runtime_dir() == folder
    assert (long_home / "data" / paths.RUNTIME_POINTER).read_text() == str(folder)
    sock = paths.warm_socket_path(7)
    assert sock.parent == folder and len(os.fsencode(sock)) <= paths.MAX_SOCKET_PATH


def test_a_missing_folder_is_made_private_and_a_good_one_used_again(temp_base, long_home):
    standard = temp_base / f"stiva-{os.geteuid()}"
    old = os.umask(0o077 | 0o700)  # a umask that would take the owner's own bits too
    try:
        assert paths.runtime_dir() == standard
    finally:
        os.umask(old)
    info = os.lstat(standard)
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    assert paths.runtime_dir() == standard and not (long_home / "data" / paths.RUNTIME_POINTER).exists()


def test_a_kept_folder_that_was_swapped_for_a_link_is_not_used(temp_base, long_home, tmp_path):
    standard = temp_base / f"stiva-{os.geteuid()}"
    standard.symlink_to(tmp_path)
    first = paths.runtime_dir()
    victim = tmp_path / "victim"
    victim.mkdir()
    os.chmod(victim, 0o755)
    os.rmdir(first)
    first.symlink_to(victim)  # the name the data dir keeps, now a link
    second = paths.runtime_dir()
    assert second not in (first, standard)
    assert_fresh(second, temp_base)
    assert stat.S_IMODE(os.lstat(victim).st_mode) == 0o755 and not any(victim.iterdir())
    assert paths.runtime_dir() == second


def test_a_pointer_to_a_folder_elsewhere_is_not_used(temp_base, long_home, tmp_path):
    (temp_base / f"stiva-{os.geteuid()}").symlink_to(tmp_path)
    elsewhere = tmp_path / f"stiva-{os.geteuid()}-elsewhere"
    elsewhere.mkdir(mode=0o700)
    (long_home / "data").mkdir()
    (long_home / "data" / paths.RUNTIME_POINTER).write_text(str(elsewhere))
    folder = paths.runtime_dir()
    assert folder != elsewhere
    assert_fresh(folder, temp_base)


# --- the real worker -------------------------------------------------------------------------------


def _status() -> dict | None:
    from stiva_tui.cli import warm

    return asyncio.run(warm.worker_status())


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                return
        except ChildProcessError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)


@pytest.mark.parametrize("kind", ["link", "others_folder"])
def test_the_worker_starts_in_a_fresh_folder_and_touches_nothing_planted(
    kind, temp_base, long_home, tmp_path, fake, monkeypatch
):
    monkeypatch.delenv("STIVA_NO_WARM", raising=False)
    config = warm_pool(fake, tmp_path / "c.toml")
    standard = temp_base / f"stiva-{os.geteuid()}"
    watched = plant(kind, standard, tmp_path / "victim")
    before = [what(p) for p in watched]
    result = run_stiva("ask", "What is six times seven?", "--config", str(config), home=long_home)
    found = _status()
    try:
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "forty-two"
        assert found is not None and found["served"] == 1, "the warm worker did not start or did not answer"
        from stiva_tui.cli.warm import socket_path

        sock = socket_path()
        assert sock.parent != standard
        assert_fresh(sock.parent, temp_base)
        names = {p.name for p in sock.parent.iterdir()}
        assert any(name.endswith(".sock") for name in names) and any(name.endswith(".lock") for name in names)
        assert [what(p) for p in watched] == before, "the planted folder or what it leads to changed"
    finally:
        if found is not None:
            _stop(found["pid"])
