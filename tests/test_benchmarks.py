"""benchmarks/: perf scripts in `benchmarks/perf/`, experiments in `benchmarks/experiments/`, one
harness at the top (benchmarks/harness.py).

Each script imports as a module from the repository root and answers `--help` where it takes
options; every JSON it saves goes through `harness.save_json` (or `update_json`) with its machine
record from `harness.machine()`; the experiments build the `stiva` commands they run with one
builder, and those commands parse with the real `stiva` parser. Every `benchmarks/...` path and
`python -m benchmarks.X` module the docs, the code and the scripts name exists.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"

PERF = (
    "answer_mask",
    "ask_warm",
    "install",
    "bench",
    "conductor",
    "decode_gpu",
    "dpo_step",
    "engine",
    "first_answer",
    "first_paint",
    "hostile_files",
    "memory",
    "suite_under_load",
    "offline",
    "plan_stop",
    "prefix_cache",
    "router_decision",
    "sandbox",
    "serve",
    "train",
    "train_step",
    "tui",
    "upstream_client",
    "wire",
    "math_agreement",
)
EXPERIMENTS = ("learning", "make_skills", "preferences", "real_routing", "router_escalation", "votes", "votes_methods")
MODULES = [f"benchmarks.perf.{name}" for name in PERF] + [f"benchmarks.experiments.{name}" for name in EXPERIMENTS]
# the scripts that take options (argparse); the others run as they are
WITH_OPTIONS = [
    m for m in MODULES if m.rsplit(".", 1)[1] not in ("engine", "prefix_cache", "sandbox", "tui", "make_skills")
]
# the scripts that save figures as JSON
SAVING = [m for m in MODULES if m.rsplit(".", 1)[1] not in ("votes_methods", "make_skills")]


def _path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def test_the_top_holds_the_harness_and_the_two_folders():
    top = {p.name for p in BENCHMARKS.glob("*.py")}
    # zeroeval_records.py, mmlu_redux_records.py: the converters of recorded answers, the experiments' data
    assert top <= {"__init__.py", "harness.py", "zeroeval_records.py", "mmlu_redux_records.py"}, sorted(top)
    assert "harness.py" in top
    assert {p.stem for p in (BENCHMARKS / "perf").glob("*.py")} - {"__init__"} == set(PERF)
    # the experiments: these, and those added since (each with a test of its own)
    assert {p.stem for p in (BENCHMARKS / "experiments").glob("*.py")} >= {*EXPERIMENTS, "__init__", "common"}
    assert (BENCHMARKS / "perf" / "gpu_checks.sh").is_file()


def test_each_figure_file_lies_beside_its_script():
    assert not list(BENCHMARKS.glob("*.png")), "a figure at the top: it belongs beside its script"
    assert not [p for p in BENCHMARKS.glob("*.json")], "a JSON at the top: it belongs beside its script"
    assert (BENCHMARKS / "experiments" / "learning_rpo.json").is_file()
    assert (BENCHMARKS / "experiments" / "learning_rpo.png").is_file()
    assert (BENCHMARKS / "perf" / "serve_shared.json").is_file()


@pytest.mark.parametrize("module", MODULES)
def test_every_script_imports_as_a_module_from_the_root(module):
    assert _path(module).is_file()
    importlib.import_module(module)


@pytest.mark.parametrize("module", WITH_OPTIONS)
def test_every_script_with_options_answers_help(module, monkeypatch, capsys):
    main = importlib.import_module(module).main
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")


def _calls(tree: ast.AST) -> set[str]:
    return {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
    }


@pytest.mark.parametrize("module", SAVING)
def test_every_saved_json_goes_through_the_harness_with_its_machine(module):
    source = _path(module).read_text(encoding="utf-8")
    tree = ast.parse(source)
    calls = _calls(tree)
    assert calls & {"save_json", "update_json"}, "saves its figures without harness.save_json"
    assert "machine" in calls, "no harness.machine() record"
    assert "write_text(json.dumps" not in source.replace("\n", "").replace(" ", "")
    for node in ast.walk(tree):  # a "machine" key is the harness's record, never built by hand
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "machine":
                    assert "machine" in _calls(value), ast.unparse(value)


def test_the_harness_saves_json_and_merges_a_key(tmp_path):
    from benchmarks import harness

    record = harness.machine()
    assert {"platform", "arch", "cpus", "python", "torch", "load_1min"} <= set(record)
    path = harness.save_json(tmp_path / "x.json", {"a": 1, "machine": record})
    assert path.read_text().endswith("}\n") and json.loads(path.read_text())["a"] == 1
    harness.update_json(path, "cuda", {"b": 2})
    assert json.loads(path.read_text()) == {"a": 1, "machine": record, "cuda": {"b": 2}}
    fresh = harness.update_json(tmp_path / "new.json", "cpu", {"c": 3})
    assert json.loads(fresh.read_text()) == {"cpu": {"c": 3}}


def test_the_arg_list_builder(tmp_path):
    from benchmarks.harness import cli_args

    assert cli_args(
        "train", "grpo", "skills", steps=4, lr=3e-4, lora_r=8, shuffle_pool=True, resume=False, limit=None,
        bench=["b1", "b2"], out=tmp_path,
    ) == [
        "train", "grpo", "skills", "--steps", "4", "--lr", "0.0003", "--lora-r", "8", "--shuffle-pool",
        "--bench", "b1", "--bench", "b2", "--out", str(tmp_path),
    ]  # fmt: skip


def test_the_experiments_commands_parse_with_the_real_parser(tmp_path):
    from benchmarks.experiments import common
    from stiva_tui import cli

    parser = cli.build_parser()
    grpo = common.train_args("grpo", tmp_path / "a", 4, group=4, shuffle_pool=True, prefer_levels="best,cheap")
    graded = common.train_args(
        "graded", tmp_path / "b", 8, graded_seeds=3, graded_systems="direct:*", bench_pairs="best",
        sft_weight=0.5, plan_steps=1, config=tmp_path / "grading.toml",
    )  # fmt: skip
    heldout = common.bench_args("heldout", "conductor@best,conductor@cheap", limit=16)
    for argv in (grpo, graded, heldout):
        args = parser.parse_args(argv)
        assert args.json is True, argv
    assert grpo[:3] == ["train", "grpo", "skills"] and graded[:3] == ["train", "graded", "skills"]
    assert parser.parse_args(grpo).shuffle_pool is True and parser.parse_args(graded).steps == 8
    assert heldout[:2] == ["bench", "skills"] and parser.parse_args(heldout).limit == 16


def _option_literals(path: Path) -> list[str]:
    """The `--option` strings of a script that are not its own argparse options."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        for arg in node.args
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("--")
        and id(node) not in own
    ]


