"""Import hygiene and the import graph.

- The core loads without Textual or torch, so the CLI, the server and the tests stay fast.
- Arrows point down only (docs/architecture.md), through every layer in order (LAYERS, the
  import-linter contracts in pyproject.toml, checked here by `lint-imports`): the command line >
  the app and the server > train > bench > sim > evals > runtime > engine, store > conductor > pool >
  inference, settings > what imports nothing of Stiva. Imports inside functions count too: a lazy
  import is still an arrow, and there is no circle between the packages.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "stiva_tui"

CORE = [
    "stiva_tui.config",
    "stiva_tui.paths",
    "stiva_tui.keys",
    "stiva_tui.catalog",
    "stiva_tui.runtime",
    "stiva_tui.cli",
    "stiva_tui.cli.view",
    "stiva_tui.cli.common",
    "stiva_tui.cli.bench",
    "stiva_tui.bench.runner",
    "stiva_tui.bench.report",
    "stiva_tui.bench.limiter",
    "stiva_tui.store.benches",
    "stiva_tui.conductor.fewshot",
    "stiva_tui.cli.train",
    "stiva_tui.train.trainer",
    "stiva_tui.train.rollout",
    "stiva_tui.cli.votes",
    "stiva_tui.train.votes",
    "stiva_tui.train.dpo",
    "stiva_tui.cli.ask",
    "stiva_tui.cli.models",
    "stiva_tui.cli.history",
    "stiva_tui.cli.serve",
    "stiva_tui.cli.config_cmd",
    "stiva_tui.cli.main",
    "stiva_tui.core.events",
    "stiva_tui.core.run_state",
    "stiva_tui.core.trace",
    "stiva_tui.core.workflow",
    "stiva_tui.engine.executor",
    "stiva_tui.engine.baselines",
    "stiva_tui.inference.checkpoints",
    "stiva_tui.inference.embedded",
    "stiva_tui.inference.generation",
    "stiva_tui.inference.adapter_manifest",
    "stiva_tui.inference.grammar_mask",
    "stiva_tui.train.common",
    "stiva_tui.conductor.prompt",
    "stiva_tui.conductor.remote",
    "stiva_tui.conductor.choose",
    "stiva_tui.conductor.local",
    "stiva_tui.conductor.embedded",
    "stiva_tui.conductor.grammar",
    "stiva_tui.pool.client",
    "stiva_tui.pool.registry",
    "stiva_tui.pool.discovery",
    "stiva_tui.pool.embedded",
    "stiva_tui.pool.listing",
    "stiva_tui.store",
    "stiva_tui.store.export",
    "stiva_tui.sandbox",
    "stiva_tui.sim.answers",
    "stiva_tui.sim.server",
    "stiva_tui.sim.pool",
    "stiva_tui.bench.derived",
    "stiva_tui.sim.replay",
    "stiva_tui.bench.replay",
    "stiva_tui.bench.systems",
    "stiva_tui.runtime.systems",
    "stiva_tui.evals.suite",
    "stiva_tui.evals.loaders",
    "stiva_tui.evals.graders",
]
HEAVY = ["torch", "transformers", "textual", "bitsandbytes", "xgrammar", "peft"]

# Every layer of the package, highest first: a layer may import the layers below it, never one above.
# "|": independent siblings (neither imports the other); ":": siblings that may import each other.
# Where this differs from the plain picture (tui/cli/server > ... > conductor, pool > inference,
# core > settings), the code says why: the command line starts the app and the server, so it stands
# above them; the conductor runs on the pool, so it stands above it; the store is the engine's
# sibling, which neither reads; the settings read core's types (a preference) and the sandbox's,
# so core, the sandbox, the catalog and the paths, which import nothing of Stiva, are the bottom.
LAYERS = [
    "cli",
    "tui | server",
    "train",
    "bench",
    "sim",
    "evals",
    "runtime",
    "engine | store",
    "conductor",
    "pool",
    "inference | config | config_template | keys",
    "core | sandbox | catalog | paths",
]


def _names(layers: list[str]) -> set[str]:
    return {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}


ABOVE_THE_ENGINE = _names(LAYERS[: LAYERS.index("runtime") + 1])


def test_core_imports_neither_textual_nor_torch():
    code = (
        "import importlib, sys\n"
        f"for name in {CORE!r}: importlib.import_module(name)\n"
        f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"heavy modules imported at module level: {result.stdout.strip()}"


# --- the graph ---------------------------------------------------------------------------------


def _node(module: str) -> str | None:
    """The part of the package a module belongs to: `stiva_tui.pool.client` -> "pool"."""
    parts = module.split(".")
    if parts[0] != "stiva_tui" or len(parts) < 2:
        return None
    return parts[1]


def _imports(path: Path) -> set[str]:
    """Every stiva_tui module `path` imports, at module level or inside functions."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    package = package.removesuffix(".__init__")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None:  # `from .. import paths`: the names are modules
                found.update(f"{target}.{alias.name}" for alias in node.names)
            else:
                found.add(target)
    return {m for m in found if m.startswith("stiva_tui.")}


