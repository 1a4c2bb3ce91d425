"""What a run would have cost another way: the tree's "why this plan?" counterfactual.

    estimates = counterfactuals(state, models, moa=(proposers, aggregator, layers))

From the prices and this run's measured tokens, without any call: the cheapest single model (one
direct call) and Mixture-of-Agents (its proposers, layers and aggregator, as `stiva bench` runs
it). The question's tokens are the smallest prompt of a step that read only the question (the
worker prompt with nothing added), else an estimate from its text; the answer's tokens are what
the step that wrote the final answer produced. Every figure is an estimate and says so: another
model writes another length of answer.

`reason_line(reasoning)` is the conductor's own reasoning shortened to one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..core.run_state import RunState
from ..core.usage import estimate_tokens

__all__ = ["Estimate", "counterfactuals", "reason_line"]


@dataclass(frozen=True)
class Estimate:
    label: str  # "sim:calc alone" (one direct call), "MoA 3×2" (3 proposers, 2 layers, then the aggregator)
    cost_usd: float
    tokens: int


class Priced(Protocol):
    """What an estimate reads of a pool model (pool.types.PoolModel is one)."""

    @property
    def id(self) -> str: ...
    @property
    def price_in(self) -> float: ...
    @property
    def price_out(self) -> float: ...
    @property
    def kind(self) -> str: ...


def _measured(state: RunState) -> tuple[int, int]:
    """(question tokens, answer tokens) as this run measured them."""
    steps = [s for r in state.rounds for s in r.steps if s.status == "finished"]
    alone = [s.prompt_tokens for s in steps if not s.access and not s.access_all and s.prompt_tokens]
    question = min(alone) if alone else estimate_tokens(state.question)
    final = [s for s in steps if s.writes_answer] or steps[-1:]
    answer = final[-1].completion_tokens if final and final[-1].completion_tokens else estimate_tokens(state.answer)
    return max(question, 1), max(answer, 1)


def _price(models: Sequence[Priced], model_id: str) -> tuple[float, float] | None:
    for model in models:
        if model.id == model_id:
            return model.price_in, model.price_out
    return None


def counterfactuals(
    state: RunState, models: Sequence[Priced], moa: tuple[Sequence[str], str, int] | None = None
) -> list[Estimate]:
    """The cheapest single model and MoA for `state`'s question (an empty list before the run has
    an answer or with no models). `models` are PoolModel-likes (id, price_in, price_out, kind)."""
    if state.status != "finished" or not models:
        return []
    q, a = _measured(state)
    estimates: list[Estimate] = []
    # The cheapest of the models with a price (a price of 0 is as often "unknown" as "free"); with
    # none priced, the first real model, in tokens.
    priced = [
        ((m.price_in * q + m.price_out * a) / 1e6, i, m)
        for i, m in enumerate(models)
        if m.kind != "embedded" and m.price_in + m.price_out > 0
    ]
    real = [m for m in models if m.kind != "embedded"] or list(models)
    cost, _, cheapest = min(priced) if priced else (0.0, 0, real[0])
    estimates.append(Estimate(f"{cheapest.id} alone", cost, q + a))
    if moa is not None:
        proposers, aggregator, layers = moa
        k = len(proposers)
        found = [_price(models, m) for m in (*proposers, aggregator)]
        prices = [p for p in found if p is not None]
        if k and len(prices) == len(found):
            total = tokens = 0.0
            for layer in range(layers):  # layer 0 reads the question; each later one, the layer before
                prompt = q + (k * a if layer else 0)
                for price_in, price_out in prices[:k]:
                    total += price_in * prompt + price_out * a
                    tokens += prompt + a
            price_in, price_out = prices[k]
            total += price_in * (q + k * a) + price_out * a
            tokens += q + k * a + a
            estimates.append(Estimate(f"MoA {k}×{layers}", total / 1e6, int(tokens)))  # proposers x layers
    return estimates


_NOTE = re.compile(r"\[Stiva:[^\]]*\]")
_PREFIX = re.compile(
    r"^(let me think about how to split this question into subtasks, which models to use for each, "
    r"and which step should see which answers\.?\s*)",
    re.IGNORECASE,
)


def reason_line(reasoning: str, limit: int = 100) -> str:
    """The conductor's reasoning as one line: its first sentence or so, Stiva's notes left out."""
    text = " ".join(_NOTE.sub(" ", reasoning or "").split())
    text = _PREFIX.sub("", text).strip()
    if not text:
        return ""
    sentence = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    if len(sentence) < 30 and len(text) > len(sentence):  # too short to say anything: take more
        sentence = text
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"
