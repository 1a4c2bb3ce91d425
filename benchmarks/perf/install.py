"""What an install costs, run by hand: `python -m benchmarks.perf.install` (saves install.json beside itself).

Each install goes into a fresh virtual environment in a temporary folder, removed afterwards (one
download cache is shared by the installs of a run, and removed with it). For each: the venv's size
on disk (`du`), what the install added to an empty venv, the number of distributions pip installed,
which torch build resolved, and what the heaviest distributions and the ones named in WATCHED take
(the files their RECORD lists).

The installs:

- `before:chat`, `before:test`: the project as committed at BEFORE (`git archive`), `pip install .`
  and `.[test]`: what a chat user and CI got before training became an extra.
- `chat`, `gpu`, `train`, `test`: this tree, `pip install .`, `.[gpu]`, `.[train]`, `.[test]`.
  `gpu` is the chat install with xgrammar, the grammar engine of a local conductor on a GPU, which
  pulls triton (every xgrammar release requires it on Linux x86_64): `chat` leaves both out.
- `chat-cuda` (with `--cuda`, several GB downloaded): this tree from PyPI alone, `.[gpu]`, the way stock
  pip resolves `torch==2.13.0` on Linux: the CUDA build and its `nvidia-*` libraries.

A saved `chat-no-triton` row (chat with triton uninstalled afterwards, from before xgrammar became
the `gpu` extra) is kept as measured; no run makes it now, since `chat` itself has no triton.
Beside each run's `venv_gb` (the venv on disk, pip included), `derived.added_gb` says what the
install added to an empty venv: a pipx venv, whose pip is shared, costs about that.

The CPU installs use pip as configured on this machine: PyPI plus a local folder holding
torch's `+cpu` wheel, which stands for PyTorch's CPU index (`--extra-index-url
https://download.pytorch.org/whl/cpu`): either way a `2.13.0+cpu` wheel sorts above PyPI's `2.13.0`
and wins. `chat-cuda` sets pip's configuration aside (PIP_CONFIG_FILE=/dev/null, no find-links).

    python -m benchmarks.perf.install [--only NAME ...] [--cuda] [--before REV] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import ROOT, machine, save_json

HERE = Path(__file__).resolve().parent

BEFORE = "fde0065"  # the last commit with trl in the default install
WATCHED = ("torch", "triton", "trl", "datasets", "pyarrow", "pandas", "xgrammar", "transformers", "bitsandbytes")
TOP = 15

# Run by the venv's own python: every distribution's size on disk, from its RECORD.
SIZES = r"""
import json, os
from importlib import metadata
out = {}
for dist in metadata.distributions():
    total = 0
    for file in dist.files or ():
        path = file.locate()
        try:
            total += os.lstat(path).st_size
        except OSError:
            pass
    out[dist.metadata["Name"]] = [dist.version, total]