def _graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        source = _node(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        for target in _imports(path):
            dest = _node(target)
            if source and dest and dest != source and dest != "__init__":
                edges[source].add(dest)
    return edges


def test_the_graph_is_read_from_the_code():
    """The parser sees lazy imports and relative ones (so the checks below can fail)."""
    edges = _graph()
    assert "inference" in edges["pool"]  # pool/embedded.py imports inference lazily and at top
    assert "core" in edges["engine"]
    assert "runtime" in edges["tui"]


def test_no_circle_between_subpackages():
    edges = _graph()
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycle = path[path.index(nxt) :] + [nxt]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_the_contract_names_every_layer_in_order_and_every_module_has_one():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    assert layers["layers"] == LAYERS and layers["containers"] == ["stiva_tui"] and layers["exhaustive"] is True
    named = _names(LAYERS)
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    modules |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert modules == named, f"give these a layer: {sorted(modules - named)}; gone: {sorted(named - modules)}"


def test_lint_imports_keeps_every_contract():
    """import-linter's contracts (pyproject.toml): the layers in order, evals and the simulated pool
    apart from the runtime and the history, and no circle between siblings."""
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert command, "import-linter is not installed: pip install -e '.[test]'"
    result = subprocess.run([command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " kept, 0 broken" in result.stdout, result.stdout[-2000:]


def test_evals_and_the_simulated_pool_stand_apart():
    """Evals import the sandbox and core's bounded file reading alone; the simulated pool builds on
    evals and the settings, never on the bench, the runtime or the history (its replay gets a
    bench's answers from its caller)."""
    edges = _graph()
    assert edges["evals"] == {"sandbox", "core"}
    assert edges["sim"] <= {"evals", "config"}, sorted(edges["sim"])


def test_the_pool_imports_no_conductor_engine_or_store():
    assert not _graph()["pool"] & {"conductor", "engine", "store", *ABOVE_THE_ENGINE}


def test_nothing_below_the_front_ends_imports_them_or_the_runtime():
    edges = _graph()
    for source, targets in edges.items():
        if source in ABOVE_THE_ENGINE:
            continue
        assert not targets & ABOVE_THE_ENGINE, f"{source} imports {sorted(targets & ABOVE_THE_ENGINE)}"


def test_the_sandbox_imports_nothing_of_stiva():
    """What runs untrusted code depends on nothing above it (and its child side on nothing at all)."""
    assert not _graph()["sandbox"], "the sandbox must stand alone: " + ", ".join(sorted(_graph()["sandbox"]))
    assert "sandbox" in _graph()["evals"]  # the parser sees the arrow into it


def test_the_core_imports_nothing_of_stiva():
    assert not _graph()["core"], "core must stand alone: " + ", ".join(sorted(_graph()["core"]))


def test_inference_knows_no_plans_pools_or_events():
    assert not _graph()["inference"] & {"conductor", "pool", "engine", "store", "core", *ABOVE_THE_ENGINE}
