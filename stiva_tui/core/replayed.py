"""A workflow run on recorded answers, computed rather than executed: what the replay pool gives
(`--pool replay:ID`), for every item at once, so a router can learn from every workflow's outcome
on every train item without running one.

    outcome = replay_workflow(workflow, models, answers)   # answers: model -> Answer
    outcome.correct, outcome.cost_usd, outcome.latency_s, outcome.calls

It follows the executor's rules (engine/executor.py) exactly: a call step runs once the steps it
reads and every gate before it are done; a gate waits for every step before it, and where the final
answers it reads agree, the round ends with the first of them and every later step is skipped
(unpaid); a vote returns the best-ranked step that gave the majority final answer (a tie to the
best-ranked model: `rank`, never the listed order). The latency is the critical path of the recorded latencies (votes and gates
take none). A vote with fewer than two readable final answers is judged, in a replay, by its model's
own recorded answer: what the replay pool serves that call, unless the calls already made reach
`max_calls` (the run's step limit): then the best-ranked readable answer is taken without a call.
tests/test_vote_cascade.py checks it against the executor on the replay pool.

Imports nothing of Stiva but core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .answers import Final, tally
from .workflow import AGREE, CALL, VOTE, Workflow

__all__ = ["Answer", "Outcome", "rank_by_record", "replay_workflow"]


@dataclass(frozen=True)
class Answer:
    """One model's recorded answer to one item: its final answer (core/answers.py), its grade, and
    what it cost and took."""

    final: Final | str | None
    correct: float
    cost_usd: float
    latency_s: float = 0.0


@dataclass(frozen=True)
class Outcome:
    correct: float
    cost_usd: float
    latency_s: float
    calls: int  # model calls that ran (a skipped step is not one)
    answer_model: str  # whose recorded answer is the workflow's


def replay_workflow(
    workflow: Workflow,
    models: Sequence[str],
    answers: Mapping[str, Answer],
    rank: Mapping[str, Any] | None = None,
    max_calls: int | None = None,
) -> Outcome:
    """`workflow` (model index i is `models[i]`) on one item's recorded `answers` (KeyError where
    a model it calls has none). `rank`: each model's rank, lower is better (ties and agreements
    return the best-ranked model's answer; unranked models by id); `max_calls`: the step limit a
    judged vote counts against (None: no limit)."""
    steps = workflow.steps
    planned = workflow.calls
    judges = 0

    def rank_of(model: str | None) -> tuple[int, Any, str]:
        if model is None:
            return (2, 0, "")
        return (0, rank[model], model) if rank is not None and model in rank else (1, 0, model)

    finish: list[float] = []
    given: list[str | None] = []  # the model whose answer each step's output is (None: a gate that let through)
    cost = 0.0
    calls = 0
    for index, step in enumerate(steps):
        after = [finish[j] for j in step.access] + [finish[g] for g in workflow.gates_before(index)]
        if step.kind == AGREE:
            after += finish[:index]
        start = max(after, default=0.0)
        if step.kind == CALL:
            model = models[step.model]
            answer = answers[model]
            cost += answer.cost_usd
            calls += 1
            finish.append(start + answer.latency_s)
            given.append(model)
            continue
        read = [given[j] for j in step.access]
        count = tally([answers[m].final if m is not None else None for m in read], [rank_of(m) for m in read])
        if step.kind == AGREE:
            finish.append(start)
            if count.unanimous and count.first is not None:
                winner = read[count.first]
                assert winner is not None
                return Outcome(answers[winner].correct, cost, start, calls, winner)
            given.append(None)
            continue
        assert step.kind == VOTE
        if count.readable >= 2 and count.first is not None:
            finish.append(start)
            given.append(read[count.first])
        elif max_calls is not None and planned + judges >= max_calls:  # no room for a judge call
            finish.append(start)
            best = count.first if count.first is not None else min(range(len(read)), key=lambda i: rank_of(read[i]))
            given.append(read[best])
        else:  # judged: the replay serves the judge model's own recorded answer
            judges += 1
            judge = models[step.model]
            cost += answers[judge].cost_usd
            calls += 1
            finish.append(start + answers[judge].latency_s)
            given.append(judge)
    last = given[-1]
    assert last is not None  # parse_workflow refuses a gate as the last step
    return Outcome(answers[last].correct, cost, max(finish, default=0.0), calls, last)


def rank_by_record(accuracy: Mapping[str, float], cost: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """Each model's rank for ties and agreements, from its record on train items: the most
    accurate first, the cheapest among equals (and then by id, which `replay_workflow` adds)."""
    return {model: (-accuracy[model], cost.get(model, 0.0)) for model in accuracy}
