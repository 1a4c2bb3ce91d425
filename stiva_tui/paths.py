"""Where Stiva keeps its config, data and cache.

`STIVA_HOME` moves all three under one folder (tests use it); otherwise the platform's
directories (platformdirs) are used.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

APP_NAME = "stiva"


def _home() -> Path | None:
    value = os.environ.get("STIVA_HOME")
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    home = _home()
    if home is not None:
        return home / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    home = _home()
    if home is not None:
        return home / "data"
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME))


def cache_dir() -> Path:
    home = _home()
    if home is not None:
        return home / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME))


def config_file() -> Path:
    return config_dir() / "config.toml"


def database_file() -> Path:
    return data_dir() / "stiva.db"


def state_file() -> Path:
    """Small UI state remembered between runs (theme and similar), never secrets."""
    return data_dir() / "state.json"


MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux, 104 on macOS


def warm_socket_path(protocol: int) -> Path:
    """The warm worker's socket for its wire `protocol` (cli/warm.py; the app and the server use its
    models too): in the data dir, or (a path too long for a socket) in this user's private folder
    under the temporary folder (`runtime_dir`), named after the data dir."""
    import hashlib

    data = data_dir()
    path = data / f"ask-worker-{protocol}.sock"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(data.resolve())).hexdigest()[:16]
    return runtime_dir() / f"ask-{digest}-{protocol}.sock"


RUNTIME_POINTER = "runtime-dir"  # in the data dir: the fresh folder `runtime_dir` fell back to


def runtime_dir() -> Path:
    """This user's private folder under the temporary folder, for what a long data path cannot
    hold (a socket's path has ~100 bytes): `$TMPDIR/stiva-<uid>`, made with mode 0700 where it
    is missing. Another user may have planted something there first: one that is a link, not a
    folder, someone else's, or open to group or others is neither used nor changed (no chmod,
    nothing followed). A fresh `mkdtemp` folder is used then, its name kept in the data dir so
    that every process of this user finds the same one. Raises OSError when none can be had."""
    import tempfile

    base = Path(tempfile.gettempdir())
    standard = base / f"stiva-{os.geteuid()}"
    if own_private_folder(standard, make=True):
        return standard
    pointer = data_dir() / RUNTIME_POINTER
    kept = _kept_runtime_dir(pointer, base)
    if kept is not None:
        return kept
    fresh = Path(tempfile.mkdtemp(prefix=f"stiva-{os.geteuid()}-", dir=base))  # 0700, ours
    private_dir(pointer.parent)
    fd, name = tempfile.mkstemp(prefix=f".{RUNTIME_POINTER}-", dir=pointer.parent)  # 0600
    draft = Path(name)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(str(fresh))
    try:
        os.link(draft, pointer)  # the first process to fall back names the folder for all
    except FileExistsError:
        kept = _kept_runtime_dir(pointer, base)
        if kept is not None:  # another process of this user's was quicker
            os.unlink(draft)
            os.rmdir(fresh)
            return kept
        os.replace(draft, pointer)  # a stale name (its folder gone, or not private any more)
    else:
        os.unlink(draft)
    return fresh


def _kept_runtime_dir(pointer: Path, base: Path) -> Path | None:
    """The folder the data dir's pointer names, where it is still a private folder of this user's
    in the temporary folder; else None."""
    try:
        fd = os.open(pointer, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "r", encoding="utf-8") as handle:
            named = Path(handle.read(4096).strip())
    except (OSError, ValueError):
        return None
    if named.parent != base or not named.name.startswith(f"stiva-{os.geteuid()}-"):
        return None
    return named if own_private_folder(named, make=False) else None


def own_private_folder(folder: Path, *, make: bool) -> bool:
    """Whether `folder` is a folder (not a link to one) of this user's that nobody else may enter,
    making it (mode 0700) where it is missing and `make` is set. An existing one is only looked at,
    through a descriptor opened without following a link: never chmod-ed."""
    made = False
    if make:
        try:
            os.mkdir(folder, 0o700)
            made = True
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # a link (ELOOP), not a folder (ENOTDIR), gone, or not ours to open
        return False
    try:
        info = os.fstat(fd)
        if made and stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)  # the one just made: the umask took owner bits away
            info = os.fstat(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o077


def model_cache_dir() -> Path:
    """Converted model weights. `STIVA_MODEL_CACHE` shares them between homes (tests do)."""
    value = os.environ.get("STIVA_MODEL_CACHE")
    return Path(value).expanduser() if value else cache_dir() / "models"


# --- private files --------------------------------------------------------------------------------
# The history holds every question, answer and provider error the user ever saw: it is kept as
# the keys file is, mode 0600 in a folder of mode 0700, whatever the umask.


def private_dir(folder: Path, *, tighten: bool = False) -> None:
    """Create `folder` (and its parents) where missing, `folder` itself with mode 0700. With
    `tighten` (a folder that is Stiva's own, such as `data_dir()`), an existing one loses its
    group and other permissions too. Raises OSError when it cannot be created."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if tighten:
        private_mode(folder)


def private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 where it is missing (SQLite gives the -wal and -shm files
    beside a database its mode); an existing one is left as it is (`private_mode` tightens it).
    Where it cannot be created (a read-only folder), nothing happens: opening it then says why."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return
    os.close(fd)


def private_mode(path: Path) -> None:
    """Take group and other permissions off `path` where it has any and this user owns it (a
    read-only file system or someone else's file is left as it is)."""
    try:
        info = os.stat(path)
        if info.st_mode & 0o077 and info.st_uid == os.geteuid():
            os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)
    except (OSError, AttributeError):  # AttributeError: no geteuid (Windows), where modes mean little
        pass
