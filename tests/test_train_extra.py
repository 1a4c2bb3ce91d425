"""Training is an extra (`stiva-tui[train]`): a chat install has no TRL, no datasets, no pyarrow.

`stiva train` says in one line how to add them where they are missing, before it loads a suite, a
model or the pool; the router, which needs none of them, still trains. The packages are hidden
here as a chat install lacks them: `None` in sys.modules makes both `import trl` and
`importlib.util.find_spec("trl")` say there is none.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.cli import run_stiva

REPO = Path(__file__).resolve().parents[1]
BASE = ("--base", "embedded", "--out")


@pytest.fixture
def chat_install(monkeypatch):
    """The training packages missing, as in `pipx install stiva-tui` without `[train]`."""
    for name in ("trl", "datasets"):
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize(
    "argv",
    [
        ("train", "grpo", "skills"),
        ("train", "dpo"),
        ("train", "graded", "skills"),
        ("train", "skills"),  # the spelling from before the methods: grpo
    ],
    ids=["grpo", "dpo", "graded", "legacy"],
)
def test_train_without_the_extra_says_in_one_line_how_to_add_it(chat_install, tmp_path, argv):
    result = run_stiva(*argv, *BASE, str(tmp_path / "adapter"), home=tmp_path / "home")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "Traceback" not in line
    assert "stiva-tui[train]" in line and "pipx inject stiva-tui" in line and "pip install" in line
    assert "trl" in line
    assert not (tmp_path / "adapter").exists()  # nothing started


def test_the_router_trains_without_the_extra(chat_install, tmp_path):
    """`stiva train router` needs no TRL: it is not turned away (it fails later, on its missing suite)."""
    result = run_stiva("train", "router", str(tmp_path / "no-such.jsonl"), "--out", str(tmp_path / "r"),
                       home=tmp_path / "home")  # fmt: skip
    assert "stiva-tui[train]" not in result.stderr
    assert "no-such.jsonl" in result.stderr


def test_training_is_an_extra_and_the_tests_pull_it():
    """The chat install leaves TRL and datasets out; `[train]` has them; `[test]` (CI) pulls `[train]`."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {requirement.split(">")[0].split("=")[0].split("<")[0].split(";")[0].strip().lower()
             for requirement in project["dependencies"]}  # fmt: skip
    extras = project["optional-dependencies"]
    assert not names & {"trl", "datasets", "pyarrow", "pandas"}
    assert any(r.startswith("trl") for r in extras["train"]) and any(r.startswith("datasets") for r in extras["train"])
    assert any(r.startswith("stiva-tui[") and "train" in r.split("[")[1] for r in extras["test"]), extras["test"]
