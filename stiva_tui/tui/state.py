"""Small UI state remembered between runs (the theme), in `paths.state_file()`. Never secrets."""

from __future__ import annotations

import json
import os
from typing import Any

from .. import paths
from ..core.reading import read_text


def load_state() -> dict[str, Any]:
    """The saved state; {} when there is none or it cannot be read (it is only a convenience)."""
    try:
        data = json.loads(read_text(paths.state_file(), 16 << 20))  # past it: a ValueError, so {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(**updates: Any) -> None:
    """Merge `updates` into the saved state (written atomically; failures are ignored)."""
    file = paths.state_file()
    data = {**load_state(), **updates}
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(tmp, file)
    except OSError:
        pass
