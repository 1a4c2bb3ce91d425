"""What a user installs: the wheel built from this tree carries what the app loads at run time.

The themes have one source, the top-level `themes/` folder; `stiva_tui/themes` is a link to it
that the build follows, so the wheel holds real files.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = out.glob("stiva_tui-*.whl")
    return built


def test_the_themes_have_one_source():
    link = REPO / "stiva_tui" / "themes"
    assert link.is_symlink() and link.resolve() == (REPO / "themes").resolve()


def test_an_installed_wheel_finds_every_theme(wheel, tmp_path):
    sources = {path.name: path.read_bytes() for path in (REPO / "themes").glob("*.toml")}
    assert len(sources) >= 3
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            Path(name).name: archive.read(name)
            for name in archive.namelist()
            if name.startswith("stiva_tui/themes/") and name.endswith(".toml")
        }
        archive.extractall(tmp_path / "site")
    assert shipped == sources
    # the installed copy, not this tree, is what the app loads
    names = subprocess.run(
        [
            sys.executable,
            "-c",
            "import stiva_tui.tui.themes as t; print(t.__file__); "
            "print(sorted(theme.name for theme in t.load_themes()))",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    assert names[0].startswith(str(tmp_path / "site"))
    assert len(ast.literal_eval(names[1])) == len(sources)
