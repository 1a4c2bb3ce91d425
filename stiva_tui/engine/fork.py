"""Forking a finished run at one step: "what if step 2 had run on another model?"

    plan = plan_fork(trace, "2", "gpt-4o", available=pool_ids)
    result = await engine.run_fork(plan, models, branch=1)

A fork runs again the step it names, on another model (optionally with another subtask), and every
step that reads it, directly or through other steps; a step after an agreement gate that runs
again runs again too, since the gate decides whether it runs. Every other step keeps its output:
it is neither called nor paid again, and the branch records it as kept (no attempt, no cost).
Votes and gates that read a step run again are counted again (free: they call no model, unless a
vote judges). The branch is a run of its own, linked to the original (`RunStarted.fork`), whose
totals are what the branch added; the original is never written.

A branch can be forked too: the new branch starts from that branch's outputs and is kept under
the same run, beside it. Only the last round that ran steps can be forked (a later round's plan was made from that round's
answer: changing an earlier round would need a new plan). `plan_fork` says why in one line
(`ForkError`) for anything else: a run that did not finish, a step that is not there, was not run
or calls no model, an unknown model.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from ..core import display as fmt
from ..core.trace import Trace, TraceRound
from ..core.words import RunMode
from ..core.workflow import AGREE, VOTE, Workflow

__all__ = ["KEPT_NOTE", "ForkError", "ForkPlan", "parse_step", "plan_fork", "readers"]

# How a branch's step that is not run again is reported (StepFinished.note, with no attempt).
KEPT_NOTE = "kept: not run again"


class ForkError(ValueError):
    """The fork cannot run as asked; the message says why in one line."""


@dataclass(frozen=True)
class ForkPlan:
    """What a fork runs: `workflow` (step i on `models[i]`) with `kept` outputs for the steps that
    are not run again, and `rerun`, the forked step and every step that reads it."""

    run_id: str  # the run forked: the branch is kept under it
    start: str  # whose outputs it starts from: the run, or one of its branches (forked again)
    question: str  # as the engine read it
    mode: RunMode  # the run's mode (conductor, direct, moa, workflow)
    round: int
    index: int  # the forked step, 0-based
    model: str  # its new model
    subtask: str  # its subtask in the branch
    workflow: Workflow
    models: tuple[str, ...]  # each step's model id (the forked one's is `model`)
    kept: Mapping[int, str]
    rerun: frozenset[int]
    conversation_id: str | None = None

    @property
    def step_label(self) -> str:
        """The step as the tree numbers it ("2")."""
        return fmt.step(self.index)


_STEP = re.compile(r"^\s*(?:(\d+)\s*\.\s*)?(\d+)\s*$")


def parse_step(text: str) -> tuple[int | None, int]:
    """(round or None, 0-based index) of a step as the tree numbers it: "2", or "2.3" for step 3 of
    round 2 (ForkError for anything else)."""
    match = _STEP.match(text or "")
    if match is None or int(match.group(2)) < 1:
        raise ForkError(f"{text!r} is no step: give its number as the tree shows it (2, or 2.3 for round 2's step 3)")
    return (int(match.group(1)) if match.group(1) else None), int(match.group(2)) - 1


def readers(workflow: Workflow, index: int) -> frozenset[int]:
    """Step `index` and every step that reads it, directly or through others; and every step after
    an agreement gate among them (the gate decides whether it runs)."""
    out = {index}
    for j in range(index + 1, len(workflow.steps)):
        step = workflow.steps[j]
        if any(i in out for i in step.access) or any(g in out for g in workflow.gates_before(j)):
            out.add(j)
    return frozenset(out)


def plan_fork(
    trace: Trace,
    step: str,
    model: str,
    *,
    available: Collection[str],
    subtask: str | None = None,
) -> ForkPlan:
    """The fork of `trace`'s step `step` (as the tree numbers it) onto `model`, one of the pool's
    `available` model ids; `subtask` replaces the step's subtask ("" or None keeps it)."""
    short = trace.run_id[:8]
    if trace.status != "finished":
        raise ForkError(f"run {short} is {trace.status}: only a finished run can be forked")
    asked_round, index = parse_step(step)
    last = _last_round(trace)
    if last is None:
        raise ForkError(f"run {short} has no plan with steps to fork")
    if asked_round is not None and asked_round != last.round:
        raise ForkError(
            f"step {step} is in round {asked_round}; only the last round's steps ({last.round}.1 and on) can be "
            "forked, since a later round was planned from that round's answer"
        )
    workflow = last.workflow.workflow() if last.workflow is not None else None
    if workflow is None:
        raise ForkError(f"run {short}'s plan can no longer be read: it cannot be forked")
    steps = {s.index: s for s in last.steps}
    if not 0 <= index < len(workflow.steps):
        raise ForkError(f"run {short} has no step {fmt.step(index)}: its plan has steps 1 to {len(workflow.steps)}")
    forked = steps.get(index)
    if not workflow.steps[index].calls:
        raise ForkError(f"step {fmt.step(index)} is a {workflow.steps[index].kind}: it calls no model to change")
    if forked is None or forked.status != "finished":
        status = forked.status if forked is not None else "not recorded"
        raise ForkError(f"step {fmt.step(index)} of run {short} was not run ({status}): fork a step that ran")
    if model not in available:
        raise ForkError(f"model {model!r} is not available; available: {', '.join(available)}")
    rerun = readers(workflow, index)
    models: list[str] = []
    for i in range(len(workflow.steps)):
        if i == index:
            models.append(model)
            continue
        recorded = steps.get(i)
        own = (recorded.first_model or recorded.model) if recorded is not None else None
        if workflow.steps[i].kind in (AGREE, VOTE):
            # a control step calls no model ("(vote)" is recorded); a vote that must judge (fewer
            # than two answers to count) judges on its recorded judge, else the forked step's model
            models.append(own if own is not None and own in available else model)
            continue
        if i in rerun and own not in available:
            if recorded is not None and recorded.model in available:
                own = recorded.model  # the conductor's model is gone; the one that answered is here
            else:
                raise ForkError(
                    f"step {fmt.step(i)} reads step {fmt.step(index)} and must run again, but its model "
                    f"{own or '?'} is not available"
                )
        models.append(own or model)
    new_subtask = subtask.strip() if subtask and subtask.strip() else workflow.steps[index].subtask
    branch_steps = tuple(
        replace(s, model=i, subtask=new_subtask if i == index else s.subtask) for i, s in enumerate(workflow.steps)
    )
    # A gate is counted again even where it reads no step run again (free, and the same count): it
    # is what skips the steps after it, as it did in the run.
    kept = {
        i: steps[i].output
        for i, s in enumerate(workflow.steps)
        if i not in rerun and s.kind != AGREE and _finished(steps, i)
    }
    return ForkPlan(
        run_id=trace.fork.of if trace.fork is not None else trace.run_id,
        start=trace.run_id,
        question=trace.question,
        mode=trace.mode,
        round=last.round,
        index=index,
        model=model,
        subtask=new_subtask,
        workflow=Workflow(branch_steps),
        models=tuple(models),
        kept=kept,
        rerun=rerun,
        conversation_id=trace.conversation_id,
    )


def _finished(steps: Mapping[int, object], i: int) -> bool:
    recorded = steps.get(i)
    return recorded is not None and getattr(recorded, "status", None) == "finished"


def _last_round(trace: Trace) -> TraceRound | None:
    """The round whose steps gave the answer: the last one that ran steps."""
    for round_ in reversed(trace.rounds):
        if round_.steps and round_.workflow is not None and round_.workflow.model_id:
            return round_
    return None
