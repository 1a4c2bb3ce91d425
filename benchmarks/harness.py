"""The benchmarks' harness: a temporary home, the real `stiva` and its argument lists, one machine
record, and saving JSON.

The scripts live in two folders: `benchmarks/perf/` (speed, latency, memory) and
`benchmarks/experiments/` (learning and routing). Run one from the repository root as a module,
`python -m benchmarks.perf.NAME` or `python -m benchmarks.experiments.NAME`: the root is then on
the import path, so the scripts import `stiva_tui`, `tests.support` (the helpers the tests use) and
this harness without editing `sys.path`. Each saves its figures beside itself, as JSON written by
`save_json` (or `update_json`) with a `"machine"` record from `machine()`.
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

__all__ = [
    "HERE",
    "ROOT",
    "STIVA",
    "cli_args",
    "machine",
    "save_json",
    "stiva",
    "stiva_env",
    "temporary_home",
    "update_json",
]


@contextlib.contextmanager
def temporary_home(prefix: str = "stiva-bench-") -> Iterator[Path]:
    """A fresh STIVA_HOME for one run, removed afterwards; pass it as `stiva(..., home=home)`."""
    with tempfile.TemporaryDirectory(prefix=prefix) as home:
        yield Path(home)


def stiva_env(home: Path, config: str | None = None) -> dict[str, str]:
    """The environment of a `stiva` run in `home` (its STIVA_HOME, made here), with `config` as the
    home's config.toml when given: no hub asked, and the embedded model's converted weights shared
    with the usual cache rather than converted again."""
    from stiva_tui import paths

    home.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (home / "config").mkdir(exist_ok=True)
        (home / "config" / "config.toml").write_text(config)
    return {
        **os.environ,
        "STIVA_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "STIVA_MODEL_CACHE": str(paths.model_cache_dir()),
    }


def cli_args(*words: object, **options: object) -> list[str]:
    """`stiva WORDS --option value ...` as an argument list, the one way the scripts build one.

    Each keyword is an option (`lora_r=8` is `--lora-r 8`): True is the flag alone, None and False
    leave it out, a list or tuple repeats it (`bench=[a, b]` is `--bench a --bench b`), anything
    else is its str(). Words and options keep the order given."""
    argv = [str(word) for word in words]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            for each in value:
                argv += [flag, str(each)]
        else:
            argv += [flag, str(value)]
    return argv


def machine() -> dict:
    """Where a figure was measured: platform, cores, Python and torch versions (torch not
    imported), and the 1-minute load average when the record was made (the cores are shared)."""
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
        "load_1min": round(os.getloadavg()[0], 2),
    }


def save_json(path: Path | str, figures: dict) -> Path:
    """`figures` at `path` (beside the script that measured them), indented, with a final newline;
    returns the path."""
    path = Path(path)
    path.write_text(json.dumps(figures, indent=2) + "\n")
    return path


def update_json(path: Path | str, key: str, figures: dict) -> Path:
    """`figures` under `key` of the JSON at `path`, its other keys kept (one file, several runs:
    "cpu" and "cuda"); returns the path."""
    path = Path(path)
    existing = json.loads(path.read_text()) if path.exists() else {}
    existing[key] = figures
    return save_json(path, existing)
