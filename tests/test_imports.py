"""Import hygiene: the core loads without Textual or torch, so the CLI, server and tests stay fast."""

from __future__ import annotations

import subprocess
import sys

CORE = [
    "stiva_tui.config", "stiva_tui.paths", "stiva_tui.secrets", "stiva_tui.runtime", "stiva_tui.cli",
    "stiva_tui.engine.executor", "stiva_tui.engine.events",
    "stiva_tui.conductor.workflow", "stiva_tui.conductor.prompt", "stiva_tui.conductor.remote",
    "stiva_tui.conductor.select", "stiva_tui.conductor.local", "stiva_tui.conductor.embedded",
    "stiva_tui.conductor.grammar", "stiva_tui.conductor.loader",
    "stiva_tui.pool.client", "stiva_tui.pool.registry", "stiva_tui.pool.discovery", "stiva_tui.pool.embedded",
    "stiva_tui.pool.catalog", "stiva_tui.pool.listing", "stiva_tui.store", "stiva_tui.store.export",
    "stiva_tui.engine.run_state", "stiva_tui.cli_view",
]
HEAVY = ["torch", "transformers", "textual", "bitsandbytes", "xgrammar", "peft"]


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
