"""The baselines the conductor is measured against, as workflows the executor runs like any other.

- direct: one call to one model;
- Mixture-of-Agents (MoA): layers of proposers, each later layer reading the one before, then one
  aggregator that reads the last layer.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.workflow import Step, Workflow
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
