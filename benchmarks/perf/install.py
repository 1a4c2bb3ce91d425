"""What an install costs, run by hand: `python -m benchmarks.perf.install` (saves install.json beside itself).

Each install goes into a fresh virtual environment in a temporary folder, removed afterwards (one
download cache is shared by the installs of a run, and removed with it). For each: the venv's size
on disk (`du`), what the install added to an empty venv, the number of distributions pip installed,
which torch build resolved, and what the heaviest distributions and the ones named in WATCHED take
(the files their RECORD lists).

The installs:

- `before:chat`, `before:test`: the project as committed at BEFORE (`git archive`), `pip install .`
  and `.[test]`: what a chat user and CI got before training became an extra.
- `chat`, `train`, `test`: this tree, `pip install .`, `.[train]`, `.[test]`.
- `chat-no-triton`: `chat` with triton uninstalled afterwards, and xgrammar's CPU path run without
  it: the size a grammar engine that does not pull triton would give (pip itself cannot leave it out:
  every xgrammar release requires triton on Linux x86_64).
- `chat-cuda` (with `--cuda`, several GB downloaded): this tree from PyPI alone, the way stock pip
  resolves `torch==2.13.0` on Linux: the CUDA build and its `nvidia-*` libraries.

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

# xgrammar's CPU path with no triton: a grammar compiled, a token bitmask filled and applied to
# CPU logits (what the conductor's constrained decoding does per token).
XGRAMMAR_CPU = r"""
import importlib.util, torch, xgrammar as xgr
assert importlib.util.find_spec("triton") is None, "triton is installed"
vocab = ["a", "b", "[", "]", ",", '"', "x", "</s>"]
info = xgr.TokenizerInfo(vocab, vocab_size=len(vocab), stop_token_ids=[7])
compiled = xgr.GrammarCompiler(info).compile_grammar('root ::= "[" ("a" | "b")* "]"')
matcher = xgr.GrammarMatcher(compiled)
mask = xgr.allocate_token_bitmask(1, info.vocab_size)
matcher.fill_next_token_bitmask(mask)
logits = torch.zeros(1, len(vocab))
xgr.apply_token_bitmask_inplace(logits, mask)
allowed = [vocab[i] for i in range(len(vocab)) if logits[0, i] > float("-inf")]
assert allowed == ["["], allowed
print("xgrammar on the CPU without triton: ok")
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


def without_triton(work: Path, chat: dict) -> dict:
    """`chat` with triton uninstalled, and xgrammar's CPU path checked without it."""
    venv = work / "chat"
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "uninstall", "-q", "-y", "triton"], check=True)
    check = subprocess.run([python, "-c", XGRAMMAR_CPU], capture_output=True, text=True)
    result = _measure(venv, python, chat["venv_bytes"] - chat["added_bytes"])
    result.update(
        target="chat, then pip uninstall triton",
        packages=chat["packages"] - 1,
        xgrammar_cpu_without_triton=check.returncode == 0,
        xgrammar_check=(check.stdout or check.stderr).strip().splitlines()[-1:],
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="run only these installs (repeatable)")
    parser.add_argument("--cuda", action="store_true", help="also the CUDA install from PyPI (several GB)")
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with (default {BEFORE})")
    parser.add_argument("--keep", action="store_true", help="keep the venvs (prints where)")
    args = parser.parse_args()
    wanted = args.only or ["before:chat", "before:test", "chat", "chat-no-triton", "train", "test"]
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
            "train": (f"{ROOT}[train]", False),
            "test": (f"{ROOT}[test]", False),
            "chat-cuda": (str(ROOT), True),
        }
        runs = figures["installs"]
        for name in wanted:
            if name == "chat-no-triton":
                if "chat" not in wanted:
                    raise SystemExit("chat-no-triton needs chat in the same run")
                runs[name] = without_triton(work, runs["chat"])
            else:
                target, pypi_only = targets[name]
                runs[name] = install(work, name, target, pypi_only=pypi_only, cache=cache)
            if name != "chat" or "chat-no-triton" not in wanted:  # chat's venv serves chat-no-triton
                shutil.rmtree(work / ("chat" if name == "chat-no-triton" else name.replace(":", "-")))
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
        "chat_saved_by_train_extra_mb": mb("before:chat", "chat"),
        "chat_saved_by_dropping_triton_mb": mb("chat", "chat-no-triton"),
        "cuda_over_cpu_mb": mb("chat-cuda", "chat"),
    }


if __name__ == "__main__":
    main()
