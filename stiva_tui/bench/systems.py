"""The systems a bench measures, by name, and the session mode each one runs as.

- `conductor`: the configured conductor, with the config's rounds and step limit;
- `conductor-mini`: the preset the server also uses (at most 2 steps, one round);
- `moa`: Mixture-of-Agents with the [moa] config (or its defaults);
- `direct:MODEL`: one call to one pool model, never a fallback (that would measure another model);
- `adapter:DIR`: the conductor with that LoRA adapter, to set a trained adapter against its
  base: on the base `stiva train` recorded beside it (embedded or local), else the configured one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..inference.checkpoints import adapter_base
from ..runtime.modes import MOA_SYSTEM, PRESETS, ConductorMode, ConductorVariant, DirectMode, MoAMode, Mode

SYSTEM_HELP = "conductor, conductor-mini, moa, direct:MODEL, adapter:DIR"


class SystemError(ValueError):
    """A system name that is not one of SYSTEM_HELP, or that names what does not exist."""


@dataclass(frozen=True)
class System:
    name: str
    mode: Mode
    # RunOptions the system's runs use over the config's.
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def conductor(self) -> bool:
        return isinstance(self.mode, ConductorMode)


def parse_system(spec: str) -> System:
    name = spec.strip()
    if name == "conductor":
        return System(name, ConductorMode())
    if name in PRESETS:
        return System(name, ConductorMode(preset=name))
    if name == MOA_SYSTEM:
        return System(name, MoAMode())
    kind, colon, rest = name.partition(":")
    if colon and kind == "direct" and rest.strip():
        return System(f"direct:{rest.strip()}", DirectMode(rest.strip()), {})
    if colon and kind == "adapter" and rest.strip():
        folder = Path(rest.strip()).expanduser()
        if not (folder / "adapter_config.json").is_file():
            raise SystemError(f"{name}: {folder} holds no LoRA adapter (no adapter_config.json)")
        # An adapter from `stiva train` runs on the base it was trained on; another one on the
        # configured conductor.
        base = adapter_base(str(folder))
        if base == "embedded":
            variant = ConductorVariant(backend="embedded", adapter=str(folder))
        elif base:
            variant = ConductorVariant(backend="local", model=base, adapter=str(folder))
        else:
            variant = ConductorVariant(adapter=str(folder))
        return System(f"adapter:{folder}", ConductorMode(variant=variant))
    raise SystemError(f"unknown system {name!r}: use {SYSTEM_HELP}")


def parse_systems(specs: Iterable[str]) -> list[System]:
    """Systems from `--systems` values: each comma-separated, and the flag may repeat (a path
    holding a comma goes in a value of its own: `--systems adapter:/a,b` would split it, so an
    `adapter:` value is taken whole when it names an existing folder)."""
    systems: list[System] = []
    for value in specs:
        parts = [value] if value.startswith("adapter:") and Path(value[8:]).expanduser().is_dir() else value.split(",")
        for part in parts:
            if part.strip():
                system = parse_system(part)
                if any(s.name == system.name for s in systems):
                    raise SystemError(f"system {system.name!r} is named twice")
                systems.append(system)
    if not systems:
        raise SystemError(f"no systems to measure: use --systems with {SYSTEM_HELP}")
    return systems
