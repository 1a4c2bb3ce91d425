"""The benchmarks' harness: a temporary home, the real `stiva`, one machine record, and saving JSON.

Run a benchmark from the repository root as a module, `python -m benchmarks.NAME`: the root is then on
the import path, so the scripts import `stiva_tui`, `tests.support` (the helpers the tests use) and
this harness without editing `sys.path`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from tests.support.cli import ROOT, STIVA, stiva

HERE = Path(__file__).resolve().parent

__all__ = ["HERE", "ROOT", "STIVA", "machine", "save_json", "stiva", "temporary_home"]


@contextlib.contextmanager
def temporary_home(prefix: str = "stiva-bench-") -> Iterator[Path]:
    """A fresh STIVA_HOME for one run, removed afterwards; pass it as `stiva(..., home=home)`."""
    with tempfile.TemporaryDirectory(prefix=prefix) as home:
        yield Path(home)


def machine() -> dict:
    """Where a figure was measured: platform, cores, Python and torch versions (torch not imported)."""
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = None
    return {
        "platform": platform.platform(),
        "arch": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch,
    }


def save_json(name: str, figures: dict) -> Path:
    """`benchmarks/NAME.json`, indented, with a final newline; returns its path."""
    path = HERE / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2) + "\n")
    return path
