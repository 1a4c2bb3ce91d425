"""The baselines the conductor is measured against, as workflows the executor runs like any other.

- direct: one call to one model;
- Mixture-of-Agents (MoA): layers of proposers, each later layer reading the one before, then one
  aggregator that reads the last layer;
- a vote (`vote_workflow`) and an agreement cascade (`cascade_workflow`), whose answer is a
  function of the models' final answers (core/workflow.py's `vote` and `agree` steps).

Votes call lazily: a vote of n models first asks the n // 2 + 1 that would already be a majority;
where their final answers agree, that is the vote's answer for certain and the rest are never
asked (a vote of three whose first two agree needs no third call). Otherwise the rest are asked and
all n are counted. The answer is always the one an eager vote gives, ties included (a tie goes to
the earliest-listed model either way); it costs less, and takes one call's time more where the
first ones disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.workflow import AGREE, AGREE_SUBTASK, VOTE, VOTE_SUBTASK, Step, Workflow
from ..pool.types import PoolModel

DEFAULT_MOA_PROPOSERS = 3


def direct_workflow() -> Workflow:
    """One step on model 0 that answers the question."""
    return Workflow((Step(0, "Answer the question.", ()),))


CHECK_SUBTASK = "Check the answer above: give it if it is right, else the right one."


def chain_workflow(steps: int) -> Workflow:
    """A chain of `steps` on model indices 0..steps-1: the first answers the question, each later
    one reads the step before it and checks it (the last one's answer is the run's)."""
    return Workflow(
        tuple(Step(i, "Answer the question." if i == 0 else CHECK_SUBTASK, (i - 1,) if i else ()) for i in range(steps))
    )


ANSWER_SUBTASK = "Answer the question."


def _vote_steps(first_model: int, voters: int, offset: int) -> list[Step]:
    """A lazy vote of `voters` models (indices first_model..), as steps numbered from `offset`."""
    if voters < 2:
        raise ValueError("a vote needs two or more models")
    steps: list[Step] = []
    ask = voters // 2 + 1 if voters > 2 else voters
    asked = []
    for v in range(ask):
        asked.append(offset + len(steps))
        steps.append(Step(first_model + v, ANSWER_SUBTASK, ()))
    if ask < voters:
        steps.append(Step(first_model, AGREE_SUBTASK, tuple(asked), kind=AGREE))
        for v in range(ask, voters):
            asked.append(offset + len(steps))
            steps.append(Step(first_model + v, ANSWER_SUBTASK, ()))
    steps.append(Step(first_model, VOTE_SUBTASK, tuple(asked), kind=VOTE))
    return steps


def vote_workflow(voters: int) -> Workflow:
    """A lazy vote of models 0..voters-1 (see the module's docstring); model 0 judges where the
    answers have no final answer to count (an open question)."""
    return Workflow(tuple(_vote_steps(0, voters, 0)))


def cascade_workflow(stages: Sequence[int], last_votes: bool = False) -> Workflow:
    """An agreement cascade over consecutive model indices: `stages` gives each stage's number
    of models. Each stage but the last asks its models at once and ends with a gate: where their
    final answers agree, that is the answer and no later stage runs. The last stage is one model,
    or (`last_votes`) a lazy vote of its models."""
    if len(stages) < 2:
        raise ValueError("a cascade has two or more stages")
    steps: list[Step] = []
    model = 0
    for number, size in enumerate(stages):
        last = number == len(stages) - 1
        if last and last_votes:
            steps += _vote_steps(model, size, len(steps))
        elif last:
            if size != 1:
                raise ValueError("a cascade's last stage is one model or a vote")
            steps.append(Step(model, ANSWER_SUBTASK, ()))
        else:
            if size < 2:
                raise ValueError("a cascade's stage before the last asks two or more models, whose agreement it checks")
            asked = []
            for k in range(size):
                asked.append(len(steps))
                steps.append(Step(model + k, ANSWER_SUBTASK, ()))
            steps.append(Step(model, AGREE_SUBTASK, tuple(asked), kind=AGREE))
        model += size
    return Workflow(tuple(steps))


def moa_workflow(proposers: int, layers: int, samples: bool = False) -> Workflow:
    """Proposer layers then an aggregator; model index `proposers` is the aggregator. `samples`
    (Self-MoA): the first layer's subtasks say which sample each one is."""
    steps: list[Step] = []
    previous: tuple[int, ...] = ()
    for layer in range(layers):
        current = []
        for p in range(proposers):
            subtask = (
                (f"Answer the question (sample {p + 1} of {proposers})." if samples else "Answer the question.")
                if layer == 0
                else ("Answer the question. Earlier responses are shown: use what is right in them, fix what is wrong.")
            )
            current.append(len(steps))
            steps.append(Step(p, subtask, previous))
        previous = tuple(current)
    steps.append(
        Step(
            proposers,
            "Synthesize the responses shown into one single, accurate, complete answer to the question.",
            previous,
        )
    )
    return Workflow(tuple(steps))


def default_moa_proposers(models: Sequence[PoolModel], count: int = DEFAULT_MOA_PROPOSERS) -> list[str]:
    """The first `count` pool models that are not the embedded CPU model (a 270M stand-in adds
    nothing to a mixture of hosted models); the embedded one only when it is all there is."""
    hosted = [m.id for m in models if m.kind != "embedded"]
    return hosted[:count] or [m.id for m in models][:1]
