"""Reading a file a user names never takes the machine's memory: a `.gz` of one huge line, a router
whose `router.npz` inflates to far more than a router holds, or a truncated one, are each one line
from the real `stiva`, refused in bounded memory (core/reading.py; docs/security.md, "Files Stiva
reads"). Peaks are the child's own (`os.wait4`), so a regression fails on a few hundred MB."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from stiva_tui.cli.main import main
from stiva_tui.conductor.router import Router, RouterError, load_router
from stiva_tui.core.reading import ReadError, bounded_lines, open_text, read_npz, read_text
from stiva_tui.evals.recorded import records
from tests.support.cli import ROOT

MiB = 1 << 20


def peak(tmp_path: Path, *args: str, setup: str = "") -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in MiB) of `stiva ARGS`, this tree's code on its path, its
    address space capped at 3 GiB so a regression fails rather than eats the machine. `setup`:
    Python run first (a cap made smaller), then the console script's own `entry`. Output goes to a
    file: waiting on a child that fills a pipe nobody reads never ends."""
    env = {**os.environ, "STIVA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    # The peak is the child's own VmHWM, read as it exits: the rusage of a forked child starts from
    # its parent's resident size (a pytest worker grown to 270 MiB after many tests), exec or not.
    hwm = tmp_path / "vmhwm.txt"
    code = (
        "import atexit, resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "def _peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        f"            open({str(hwm)!r}, 'w').write(line.split()[1])\n"
        "atexit.register(_peak)\n"
        f"{setup}\nfrom stiva_tui.cli import entry\nsys.argv[0] = 'stiva'\nsys.exit(entry())"
    )
    err = tmp_path / "stderr.txt"
    with open(err, "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-c", code, *args], env=env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path
        )
    peak_kib = int(hwm.read_text()) if hwm.exists() else 1 << 30  # no record: it did not exit cleanly
    return done.returncode, err.read_text(), peak_kib // 1024


