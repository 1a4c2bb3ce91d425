"""The runtime: the typed composition root (`Runtime`) and its session service (`Sessions`).

Front ends (the TUI, the CLI, the server, and next the benchmark and training) build one
`Runtime` from the config and run every question through `runtime.sessions`.
"""

from .modes import (
    PRESETS,
    ConductorMode,
    ConductorVariant,
    DirectMode,
    MoAMode,
    Mode,
    Preset,
    WorkflowMode,
    mode_for_system,
)
from .root import Runtime, StartupError
from .sessions import Ask, AskError, CompareStart, Outcome, Sessions

__all__ = [
    "PRESETS", "Ask", "AskError", "CompareStart", "ConductorMode", "ConductorVariant", "DirectMode", "MoAMode",
    "Mode", "Outcome", "Preset", "Runtime", "Sessions", "StartupError", "WorkflowMode", "mode_for_system",
]
