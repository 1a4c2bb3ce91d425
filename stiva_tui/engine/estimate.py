"""What a run would have cost another way: the tree's "why this plan?" counterfactual.

    estimates = counterfactuals(state, models, moa=(proposers, aggregator, layers))

From the prices and this run's measured tokens, without any call: the cheapest single model (one
direct call) and Mixture-of-Agents (its proposers, layers and aggregator, as `stiva bench` runs
it). The question's tokens are the smallest prompt of a step that read only the question (the
worker prompt with nothing added), else an estimate from its text; the answer's tokens are what
the step that wrote the final answer produced. Every figure is an estimate and says so: another
model writes another length of answer.

`reason_line(reasoning)` is the conductor's own reasoning shortened to one line.

    steps = estimate_plan(workflow, models, prompt_of, typical)   # before any call
    kept = fit_budget(workflow, steps, budget_usd - spent)         # how many steps fit

`estimate_plan` prices a plan before its workers run: each step's prompt, counted as it will be
sent (so as not to undercount: core/usage.py), plus the expected answers of the steps it reads,
times the price, and the model's typical answer (the history's median, else `DEFAULT_ANSWER_TOKENS`,
never above the call's max_tokens) times the output price.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.events import StepEstimate
from ..core.run_state import RunState
from ..core.usage import estimate_prompt_tokens, estimate_tokens
from ..core.workflow import Workflow

__all__ = ["DEFAULT_ANSWER_TOKENS", "Estimate", "counterfactuals", "estimate_plan", "fit_budget", "reason_line"]

# A model's answer, in tokens, where the history has none of its answers: a paragraph or two, about
# what a chat model writes for a question that is not an essay.
DEFAULT_ANSWER_TOKENS = 400
# What tags each answer a step reads in its prompt (<step_j> ... subtask ... </step_j>), in tokens.
READ_ANSWER_OVERHEAD = 16


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


def estimate_plan(
    workflow: Workflow,
    models: Sequence[Any],
    prompt_of: Callable[[int], Any],
    typical: Mapping[str, int] | None = None,
    max_tokens: int | None = None,
) -> tuple[StepEstimate, ...]:
    """Each step's expected tokens and cost, before any call. `models[i]` is the PoolModel of
    model index i; `prompt_of(i)` is the WorkerPrompt step i would be sent with every step it
    reads answering "" (its own text, counted; the answers it reads are added as expected);
    `typical` maps a model id to its typical answer's tokens (the history's median)."""
    typical = typical or {}
    answers: dict[int, int] = {}  # each step's expected answer tokens, for the steps reading it
    estimates: list[StepEstimate] = []
    for index, step in enumerate(workflow.steps):
        reads = sum(answers.get(j, 0) + READ_ANSWER_OVERHEAD for j in step.access)
        if not step.calls:  # a vote or a gate: no call; its answer is one it read
            answers[index] = max((answers.get(j, 0) for j in step.access), default=0)
            estimates.append(StepEstimate(index, step.kind, 0, 0, 0.0, source="none"))
            continue
        model = models[step.model]
        prompt = prompt_of(index)
        cap = min((c for c in (max_tokens, prompt.max_tokens) if c is not None), default=None)
        answer, source = (
            (int(typical[model.id]), "history") if typical.get(model.id) else (DEFAULT_ANSWER_TOKENS, "default")
        )
        if cap is not None and answer > cap:
            answer, source = cap, "max_tokens"
        tokens_in = estimate_prompt_tokens(prompt.messages) + reads
        cost = (tokens_in * model.price_in + answer * model.price_out) / 1e6
        answers[index] = answer
        estimates.append(
            StepEstimate(index, model.id, tokens_in, answer, cost, model.price_in, model.price_out, source)
        )
    return tuple(estimates)


def fit_budget(workflow: Workflow, estimates: Sequence[StepEstimate], room_usd: float) -> int:
    """How many of the plan's first steps fit in `room_usd` (what the budget leaves): all of them
    when the whole plan fits; else the longest start of the plan that fits and ends on a step that
    answers (a call or a vote, not a gate); 0 when not even its first step fits."""
    total = 0.0
    kept = 0
    for index, (step, estimate) in enumerate(zip(workflow.steps, estimates)):
        total += estimate.cost_usd
        if total > room_usd + 1e-12:
            break
        if not step.is_gate:
            kept = index + 1
    else:
        return len(workflow.steps)
    return kept


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