def one_line_gz(path: Path, chars: int) -> Path:
    """A .gz of one line of `chars` characters (about 1 MB for 256 MiB: deflate at level 1)."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b"a" * MiB
    with open(path, "wb") as handle:
        for _ in range(chars // MiB):
            handle.write(packer.compress(chunk))
        handle.write(packer.flush())
    return path


def test_a_gz_of_one_huge_line_is_one_line_without_reading_the_line_whole(tmp_path):
    path = one_line_gz(tmp_path / "huge.jsonl.gz", 256 * MiB)
    assert path.stat().st_size < 2 * MiB
    code, err, peak_mib = peak(tmp_path, "bench", "import", str(path))
    # the line is read to the cap and no further (before, it was read whole: 551 MiB here)
    assert peak_mib < 200, peak_mib
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert lines[-1] == f"stiva: {path}:1: a line longer than 16,777,216 characters", err


def test_an_import_past_its_decompressed_cap_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(records, "MAX_FILE_BYTES", MiB)
    path = tmp_path / "blank.jsonl.gz"
    path.write_bytes(gzip.compress(b" " * 1000 + b"\n" * (2 * MiB), compresslevel=1))
    code = main(["bench", "import", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines()[-1] == f"stiva: {path}: more than 1 MiB once decompressed", err
    plain = tmp_path / "blank.jsonl"
    plain.write_bytes(b"\n" * (2 * MiB))
    assert main(["bench", "import", str(plain)]) == 2
    assert "more than the 1 MiB read of such a file" in capsys.readouterr().err


def test_routerbench_lines_and_cells_are_capped_and_the_csv_limit_is_given_back(tmp_path, capsys, monkeypatch):
    import csv

    monkeypatch.setattr(records, "MAX_LINE_CHARS", 1000)
    before = csv.field_size_limit()
    path = tmp_path / "rb.csv"
    path.write_text('sample_id,prompt,m,m|model_response\ns1,"' + "x\n" * 600 + '",1,ok\n')
    code = main(["bench", "import", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "field larger than field limit (1000)" in err and len(err.strip().splitlines()) == 2, err
    path.write_text("sample_id,prompt,m,m|model_response\ns1," + "y" * 2000 + ",1,ok\n")
    assert main(["bench", "import", str(path)]) == 2
    assert f"stiva: {path}:2: a line longer than 1,000 characters" in capsys.readouterr().err
    assert csv.field_size_limit() == before  # a suite's CSV keeps the module's own 128 KiB


def inflating_router(folder: Path, d: int, models: int = 2, dtype: str = "<f8") -> Path:
    """A router folder whose router.npz inflates to d x (models + 2) numbers of zeros (deflated: a
    few MB on disk), its router.json naming `models` models."""
    folder.mkdir()
    names = [f"m{i}" for i in range(models)]
    (folder / "router.json").write_text(
        json.dumps({"format": "stiva-router", "version": 1, "models": names, "features": "embedded"})
    )
    shapes = {"weights": (d, models), "bias": (models,), "mean": (d,), "scale": (d,)}
    zero = bytes(MiB)
    with zipfile.ZipFile(folder / "router.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, shape in shapes.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                header = {"descr": dtype, "fortran_order": False, "shape": shape}
                np.lib.format.write_array_header_1_0(member, header)
                left = int(np.prod(shape)) * np.dtype(dtype).itemsize
                while left:
                    member.write(zero[: min(left, MiB)])
                    left -= min(left, MiB)
    return folder


def test_a_router_that_inflates_to_half_a_gigabyte_is_refused_before_it_is_inflated(tmp_path):
    folder = inflating_router(tmp_path / "router", d=16 * MiB)  # 512 MiB of float64, once inflated
    assert (folder / "router.npz").stat().st_size < 4 * MiB
    code, err, peak_mib = peak(
        tmp_path, "bench", "basic", "--pool", "sim", "--systems", f"router:{folder}", "--limit", "1"
    )
    assert peak_mib < 200, peak_mib  # before, it was all inflated and the bench went on (475 MiB: hostile_files.json)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert "not a readable router" in lines[0] and "more than the 64 MiB read of such a file" in lines[0], lines


def test_a_truncated_router_npz_is_one_line_through_stiva_bench(tmp_path):
    folder = tmp_path / "router"
    d, m = 16, 2
    Router(
        folder=folder,
        models=["a", "b"],
        features="embedded",
        weights=np.zeros((d, m), np.float32),
        bias=np.zeros(m, np.float32),
        mean=np.zeros(d, np.float32),
        scale=np.ones(d, np.float32),
        cost={},
        latency={},
    ).save()
    assert load_router(folder).models == ["a", "b"]
    whole = (folder / "router.npz").read_bytes()
    (folder / "router.npz").write_bytes(whole[: len(whole) // 2])
    code, err, _ = peak(tmp_path, "bench", "basic", "--pool", "sim", "--systems", f"router:{folder}", "--limit", "1")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and "Traceback" not in err and "BadZipFile" not in err, err[-2000:]
    assert lines[0] == (
        f"stiva: {folder}: not a readable router ({folder}/router.npz: a damaged archive (truncated: no end of "
        "its directory)); train it again"
    )


def test_a_router_whose_arrays_do_not_match_its_models_is_refused_from_the_headers(tmp_path):
    folder = inflating_router(tmp_path / "three", d=8, models=3)
    (folder / "router.json").write_text(json.dumps({"format": "stiva-router", "models": ["a", "b"]}))
    with pytest.raises(RouterError, match=r"array 'weights' has shape \(8, 3\), not \('d', 'm'\) \(m = 2\)"):
        load_router(folder)
    objects = inflating_router(tmp_path / "objects", d=8, dtype="|O")
    with pytest.raises(RouterError, match="array 'weights' holds object, not numbers"):
        load_router(objects)
    liar = tmp_path / "liar.npz"  # a header that claims more rows than the member holds
    with zipfile.ZipFile(liar, "w") as archive, archive.open("weights.npy", "w") as member:
        np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 2)})
    with pytest.raises(ReadError, match="claims more data than it holds"):
        read_npz(liar, {"weights": ("d", "m")}, sizes={"m": 2}, limit=MiB)


def test_an_archive_of_many_members_is_refused_before_its_directory_is_read(tmp_path):
    path = tmp_path / "many.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for number in range(100):
            archive.writestr(f"x{number}.npy", b"")
    with pytest.raises(ReadError, match="an archive of 100 members"):
        read_npz(path, {"x0": ("n",)}, limit=MiB)


def test_the_bounded_readers(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"ab\r\ncd\n")
    assert read_text(path, 7) == "ab\ncd\n"
    with pytest.raises(ReadError, match="7 bytes, more than the 6 bytes read of such a file"):
        read_text(path, 6)
    assert next(bounded_lines(io.StringIO("12345\n123456\n"), 5)) == (1, "12345\n")
    crlf = io.StringIO("12345\r\n12345", newline="")
    assert list(bounded_lines(crlf, 5)) == [(1, "12345\r\n"), (2, "12345")]
    with pytest.raises(ReadError, match="^s:2: a line longer than 5 characters$"):
        list(bounded_lines(io.StringIO("12345\n123456\n"), 5, source="s"))
    gz = tmp_path / "t.gz"
    gz.write_bytes(gzip.compress(b"x" * 5000))
    with open_text(gz, 5000) as text:
        assert text.read() == "x" * 5000
    with open_text(gz, 4999) as text, pytest.raises(ReadError, match="more than 4.9 KiB once decompressed"):
        text.read()


def sparse(path: Path, size: int) -> Path:
    """A file of `size` NUL bytes and no newline, which takes no room on disk."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def test_a_suite_file_of_one_huge_line_is_refused_at_the_line_cap(tmp_path):
    path = sparse(tmp_path / "huge.jsonl", 300 * MiB)
    setup = "import stiva_tui.evals.suite as suite\nsuite.MAX_LINE_CHARS = 1 << 20"
    code, err, peak_mib = peak(tmp_path, "bench", str(path), "--systems", "direct:x", setup=setup)
    assert peak_mib < 150, peak_mib  # before, it was read whole and split: 656 MiB here
    assert code == 2 and err.strip().splitlines() == [f"stiva: {path}:1: a line longer than 1,048,576 characters"]


