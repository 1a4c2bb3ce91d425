"""The runtime: the typed composition root (`Runtime`), its session service (`Sessions`), and the
one grammar of system names (`systems`).

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
)
from .root import Runtime, StartupError
from .sessions import Ask, AskError, CompareStart, Fork, ForkOutcome, Outcome, Sessions
from .systems import System, SystemNameError, column_system, one_system, parse_system, parse_systems

__all__ = [
    "PRESETS",
    "Ask",
    "AskError",
    "Fork",
    "ForkOutcome",
    "CompareStart",
    "ConductorMode",
    "ConductorVariant",
    "DirectMode",
    "MoAMode",
    "Mode",
    "Outcome",
    "Preset",
    "Runtime",
    "Sessions",
    "StartupError",
    "System",
    "SystemNameError",
    "WorkflowMode",
    "column_system",
    "one_system",
    "parse_system",
    "parse_systems",
]
