"""System names: the one grammar that `stiva ask --baseline`, compare columns and `stiva bench
--systems` read. A system is what answers a question, and the name its runs are recorded under.

- `conductor`: the configured conductor, with the config's rounds and step limit;
- `conductor-mini` (a key of `PRESETS`): the preset the server also uses (at most 2 steps, one round);
- `conductor:base`, `conductor-mini:base`: the same conductor without `[conductor] adapter`, to set a
  trained adapter beside its base;
- `moa`: Mixture-of-Agents with the [moa] config (or its defaults);
- `direct:MODEL`: one call to one pool model, never a fallback (that would measure another model);
- `adapter:DIR`: the conductor with that LoRA adapter, to set a trained adapter against its
  base: on the base `stiva train` recorded beside it (embedded or local), else the configured one;
- `self-moa[:MODEL]`: Self-MoA (arXiv 2502.00674): three samples of one model, aggregated by that
  model; MODEL defaults to the [moa] aggregator, else the dearest available model (the strongest
  one a price list can tell);
- `chain:A>B[>C...]`: a fixed chain: A answers, each next model reads the step before and checks
  it, the last one's answer is the run's (`A>A`: a model checking its own draft); what a second
  step is worth on the pool, and graded pairs (`stiva train --from-votes --bench`) with two-step plans;
- `vote:A+B+C`: the majority final answer of the models (core/answers.py reads each one's final
  answer by the question's kind; a tie goes to the earliest-listed model), called lazily: the first
  two of three, the third only where they disagree (engine/baselines.py); no model call of its own;
- `cascade:A+B>C`: an agreement cascade (FrugalGPT): A and B at once; where their final answers
  agree that is the answer, else C answers. Stages are separated by `>`; each stage before the last
  asks two or more models; the last is one model or a vote (`cascade:A+B>vote:C+D+E`). Steps not
  run are never paid;
- `router:DIR`: a one-pass router (`stiva train router`): the model, agreement cascade or vote it
  picks for the question (one model: the question sent as asked); `router:DIR@LEVEL` weighs cost
  and latency under a preference;
- `SYSTEM@LEVEL` for a conductor system (`conductor@cheap`, `adapter:DIR@best`): it plans under that
  cost and latency preference (core/preference.py) instead of the config's;
- measured by a bench only, since they are not one run of one question: `direct:*` (`direct:MODEL`
  for every available pool model), and `oracle` and `random`, the routing field's bounds, and its
  baselines `knn[@LEVEL]` and `best-single[@LEVEL]`, learnt from the bench's train items, all computed
  from the bench's `direct:` runs with no call of their own (`stiva_tui.bench.derived`).

The front ends, each a function here, read the same names the same way:

- `parse_systems(values)`: `stiva bench --systems` (and `stiva train --graded-systems`);
- `one_system(name, models)`: `stiva ask --baseline`, one run of one question;
- `column_system(name, models)`: a compare column. Columns also name pool models by their bare id
  (`gpt-5` for `direct:gpt-5`), as compare sessions and votes record them: that is the one name
  compare reads that the others do not.

A name none of them reads is a `SystemNameError` whose message says what to use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.preference import PreferenceError, parse_preference
from ..engine.baselines import cascade_workflow, chain_workflow, vote_workflow
from ..inference.adapter_manifest import adapter_base
from .modes import (
    BASE_SUFFIX,
    MOA_SYSTEM,
    PRESETS,
    ConductorMode,
    ConductorVariant,
    DirectMode,
    MoAMode,
    Mode,
    WorkflowMode,
)

__all__ = [
    "BENCH_ONLY",
    "DERIVED",
    "SELF_MOA",
    "SYSTEM_HELP",
    "System",
    "SystemNameError",
    "check_chain",
    "column_system",
    "is_conductor_system",
    "one_system",
    "parse_system",
    "parse_systems",
    "resolve_system",
    "self_moa_mode",
]

SYSTEM_HELP = (
    "conductor, conductor-mini, moa, self-moa[:MODEL], direct:MODEL, direct:*, chain:A>B, vote:A+B+C, "
    "cascade:A+B>C, cascade:A+B>vote:C+D+E, adapter:DIR, router:DIR, "
    "oracle, random, knn, best-single; "
    "a conductor system@LEVEL (conductor@cheap) plans under that preference, a router@LEVEL (knn@cheap) routes so"
)
DERIVED_ROUTERS = ("knn", "best-single")  # learnt from a bench's train items (bench/derived.py)
DERIVED = ("oracle", "random", *DERIVED_ROUTERS)
EVERY_MODEL = "direct:*"
BENCH_ONLY = (EVERY_MODEL, *DERIVED)
SELF_MOA = "self-moa"
SELF_MOA_SAMPLES = 3


class SystemNameError(ValueError):
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


def is_conductor_system(system: str) -> bool:
    """Whether `system` names a conductor run: "conductor", a preset, either with ":base"."""
    name = system.removesuffix(BASE_SUFFIX)
    return name in PRESETS


# --- the grammar ------------------------------------------------------------------------------


def parse_system(spec: str) -> System:
    """The system `spec` names, by the grammar above (SystemNameError when it names none)."""
    name = spec.strip()
    base, at, level = name.rpartition("@")
    # conductor@cheap: a preference per system. A model's id may hold an "@" of its own
    # (Llama-3.1-405B-Inst@sambanova), so the systems that name models never take one.
    names_models = name.partition(":")[0] in ("direct", "chain", "vote", "cascade", SELF_MOA)
    if at and base and not names_models and not Path(name).expanduser().exists():
        try:
            preference = parse_preference(level)
        except PreferenceError as exc:
            raise SystemNameError(f"{name}: {exc}") from None
        system = parse_system(base)
        if system.name in DERIVED_ROUTERS:  # knn@cheap: the router weighs cost under that preference
            return System(f"{system.name}@{level}", None, {"preference": str(preference)})
        if not system.conductor:
            raise SystemNameError(
                f"{name}: only a conductor system (conductor, conductor-mini, adapter:DIR, router:DIR) or a "
                "derived router (knn, best-single) takes a preference; the others have no plan to make"
            )
        return System(f"{system.name}@{level}", system.mode, {**system.options, "preference": str(preference)})
    if name == "conductor":
        return System(name, ConductorMode())
    if name in PRESETS:
        return System(name, ConductorMode(preset=name))
    if name.endswith(BASE_SUFFIX) and is_conductor_system(name):  # conductor:base, beside its adapter
        preset = name.removesuffix(BASE_SUFFIX)
        return System(
            name, ConductorMode(preset=None if preset == "conductor" else preset, variant=ConductorVariant(base=True))
        )
    if name == MOA_SYSTEM:
        return System(name, MoAMode())
    if name in DERIVED:
        return System(name, None)
    if name == SELF_MOA:  # its model is found in the pool: see resolve_system
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
            raise SystemNameError(f"{name}: a chain names two or more models, each after a '>': chain:A>B")
        name = "chain:" + ">".join(models)
        return System(name, WorkflowMode(chain_workflow(len(models)), models, name))
    if colon and kind == "vote":
        models = _models_of(name, rest, "+")
        if len(models) < 2:
            raise SystemNameError(f"{name}: a vote names two or more models, each after a '+': vote:A+B+C")
        name = "vote:" + "+".join(models)
        return System(name, WorkflowMode(vote_workflow(len(models)), models, name))
    if colon and kind == "cascade":
        return _cascade(name, rest)
    if colon and kind == "adapter" and rest.strip():
        folder = Path(rest.strip()).expanduser()
        if not (folder / "adapter_config.json").is_file():
            raise SystemNameError(f"{name}: {folder} holds no LoRA adapter (no adapter_config.json)")
        # An adapter from `stiva train` runs on the base it was trained on; another one on the
        # configured conductor.
        trained_on = adapter_base(str(folder))
        if trained_on == "embedded":
            variant = ConductorVariant(backend="embedded", adapter=str(folder))
        elif trained_on:
            variant = ConductorVariant(backend="local", model=trained_on, adapter=str(folder))
        else:
            variant = ConductorVariant(adapter=str(folder))
        return System(f"adapter:{folder}", ConductorMode(variant=variant))
    if colon and kind == "router" and rest.strip():
        folder = Path(rest.strip()).expanduser()
        if not (folder / "router.json").is_file():
            raise SystemNameError(
                f"{name}: {folder} holds no router (no router.json); train one: stiva train router SUITE --out DIR"
            )
        return System(f"router:{folder}", ConductorMode(variant=ConductorVariant(backend="router", model=str(folder))))
    raise SystemNameError(f"unknown system {name!r}: use {SYSTEM_HELP}")


def _models_of(name: str, text: str, separator: str) -> tuple[str, ...]:
    models = tuple(m.strip() for m in text.split(separator))
    if not all(models):
        raise SystemNameError(f"{name}: an empty model name (two '{separator}' in a row, or one at an end)")
    return models


_CASCADE_HELP = "cascade:A+B>C (A and B; C only where they disagree), or cascade:A+B>vote:C+D+E"


def _cascade(name: str, rest: str) -> System:
    """`cascade:A+B>C`, `cascade:A+B>vote:C+D+E`, `cascade:A+B>C+D>E`: stages of models asked at
    once; each stage before the last ends where its answers agree."""
    stages = [stage.strip() for stage in rest.split(">")]
    if len(stages) < 2 or not all(stages):
        raise SystemNameError(f"{name}: a cascade has two or more stages, each after a '>': {_CASCADE_HELP}")
    last_votes = stages[-1].startswith("vote:")
    if last_votes:
        stages[-1] = stages[-1].removeprefix("vote:")
    groups = [_models_of(name, stage, "+") for stage in stages]
    for group in groups[:-1]:
        if len(group) < 2:
            raise SystemNameError(
                f"{name}: each stage before the last asks two or more models, whose agreement ends the cascade: "
                f"{_CASCADE_HELP}"
            )
    if len(groups[-1]) != 1 and not last_votes:
        raise SystemNameError(f"{name}: the last stage is one model or a vote (vote:C+D+E): {_CASCADE_HELP}")
    if last_votes and len(groups[-1]) < 2:
        raise SystemNameError(f"{name}: a vote names two or more models: {_CASCADE_HELP}")
    text = ">".join("+".join(g) for g in groups[:-1]) + ">" + ("vote:" if last_votes else "") + "+".join(groups[-1])
    canonical = f"cascade:{text}"
    models = tuple(m for g in groups for m in g)
    workflow = cascade_workflow([len(g) for g in groups], last_votes)
    return System(canonical, WorkflowMode(workflow, models, canonical))


def self_moa_mode(model: str) -> MoAMode:
    """Self-MoA on `model`: its numbered samples, aggregated by itself, in one layer."""
    return MoAMode((model,) * SELF_MOA_SAMPLES, model, layers=1, samples=True)


def resolve_system(system: System, models: Sequence[Any], moa_aggregator: str | None = None) -> System:
    """`system` made concrete on the pool (`models`: what `Runtime.models` holds): `self-moa` gets its
    model; a chain must name pool models. `direct:*`, `oracle` and `random` are a bench's to resolve."""
    if system.name == SELF_MOA:
        hosted = [m for m in models if m.kind != "embedded"] or list(models)
        if not hosted and not moa_aggregator:
            raise SystemNameError("self-moa: the pool has no model")
        model = moa_aggregator or max(hosted, key=lambda m: (m.price_in + m.price_out, m.id)).id
        return System(SELF_MOA, self_moa_mode(model))
    check_chain(system, {m.id for m in models})
    return system


