"""Peak memory of the real `stiva` given hostile files: each must be one line, in bounded memory.

    python -m benchmarks.perf.hostile_files [--label this-tree] [--code DIR] [--no-save]

Each case makes its file in a temporary folder (a few MB at most: a `.gz` of one 256 MiB line, a
deflated router.npz of 512 MiB of zeros, sparse files that take no room on disk), runs the real
`stiva` on it with its address space capped at 3 GiB (so a regression fails instead of eating the
machine), and records the exit code, the last line of stderr, the wall time and the child's peak
RSS (`os.wait4`). `--code DIR` runs another checkout's code (PYTHONPATH=DIR), to measure what a
version before the caps did; the figures go under `--label` in hostile_files.json beside this script.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

from benchmarks.harness import HERE, ROOT, STIVA, machine, update_json

OUT = HERE / "perf" / "hostile_files.json"
MiB = 1 << 20


def one_line_gz(path: Path, chars: int) -> Path:
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as handle:
        for _ in range(chars // MiB):
            handle.write(packer.compress(b"a" * MiB))
        handle.write(packer.flush())
    return path


def sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def inflating_router(folder: Path, d: int) -> Path:
    import numpy as np

    folder.mkdir()
    named = {"format": "stiva-router", "version": 1, "models": ["m0", "m1"], "features": "embedded"}
    text = json.dumps(named)  # the router's own file, not figures
    (folder / "router.json").write_text(text)
    with zipfile.ZipFile(folder / "router.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, shape in {"weights": (d, 2), "bias": (2,), "mean": (d,), "scale": (d,)}.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False, "shape": shape})
                left = int(np.prod(shape)) * 8
                while left:
                    member.write(bytes(min(left, MiB)))
                    left -= min(left, MiB)
    return folder


def truncated_router(folder: Path) -> Path:
    inflating_router(folder, 16)
    whole = (folder / "router.npz").read_bytes()
    (folder / "router.npz").write_bytes(whole[: len(whole) // 2])
    return folder


def cases(tmp: Path) -> dict[str, list[str]]:
    router = ["--pool", "sim", "--limit", "1", "--systems"]
    return {
        "bench import: a .gz of one 256 MiB line": ["bench", "import", str(one_line_gz(tmp / "line.jsonl.gz", 256 * MiB))],
        "router:DIR whose router.npz inflates to 512 MiB": [
            "bench", "basic", *router, f"router:{inflating_router(tmp / 'big', 16 * MiB)}"
        ],
        "router:DIR whose router.npz is truncated": ["bench", "basic", *router, f"router:{truncated_router(tmp / 'cut')}"],
        "a JSONL suite of one 300 MiB line": ["bench", str(sparse(tmp / "line.jsonl", 300 * MiB)), "--systems", "direct:x"],
        "a JSONL suite of 1 GiB and one byte": [
            "bench", str(sparse(tmp / "big.jsonl", (1 << 30) + 1)), "--systems", "direct:x"
        ],
        "aime:FILE.csv of one 300 MiB line": ["bench", f"aime:{sparse(tmp / 'line.csv', 300 * MiB)}", "--systems", "direct:x"],
        "--config of 1 GiB": ["--config", str(sparse(tmp / "config.toml", 1 << 30)), "bench", "--list"],
    }  # fmt: skip


def run(args: list[str], code: Path, home: Path, tmp: Path) -> dict:
    env = {**os.environ, "STIVA_HOME": str(home), "PYTHONPATH": str(code)}

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    err = tmp / "stderr.txt"
    started = time.perf_counter()
    with open(err, "w") as stderr:
        process = subprocess.Popen(
            [STIVA, *args], env=env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp, preexec_fn=cap
        )
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    lines = err.read_text(errors="replace").strip().splitlines()
    return {
        "exit": process.returncode,
        "stderr_lines": len(lines),
        "last_line": (lines[-1] if lines else "")[:300].replace(str(tmp), "TMP"),
        "traceback": any(line.startswith("Traceback") for line in lines),
        "peak_rss_mib": usage.ru_maxrss // 1024,
        "wall_s": round(time.perf_counter() - started, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="this-tree", help="the key the figures go under")
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose code runs (PYTHONPATH)")
    parser.add_argument("--no-save", action="store_true")
    options = parser.parse_args()
    figures: dict = {"machine": machine(), "code": options.label, "address_space_cap_gib": 3, "cases": {}}
    with tempfile.TemporaryDirectory(prefix="stiva-hostile-") as folder:
        tmp = Path(folder)
        for name, args in cases(tmp).items():
            result = run(args, Path(options.code), tmp / "home", tmp)
            figures["cases"][name] = result
            print(
                f"{name}: exit {result['exit']}, peak {result['peak_rss_mib']} MiB: {result['last_line']}", flush=True
            )
    if not options.no_save:
        print(update_json(OUT, options.label, figures), file=sys.stderr)


if __name__ == "__main__":
    main()
