"""Where Stiva keeps its config, data and cache.

`STIVA_HOME` moves all three under one folder (tests use it); otherwise the platform's
directories (platformdirs) are used.
"""

from __future__ import annotations

import os
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


def model_cache_dir() -> Path:
    """Converted model weights. `STIVA_MODEL_CACHE` shares them between homes (tests do)."""
    value = os.environ.get("STIVA_MODEL_CACHE")
    return Path(value).expanduser() if value else cache_dir() / "models"
