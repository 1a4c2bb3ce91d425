"""A bench's systems made concrete on the pool. The names themselves, and what each one runs, are
`stiva_tui.runtime.systems` (the one grammar `ask --baseline`, compare columns and `bench --systems`
read); what only a bench measures is resolved here: `direct:*` becomes one `direct:MODEL` per pool
model, and `oracle`, `random`, `knn[@LEVEL]` and `best-single[@LEVEL]` (computed from the `direct:`
runs, see `derived`) need two of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..runtime.modes import DirectMode
from ..runtime.systems import EVERY_MODEL, SELF_MOA, System, SystemNameError, check_chain, parse_system, resolve_system

__all__ = ["resolve_systems"]


def resolve_systems(
    systems: Sequence[System], models: Sequence[Any], moa_aggregator: str | None = None
) -> list[System]:
    """Systems that need the pool, made concrete: `direct:*` becomes one `direct:MODEL` per
    available model, `self-moa` gets its model; `oracle` and `random` need direct systems."""
    out: list[System] = []
    for system in systems:
        if system.name == EVERY_MODEL:
            out += [
                parse_system(f"direct:{m.id}") for m in models if not any(s.name == f"direct:{m.id}" for s in systems)
            ]
        elif system.name == SELF_MOA:
            out.append(resolve_system(system, models, moa_aggregator))
        else:
            out.append(system)
    known = {m.id for m in models}
    for system in out:  # a chain on a model the pool lacks would fail on every item
        check_chain(system, known)
    direct = [s for s in out if isinstance(s.mode, DirectMode)]
    for system in out:
        if system.derived and len(direct) < 2:
            raise SystemNameError(
                f"{system.name} is computed from the direct runs: add two or more direct:MODEL "
                "systems, or direct:* for every pool model"
            )
    return out