def check_chain(system: System, known: set[str]) -> None:
    """SystemNameError when `system` is a chain on a model the pool lacks (it would fail on every question)."""
    missing = [m for m in system.mode.models if m not in known] if isinstance(system.mode, WorkflowMode) else []
    if missing:
        raise SystemNameError(
            f"{system.name}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in "
            f"the pool; available: {', '.join(sorted(known))}"
        )


# --- the front ends -----------------------------------------------------------------------------


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
                    raise SystemNameError(f"system {system.name!r} is named twice")
                systems.append(system)
    if not systems:
        raise SystemNameError(f"no systems to measure: use --systems with {SYSTEM_HELP}")
    return systems


def one_system(spec: str, models: Sequence[Any], moa_aggregator: str | None = None) -> System:
    """The system `spec` names, as one run of one question on the pool `models` (`stiva ask
    --baseline`): what a bench alone measures is refused, saying so."""
    return resolve_system(_one_run(parse_system(spec)), models, moa_aggregator)


def column_system(name: str, models: Sequence[Any] | None = None, moa_aggregator: str | None = None) -> System:
    """The system of a compare column: a system name, read as `one_system` reads it, or a pool
    model's bare id (`llama3:base` stays the model of that id). Without `models` (the pool unknown),
    any name the grammar does not read is taken for a pool model's id, and a chain is not checked."""
    try:
        system = parse_system(name)
    except SystemNameError:
        if models is None or any(m.id == name for m in models):
            return System(name, DirectMode(name))  # a pool model, by its id
        raise
    system = _one_run(system)
    if models is not None or system.name == SELF_MOA:
        system = resolve_system(system, models or (), moa_aggregator)
    return system


def _one_run(system: System) -> System:
    if system.name in BENCH_ONLY or system.derived:
        what = (
            "names every pool model"
            if system.name == EVERY_MODEL
            else "is computed from a bench's direct: runs, with no run of its own"
        )
        raise SystemNameError(
            f"{system.name} {what}: only stiva bench measures it; name one system (conductor, moa, direct:MODEL, ...)"
        )
    return system
