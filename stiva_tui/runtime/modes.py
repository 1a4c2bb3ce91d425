"""How a question is answered: the modes a session can run, and the conductor's presets.

- `ConductorMode`: the conductor plans (optionally a preset's limits, and a conductor variant:
  another backend, model or LoRA adapter, e.g. a trained adapter set against its base);
- `DirectMode`: one call to one pool model;
- `MoAMode`: Mixture-of-Agents over pool models;
- `WorkflowMode`: a given workflow, run without planning (training rollouts, replays).

Each mode runs as a *system*, the name its runs are recorded under (`Mode.system`); reading a
system's name into a mode is `systems.py`, the one grammar of `ask --baseline`, compare columns
and `bench --systems`. "conductor:base" (and "conductor-mini:base") is the conductor without the
configured LoRA adapter: a trained adapter compared, and voted on, beside its base.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.workflow import Workflow


@dataclass(frozen=True)
class Preset:
    """Limits a named conductor configuration puts on a run; None keeps the [conductor] config's."""

    max_steps: int | None
    rounds: int | None
    description: str


MINI = "conductor-mini"  # routes with [conductor] router where one is set (conductor/router.py)

# The one preset table: the app, `stiva ask`, `stiva bench` and `stiva serve` (as model names)
# all read it, so "conductor" means the same run everywhere.
PRESETS: dict[str, Preset] = {
    "conductor": Preset(None, None, "orchestrated: the config's [conductor] max_steps and rounds"),
    MINI: Preset(2, 1, "orchestrated: up to 2 steps, 1 round (lower latency)"),
}

MOA_SYSTEM = "moa"
# A conductor system's name with this suffix: the same conductor without [conductor] adapter.
BASE_SUFFIX = ":base"


@dataclass(frozen=True)
class ConductorVariant:
    """A conductor other than the configured one; unset fields keep the [conductor] config's."""

    backend: str | None = None
    model: str | None = None
    adapter: str | None = None
    base: bool = False  # without the configured adapter: the base the adapter was trained from

    def label(self) -> str:
        parts = [p for p in (self.backend, self.model) if p]
        if self.adapter:
            parts.append(f"+{self.adapter}")
        elif self.base:
            parts.append("base")
        return ":".join(parts) or "default"


@dataclass(frozen=True)
class ConductorMode:
    # None: the [conductor] config's rounds and max_steps; else a key of PRESETS.
    preset: str | None = None
    variant: ConductorVariant | None = None

    @property
    def system(self) -> str:
        name = self.preset or "conductor"
        return name + BASE_SUFFIX if self.variant is not None and self.variant.base else name


@dataclass(frozen=True)
class DirectMode:
    model: str

    @property
    def system(self) -> str:
        return f"direct:{self.model}"


@dataclass(frozen=True)
class MoAMode:
    # Empty: [moa] proposers from the config, else the first hosted pool models.
    proposers: tuple[str, ...] = ()
    aggregator: str | None = None
    layers: int | None = None
    # Self-MoA: the proposers are samples of one model, each told which sample it is (so each
    # is a draw of its own, even where the provider caches identical prompts).
    samples: bool = False

    @property
    def system(self) -> str:
        return "self-moa" if self.samples else MOA_SYSTEM


@dataclass(frozen=True)
class WorkflowMode:
    workflow: Workflow
    models: tuple[str, ...]  # the pool model id of each model index the workflow uses
    name: str = "workflow"  # the system its runs are recorded as (a bench's `chain:A>B`)

    @property
    def system(self) -> str:
        return self.name


Mode = ConductorMode | DirectMode | MoAMode | WorkflowMode


def conductor_variant(mode: ConductorMode, router: str | None) -> ConductorVariant | None:
    """The conductor a conductor mode runs: its own variant, else conductor-mini's one-pass router
    where `[conductor] router` (`router`) names one, else None (the configured conductor)."""
    if mode.variant is None and mode.preset == MINI and router:
        return ConductorVariant(backend="router", model=router)
    return mode.variant
