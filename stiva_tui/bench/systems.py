"""The systems a bench measures, by name, and the session mode each one runs as.

- `conductor`: the configured conductor, with the config's rounds and step limit;
- `conductor-mini`: the preset the server also uses (at most 2 steps, one round);
- `moa`: Mixture-of-Agents with the [moa] config (or its defaults);
- `direct:MODEL`: one call to one pool model, never a fallback (that would measure another model);
- `adapter:DIR`: the conductor with that LoRA adapter, to set a trained adapter against its
  base: on the base `stiva train` recorded beside it (embedded or local), else the configured one;
- `self-moa[:MODEL]`: Self-MoA (arXiv 2502.00674): three samples of one model, aggregated by that
  model; MODEL defaults to the [moa] aggregator, else the dearest available model (the strongest
  one a price list can tell);
- `direct:*`: `direct:MODEL` for every available pool model;
- `chain:A>B[>C...]`: a fixed chain: A answers, each next model reads the step before and checks
  it, the last one's answer is the run's (`A>A`: a model checking its own draft); what a second
  step is worth on the pool, and graded pairs (`stiva train --from-votes --bench`) with two-step plans;
- `oracle` and `random`, the routing field's bounds, computed from the bench's `direct:` runs
  with no call of their own (see `baselines`): per item the cheapest single model that is right,
  and a uniformly random single model;
- `SYSTEM@LEVEL` for a conductor system (`conductor@cheap`, `adapter:DIR@best`): it plans under that
  cost and latency preference (core/preference.py) instead of the config's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.preference import PreferenceError, parse_preference
from ..inference.checkpoints import adapter_base
from ..engine.baselines import chain_workflow
from ..runtime.modes import (MOA_SYSTEM, PRESETS, ConductorMode, ConductorVariant, DirectMode, MoAMode, Mode,
                             WorkflowMode)

SYSTEM_HELP = ("conductor, conductor-mini, moa, self-moa[:MODEL], direct:MODEL, direct:*, chain:A>B, adapter:DIR, "
               "oracle, random; "
               "a conductor system@LEVEL (conductor@cheap) plans under that preference")
DERIVED = ("oracle", "random")
SELF_MOA = "self-moa"
SELF_MOA_SAMPLES = 3


class SystemError(ValueError):
    """A system name that is not one of SYSTEM_HELP, or that names what does not exist."""


@dataclass(frozen=True)
class System:
    name: str
    mode: Mode | None  # None: a derived system (oracle, random), computed from the direct runs
    # RunOptions the system's runs use over the config's.
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def conductor(self) -> bool:
        return isinstance(self.mode, ConductorMode)

    @property
    def derived(self) -> bool:
        return self.mode is None


def parse_system(spec: str) -> System:
    name = spec.strip()
    base, at, level = name.rpartition("@")
    if at and base and not Path(name).expanduser().exists():  # conductor@cheap: a preference per system
        try:
            preference = parse_preference(level)
        except PreferenceError as exc:
            raise SystemError(f"{name}: {exc}") from None
        system = parse_system(base)
        if not system.conductor:
            raise SystemError(f"{name}: only a conductor system (conductor, conductor-mini, adapter:DIR) takes "
                              "a preference; the others have no plan to make")
        return System(f"{system.name}@{level}", system.mode, {**system.options, "preference": str(preference)})
    if name == "conductor":
        return System(name, ConductorMode())
    if name in PRESETS:
        return System(name, ConductorMode(preset=name))
    if name == MOA_SYSTEM:
        return System(name, MoAMode())
    if name in DERIVED:
        return System(name, None)
    if name == SELF_MOA:  # its model is found in the pool: see resolve_systems
        return System(name, MoAMode(layers=1, samples=True))
    kind, colon, rest = name.partition(":")
    if colon and kind == SELF_MOA and rest.strip():
        model = rest.strip()
        return System(name, self_moa_mode(model))
    if colon and kind == "direct" and rest.strip():
        return System(f"direct:{rest.strip()}", DirectMode(rest.strip()), {})
    if colon and kind == "chain":
        models = tuple(m.strip() for m in rest.split(">"))
        if len(models) < 2 or not all(models):
            raise SystemError(f"{name}: a chain names two or more models, each after a '>': chain:A>B")
        name = "chain:" + ">".join(models)
        return System(name, WorkflowMode(chain_workflow(len(models)), models, name))
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


def resolve_systems(systems: Sequence[System], models: Sequence[Any], moa_aggregator: str | None = None) -> list[System]:
    """Systems that need the pool, made concrete: `direct:*` becomes one `direct:MODEL` per
    available model, `self-moa` gets its model; `oracle` and `random` need direct systems."""
    out: list[System] = []
    for system in systems:
        if system.name == "direct:*":
            out += [parse_system(f"direct:{m.id}") for m in models
                    if not any(s.name == f"direct:{m.id}" for s in systems)]
        elif system.name == SELF_MOA:
            hosted = [m for m in models if m.kind != "embedded"] or list(models)
            if not hosted and not moa_aggregator:
                raise SystemError("self-moa: the pool has no model")
            model = moa_aggregator or max(hosted, key=lambda m: (m.price_in + m.price_out, m.id)).id
            mode = self_moa_mode(model)
            out.append(System(SELF_MOA, mode))
        else:
            out.append(system)
    known = {m.id for m in models}
    for system in out:  # a chain on a model the pool lacks would fail on every item
        missing = [m for m in system.mode.models if m not in known] if isinstance(system.mode, WorkflowMode) else []
        if missing:
            raise SystemError(f"{system.name}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in "
                              f"the pool; available: {', '.join(sorted(known))}")
    direct = [s for s in out if isinstance(s.mode, DirectMode)]
    for system in out:
        if system.derived and len(direct) < 2:
            raise SystemError(f"{system.name} is computed from the direct runs: add two or more direct:MODEL "
                              "systems, or direct:* for every pool model")
    return out


def self_moa_mode(model: str) -> MoAMode:
    """Self-MoA on `model`: its numbered samples, aggregated by itself, in one layer."""
    return MoAMode((model,) * SELF_MOA_SAMPLES, model, layers=1, samples=True)
