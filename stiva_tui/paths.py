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
    models too): in the data dir, or (a path too long for a socket) in a private folder of this
    user's under the temporary folder, named after the data dir."""
    import hashlib
    import tempfile

    data = data_dir()
    path = data / f"ask-worker-{protocol}.sock"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(data.resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"stiva-{os.geteuid()}" / f"ask-{digest}-{protocol}.sock"


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