@pytest.mark.parametrize("name", ["learning", "preferences"])
def test_learning_and_preferences_build_no_stiva_arguments_themselves(name):
    path = BENCHMARKS / "experiments" / f"{name}.py"
    assert _option_literals(path) == []
    assert "from benchmarks.experiments import common" in path.read_text(encoding="utf-8")


# --- every path and module named exists ------------------------------------------------------------

_PATH = re.compile(r"(?<![\w/:.-])benchmarks/[\w./*…-]*")
_MODULE = re.compile(r"python3? -m (benchmarks(?:\.\w+)+)")


def _texts() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / ".ci" / "run"]
    files += sorted((ROOT / "stiva_tui").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    files += sorted(BENCHMARKS.rglob("*.py")) + sorted(BENCHMARKS.rglob("*.sh"))
    return [f for f in files if f.is_file() and f.name != Path(__file__).name]


def _placeholder(name: str) -> bool:
    """`benchmarks/NAME.json`, `python -m benchmarks.perf.X`: a name in capitals stands for any."""
    return any(re.fullmatch(r"[A-Z][A-Z_]*", part) for part in re.split(r"[/.]", name))


def _missing(text: str) -> list[str]:
    gone = []
    for found in _PATH.findall(text):
        path = found.rstrip(".,…")
        if _placeholder(path):
            continue
        if "*" in path:
            if not list(ROOT.glob(path)):
                gone.append(found)
        elif not (ROOT / path).exists():
            gone.append(found)
    for module in _MODULE.findall(text):
        if not _placeholder(module) and not _path(module).is_file() and not ROOT.joinpath(*module.split(".")).is_dir():
            gone.append(f"python -m {module}")
    return gone


def test_every_benchmarks_path_and_module_named_exists():
    gone = [f"{f.relative_to(ROOT)}: {m}" for f in _texts() for m in _missing(f.read_text(encoding="utf-8"))]
    assert not gone, "\n".join(gone)


def test_a_path_that_moved_is_found():
    assert _missing("see `benchmarks/engine.json` and `python -m benchmarks.engine`") == [
        "benchmarks/engine.json",
        "python -m benchmarks.engine",
    ]
    assert _missing("`git show 09ba260:benchmarks/serve.json` · benchmarks/experiments/learning*.json") == []
    assert _missing("`python -m benchmarks.perf.NAME` saves benchmarks/perf/NAME.json") == []