def test_a_suite_file_over_its_cap_is_refused_before_it_is_read(tmp_path):
    size = (1 << 30) + 1  # evals/suite.py's MAX_SUITE_BYTES, and one more
    path = sparse(tmp_path / "big.jsonl", size)
    code, err, peak_mib = peak(tmp_path, "bench", str(path), "--systems", "direct:x")
    assert peak_mib < 150, peak_mib
    assert code == 2 and err.strip().splitlines() == [
        f"stiva: {path}: {size:,} bytes, more than the 1 GiB read of such a file"
    ]


def test_a_public_format_csv_of_one_huge_line_is_refused_at_the_line_cap(tmp_path):
    path = sparse(tmp_path / "huge.csv", 300 * MiB)
    setup = "import stiva_tui.evals.loaders as loaders\nloaders.MAX_RECORD_CHARS = 1 << 20"
    code, err, peak_mib = peak(tmp_path, "bench", f"aime:{path}", "--systems", "direct:x", setup=setup)
    assert peak_mib < 150, peak_mib
    assert code == 2 and err.strip().splitlines() == [
        f"stiva: aime:{path}:1: a line longer than 1,048,576 characters"
    ], err


def test_a_config_file_over_its_cap_is_refused_unread(tmp_path):
    path = sparse(tmp_path / "config.toml", 1 << 30)
    code, err, peak_mib = peak(tmp_path, "--config", str(path), "bench", "--list")
    assert peak_mib < 150, peak_mib  # before, the gigabyte was read and decoded first
    assert code == 2 and err.strip().splitlines() == [
        f"stiva: {path}: 1,073,741,824 bytes, more than the 4 MiB read of such a file"
    ], err


def test_theme_and_adapter_files_over_their_caps_are_refused(tmp_path):
    from stiva_tui.inference.adapter_manifest import AdapterManifest
    from stiva_tui.tui.themes import load_themes

    limit = 1 << 20  # THEME_LIMIT and MANIFEST_LIMIT

    theme = tmp_path / "themes" / "big.toml"
    theme.parent.mkdir()
    theme.write_text('name = "big"\nprimary = "#ffffff"\n' + "#" * limit + "\n")
    with pytest.raises(ValueError, match=r"^theme file .*big.toml: .*big.toml: [\d,]+ bytes, more than the 1 MiB"):
        load_themes(theme.parent)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    manifest = adapter / "stiva_adapter.json"
    manifest.write_text('{"base": "embedded"}')
    assert AdapterManifest.read(adapter).base == "embedded"
    manifest.write_text('{"base": "embedded"}' + " " * limit)
    assert AdapterManifest.read(adapter) is None  # as a damaged one: not read, never half-read


def test_a_hub_split_larger_than_a_suite_may_be_is_refused_before_it_becomes_records(monkeypatch):
    """The split's Arrow table knows its size before a record of it is made a Python dict."""
    datasets = pytest.importorskip("datasets")
    from stiva_tui.evals import loaders
    from stiva_tui.evals.suite import SuiteError

    table = datasets.Dataset.from_list(
        [{"problem": "x" * 1000, "answer": "2", "unique_id": f"u{i}"} for i in range(50)]
    )
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, split: table)
    assert len(loaders.load_suite("math500:someone/big").items) == 50
    monkeypatch.setattr(loaders, "MAX_FILE_BYTES", table.data.nbytes - 1)
    with pytest.raises(
        SuiteError, match=rf"^math500:someone/big: its data take {table.data.nbytes:,} bytes once read, more than the "
    ):
        loaders.load_suite("math500:someone/big")