print(json.dumps(out))
"""


def du(path: Path) -> int:
    """Bytes on disk, as `du -s` counts them."""
    return int(subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True,
                              check=True).stdout.split()[0])  # fmt: skip


def project_at(rev: str, into: Path) -> Path:
    """The project as committed at `rev`, unpacked into `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def install(work: Path, name: str, target: str, *, pypi_only: bool, cache: Path) -> dict:
    venv = work / name.replace(":", "-")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    empty = du(venv)
    env = {**os.environ, "PIP_CACHE_DIR": str(cache)}
    if pypi_only:  # stock pip: PyPI only, no local wheels, no constraints
        env.pop("PIP_FIND_LINKS", None)
        env["PIP_CONFIG_FILE"] = os.devnull
        env["PIP_NO_CACHE_DIR"] = "1"  # several GB: not kept for the CPU installs after
    report = work / f"{venv.name}.report.json"
    print(f"$ pip install {target}  ({name})", flush=True)
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--report", str(report), target],
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"{name}: pip install failed")
    installed = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    result = _measure(venv, python, empty)
    result.update(target=target, packages=len(installed), pip_s=round(seconds, 1), pypi_only=pypi_only)
    result["installed"] = sorted(installed, key=str.lower)
    return result


def _measure(venv: Path, python: str, empty: int) -> dict:
    sizes = json.loads(subprocess.run([python, "-c", SIZES], capture_output=True, text=True, check=True).stdout)
    torch = sizes.get("torch", [None])[0]
    nvidia = {k: v for k, v in sizes.items() if k.lower().startswith(("nvidia-", "cuda-"))}
    heaviest = sorted(sizes.items(), key=lambda kv: -kv[1][1])[:TOP]
    total = du(venv)
    return {
        "venv_bytes": total,
        "added_bytes": total - empty,
        "venv_gb": round(total / 1e9, 2),
        "torch": torch,
        "torch_build": None if torch is None else ("cpu" if "+cpu" in torch else "cuda" if nvidia else torch),
        "nvidia_cuda_packages": len(nvidia),
        "nvidia_cuda_mb": round(sum(size for _, size in nvidia.values()) / 1e6),
        "watched_mb": {name: round(sizes[name][1] / 1e6, 1) for name in WATCHED if name in sizes},
        "heaviest_mb": {name: round(size / 1e6, 1) for name, (_, size) in heaviest},
        "distributions": {name: size for name, (_, size) in sorted(sizes.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="run only these installs (repeatable)")
    parser.add_argument("--cuda", action="store_true", help="also the CUDA install from PyPI (several GB)")
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with (default {BEFORE})")
    parser.add_argument("--keep", action="store_true", help="keep the venvs (prints where)")
    args = parser.parse_args()
    wanted = args.only or ["before:chat", "before:test", "chat", "gpu", "train", "test"]
    if args.cuda and not args.only:
        wanted.append("chat-cuda")
    out = HERE / "install.json"
    figures = json.loads(out.read_text()) if out.exists() else {}
    figures.setdefault("installs", {})
    work = Path(tempfile.mkdtemp(prefix="stiva-install-"))
    cache = work / "pip-cache"
    try:
        before = None
        if any(name.startswith("before:") for name in wanted):
            before = project_at(args.before, work / "before-tree")
        targets = {
            "before:chat": (str(before), False),
            "before:test": (f"{before}[test]", False),
            "chat": (str(ROOT), False),
            "gpu": (f"{ROOT}[gpu]", False),
            "train": (f"{ROOT}[train]", False),
            "test": (f"{ROOT}[test]", False),
            "chat-cuda": (f"{ROOT}[gpu]", True),
        }
        runs = figures["installs"]
        unknown = [name for name in wanted if name not in targets]
        if unknown:
            raise SystemExit(f"unknown install {', '.join(unknown)}; choose from {', '.join(targets)}")
        for name in wanted:
            target, pypi_only = targets[name]
            runs[name] = install(work, name, target, pypi_only=pypi_only, cache=cache)
            shutil.rmtree(work / name.replace(":", "-"))
            run = runs[name]
            print(f"  {name}: {run['venv_gb']} GB, {run['packages']} packages, torch {run['torch']}", flush=True)
            figures.update(before=args.before, machine=machine())
            _derive(figures)
            save_json(out, figures)
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"saved {out}")


def _derive(figures: dict) -> None:
    """What each extra and each leaving-out costs, in MB, from the installs measured."""
    runs = figures["installs"]

    def mb(a: str, b: str) -> float | None:
        if a in runs and b in runs:
            return round((runs[a]["venv_bytes"] - runs[b]["venv_bytes"]) / 1e6)
        return None

    def only_in(a: str, b: str) -> dict | None:
        if a in runs and b in runs:
            extra = set(runs[a]["distributions"]) - set(runs[b]["distributions"])
            sizes = {name: round(runs[a]["distributions"][name] / 1e6, 1) for name in extra}
            return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))
        return None

    figures["derived"] = {
        "train_extra_mb": mb("train", "chat"),
        "train_extra_distributions_mb": only_in("train", "chat"),
        "test_extra_over_train_mb": mb("test", "train"),
        "chat_saved_since_before_mb": mb("before:chat", "chat"),  # training, then xgrammar, made extras
        "gpu_extra_mb": mb("gpu", "chat"),
        "gpu_extra_distributions_mb": only_in("gpu", "chat"),
        "cuda_over_cpu_mb": mb("chat-cuda", "gpu"),  # both with the gpu extra: the CUDA build's own cost
        "added_gb": {name: round(run["added_bytes"] / 1e9, 2) for name, run in runs.items()},
    }


if __name__ == "__main__":
    main()
