"""The fallback model: what answers, in one step, when a plan cannot run.

A plan the guard rejects (conductor/guard.py), or no plan at all (the planner wrote none after its
tries), becomes one direct step on the fallback model, chosen by evidence, in this order:

1. **router**: a predictor's chances, when one is given: `predict(question, model_ids)` returns
   each model's predicted chance of a right answer (or None); the best chance wins.
2. **benches**: the pool's recorded accuracy in the user's benches, `{model: (correct, graded)}`
   over the graded `direct:MODEL` items of every bench in the history (the runtime reads it and
   passes it down). Only models with `min_graded` graded items or more count, and only when two
   pool models or more do: one model's record alone says nothing about which model is better.
   The most accurate wins (then the one with more items, then the cheaper).
3. **config**: `[conductor] fallback_model`, when it names an available pool model.
4. **priciest**: the priciest model that is not the embedded one (list prices order a provider's
   models by capability), else model 0; where every candidate is free (local models), the first,
   and the reason says so rather than calling a free model the priciest.

The embedded model is never the fallback of rules 1, 2 and 4 unless it is the whole pool; the
config may name it. `Fallback.reason` says in one line which rule chose it and why, for the tree.
Pure: nothing here reads the history or calls a model.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..pool.types import PoolModel

__all__ = ["MIN_GRADED", "Fallback", "FallbackEvidence", "Predictor", "choose_fallback"]

log = logging.getLogger(__name__)

# A model's chance of a right answer on `question`, per model id (the router's prediction); None: no opinion.
Predictor = Callable[[str, Sequence[str]], Mapping[str, float] | None]
MIN_GRADED = 20  # graded bench items a model needs before its recorded accuracy counts
FallbackRule = Literal["router", "benches", "config", "priciest"]


@dataclass(frozen=True)
class FallbackEvidence:
    predict: Predictor | None = None
    accuracy: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # model id -> (correct, graded)
    model: str = ""  # [conductor] fallback_model; "" for none
    min_graded: int = MIN_GRADED


@dataclass(frozen=True)
class Fallback:
    index: int  # into the pool as the engine numbers it
    model: str
    rule: FallbackRule
    reason: str  # one line: "fallback: gpt-4o-mini, best recorded accuracy 81% over 200 bench items"


def choose_fallback(models: Sequence[PoolModel], question: str, evidence: FallbackEvidence | None = None) -> Fallback:
    """The model that answers `question` in one step when its plan cannot run (see the module)."""
    if not models:
        raise ValueError("the pool is empty: there is no fallback model")
    evidence = evidence or FallbackEvidence()
    real = [i for i, m in enumerate(models) if m.kind != "embedded"]
    candidates = real or list(range(len(models)))
    return (
        _by_router(models, candidates, question, evidence.predict)
        or _by_benches(models, candidates, evidence)
        or _by_config(models, evidence.model)
        or _priciest(models, candidates, evidence.model)
    )


def _price(model: PoolModel) -> float:
    return model.price_in + model.price_out


def _by_router(
    models: Sequence[PoolModel], candidates: list[int], question: str, predict: Predictor | None
) -> Fallback | None:
    if predict is None:
        return None
    ids = [models[i].id for i in candidates]
    try:
        chances = predict(question, ids)
    except Exception as exc:  # noqa: BLE001 - a broken router leaves the choice to the next rule
        log.warning("the router could not predict the fallback model: %s: %s", type(exc).__name__, exc)
        return None
    if not chances:
        return None
    known = [
        (float(chances[models[i].id]), -_price(models[i]), -i)
        for i in candidates
        if isinstance(chances.get(models[i].id), int | float) and math.isfinite(chances[models[i].id])
    ]
    if not known:
        return None
    ranked = sorted(known, reverse=True)
    chance, _, index = ranked[0]
    best = models[-index]
    runner_up = f" (runner-up {models[-ranked[1][2]].id} {ranked[1][0]:.0%})" if len(ranked) > 1 else ""
    return Fallback(
        -index, best.id, "router", f"fallback: {best.id}, the router's best predicted chance {chance:.0%}{runner_up}"
    )


def _by_benches(models: Sequence[PoolModel], candidates: list[int], evidence: FallbackEvidence) -> Fallback | None:
    measured = []
    for i in candidates:
        correct, graded = evidence.accuracy.get(models[i].id, (0, 0))
        if graded >= max(1, evidence.min_graded):
            measured.append((correct / graded, graded, -_price(models[i]), -i))
    if len(measured) < 2:
        return None
    ranked = sorted(measured, reverse=True)
    accuracy, graded, _, index = ranked[0]
    best = models[-index]
    second = ranked[1]
    return Fallback(
        -index,
        best.id,
        "benches",
        f"fallback: {best.id}, best recorded accuracy {accuracy:.0%} over {graded} bench items "
        f"(next: {models[-second[3]].id}, {second[0]:.0%} over {second[1]})",
    )


def _by_config(models: Sequence[PoolModel], model_id: str) -> Fallback | None:
    for i, model in enumerate(models):
        if model_id and model.id == model_id:
            return Fallback(i, model.id, "config", f"fallback: {model.id}, [conductor] fallback_model")
    return None


def _priciest(models: Sequence[PoolModel], candidates: list[int], configured: str) -> Fallback:
    index = -max((_price(models[i]), -i) for i in candidates)[1]
    missing = f"; fallback_model {configured} is not available" if configured else ""
    # every candidate free (local models): no price orders them, so the first is taken, and said so
    what = "the priciest model" if _price(models[index]) > 0 else "the pool's first model (all are free)"
    return Fallback(
        index,
        models[index].id,
        "priciest",
        f"fallback: {models[index].id}, {what} (no router, no bench record, no fallback_model{missing})",
    )
