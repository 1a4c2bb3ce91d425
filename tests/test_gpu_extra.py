"""xgrammar is the `gpu` extra (pyproject.toml): a chat install leaves it, and the 1 GB of triton it
requires on Linux, out. Without it: the real `stiva`, in processes where `import xgrammar` fails
(sitecustomize puts None in sys.modules, in the model process too), still answers offline and with
a remote planner, and a configured local conductor on a GPU says in one line how to add it."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from tests.support.cli import ROOT, stiva
from tests.support.fakeprovider import Reply
from tests.support.pool import write_lab_config

INSTALL_GPU = "pipx inject stiva-tui 'stiva-tui[gpu]'"
PLAN = 'Two drafts, one judge.\nmodel_id = [1, 2, 1]\nsubtasks = ["draft A", "draft B", "combine"]\naccess_list = [[], [], [0, 1]]'

# Every Python process started with this folder on PYTHONPATH: no xgrammar; with STIVA_TEST_GPU_GIB
# set, a CUDA GPU with that much free memory (the probe answers so; nothing uses the GPU here).
SITECUSTOMIZE = """
import os, sys
sys.modules["xgrammar"] = None
if os.environ.get("STIVA_TEST_GPU_GIB"):
    from stiva_tui.inference import checkpoints
    checkpoints.free_cuda_bytes = lambda *a, **k: int(float(os.environ["STIVA_TEST_GPU_GIB"]) * 2**30)
"""


def _without_xgrammar(tmp_path: Path, home: Path, **extra: str) -> dict[str, str]:
    blocker = tmp_path / "no-xgrammar"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}", "STIVA_HOME": str(home), **extra}


def _model_folder(tmp_path: Path) -> Path:
    """A local model folder as the chooser reads it (its config only: no weights are loaded)."""
    folder = tmp_path / "qwen"
    folder.mkdir()
    config = {"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14}
    config.update(num_key_value_heads=2, intermediate_size=4864, vocab_size=151936)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_xgrammar_is_the_gpu_extra_and_the_tests_pull_it():
    """The chat install leaves xgrammar (and the triton it requires) out; `[gpu]` has it; `[test]`
    (CI) pulls `[gpu]`, so the grammar path stays tested."""
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements):
        return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}

    assert not names(project["dependencies"]) & {"xgrammar", "triton"}
    extras = project["optional-dependencies"]
    assert names(extras["gpu"]) == {"xgrammar"}
    assert any(r.startswith("stiva-tui[") and "gpu" in r.split("[")[1].split("]")[0].split(",") for r in extras["test"])


def test_every_import_of_xgrammar_is_the_guarded_one():
    """xgrammar is imported in one place only, inside a function that turns its absence into the
    one-line GrammarNotInstalled (`inference.grammar_mask.import_xgrammar`); nowhere at module level."""
    found = []
    for path in sorted((ROOT / "stiva_tui").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(name.split(".")[0] == "xgrammar" for name in names):
                inside = [f.name for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
                found.append((path.relative_to(ROOT).as_posix(), inside))
    assert found == [("stiva_tui/inference/grammar_mask.py", ["import_xgrammar"])]


def test_without_xgrammar_the_grammar_says_how_to_add_it(tmp_path, stiva_home):
    """The guarded import, the cheap check, and the conductor's grammar compile: each says the
    same one line, naming the gpu extra; the remote planners' JSON schema needs no xgrammar."""
    import subprocess
    import sys

    script = """
from stiva_tui.conductor.grammar import compiled_lists_grammar, lists_json_schema
from stiva_tui.inference.grammar_mask import GrammarNotInstalled, grammar_missing, import_xgrammar
assert lists_json_schema(3, 2, 100, False)["type"] == "object"
said = [grammar_missing()]
for call in (import_xgrammar, lambda: compiled_lists_grammar(object(), 3, 2)):
    try:
        call()
    except GrammarNotInstalled as exc:
        said.append(str(exc))
print("\\n".join(said))
"""
    env = _without_xgrammar(tmp_path, stiva_home)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and len(set(lines)) == 1, lines
    assert lines[0] == (
        "the plan grammar needs xgrammar (not installed), which the gpu extra installs: "
        f"{INSTALL_GPU}, or pip install 'stiva-tui[gpu]' in Stiva's virtual environment"
    )


def test_without_xgrammar_a_configured_local_conductor_says_how_to_add_it(fake, tmp_path, stiva_home):
    """`[conductor] backend = "local"` on a GPU without the gpu extra: `stiva ask` stops before it
    loads anything, with one line that says how to add it (on main it went on to load the model)."""
    config = write_lab_config(
        tmp_path / "c.toml",
        fake.base_url,
        ["w1"],
        conductor={"backend": "local", "model": str(_model_folder(tmp_path))},
    )
    env = _without_xgrammar(tmp_path, stiva_home, STIVA_TEST_GPU_GIB="60")
    done = stiva("ask", "What is it?", "--config", str(config), env=env, timeout=180)
    assert done.stderr.splitlines() == [
        "stiva: the local conductor cannot run: the plan grammar needs xgrammar (not installed), which the gpu "
        f"extra installs: {INSTALL_GPU}, or pip install 'stiva-tui[gpu]' in Stiva's virtual environment"
    ], done.stderr
    assert done.returncode == 1, done.returncode
    assert not fake.requests  # no model was asked anything
    # `auto` on that GPU goes on to the pool's planner, and says why
    auto = write_lab_config(
        tmp_path / "auto.toml", fake.base_url, ["cond", "w1"], conductor={"backend": "auto", "model": "cond"}
    )
    fake.script("cond", Reply(PLAN.replace("1, 2, 1", "1, 1, 1")))
    fake.default("w1", Reply("an answer"))
    done = stiva("ask", "What is it?", "--config", str(auto), "--json", env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)
    assert trace["answer"] == "an answer"
    assert "xgrammar" in json.dumps(trace) and INSTALL_GPU in json.dumps(trace)


def test_without_xgrammar_a_remote_planner_plans(fake, tmp_path, stiva_home):
    """The remote planner's path (the JSON schema, no xgrammar): its plan runs as written."""
    fake.script("cond", Reply(PLAN))
    fake.default("w1", Reply("the combined answer"))
    fake.default("w2", Reply("draft two"))
    config = write_lab_config(tmp_path / "c.toml", fake.base_url, ["cond", "w1", "w2"])
    done = stiva("ask", "What is it?", "--config", str(config), "--json", env=_without_xgrammar(tmp_path, stiva_home))
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)
    assert trace["answer"] == "the combined answer"
    assert [step["model"] for step in trace["rounds"][0]["steps"]] == ["w1", "w2", "w1"]


@pytest.mark.slow
@pytest.mark.model
def test_without_xgrammar_the_embedded_planner_answers_in_one_step(tmp_path, stiva_home):
    """Offline, the embedded planner on a simulated pool: no plan grammar, so no plan, and the run
    answers in one step, the note saying why without a nudge to install 1 GB (on main: a
    ModuleNotFoundError in the note)."""
    env = _without_xgrammar(tmp_path, stiva_home)
    question = "What is 17 * 23? Show the multiplication step by step, then check it by division."
    done = stiva("--pool", "sim", "ask", question, "--json", env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)
    first = trace["rounds"][0]
    assert len(first["steps"]) == 1
    assert "no plan grammar without xgrammar (the gpu extra" in first["reasoning"], first
    assert INSTALL_GPU not in done.stdout + done.stderr
