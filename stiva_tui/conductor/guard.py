"""Catching a degenerate plan before it runs.

A plan whose subtasks are garbage makes the answer worse than one direct call: a small planner
copies its prompt's worked examples ("Compute 12 times 3." for a HumanEval problem), leaves a
subtask empty, or writes one about something else entirely ("Write a short poem about the sea").
`degenerate(workflow, question)` says why a plan is one of those, or None; the engine then runs
one direct step on the strongest model instead, and the tree says why.

A subtask "shares nothing with the question" when it names three specific things or more (words
of three letters or more, or numbers, that are not generic instructions such as "check", "draft",
"answer", "add the numbers") and none of them occurs in the question or the conversation. A later step
that reads earlier ones ("Check the draft of step 0") is judged the same way, so generic
instructions always pass.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..core.workflow import Workflow
from .fewshot import example_subtasks

__all__ = ["degenerate"]

_WORD = re.compile(r"[a-z0-9]+")
# Instruction words any plan may use, whatever the question: not "specific".
_GENERIC = set(
    """
a an the and or of to in on for with by from as at is are be it its this that these those each
answer answers answering question questions task tasks problem problems step steps subtask final
give write solve solving solution compute calculate work out explain reasoning reason think carefully
check verify review critique improve fix correct refine combine merge compare choose pick best
draft drafts outline plan approach idea ideas summary summarize summarise list short brief clear
previous earlier above response responses output outputs result results given user's user
code function program python implement implementation test tests case cases return returns
then first next finally one two three all any both other others make sure please provide
method methods detail details key point points part parts find identify state say name
about how many much what which who why when where finish finished try attempt again look looks
text word words sentence using use based into more less your you our we can should must not no
yes only just also very well good right wrong new old help helpful concise precise accurate
add sum multiply subtract divide number total count value evaluate simplify equation expression
describe discuss analyse analyze consider topic information fact facts
""".split()
)


def _words(text: str) -> set[str]:
    found = set()
    for word in _WORD.findall(text.lower()):
        if word.isdigit() or len(word) >= 3:
            found.add(word[:-1] if len(word) > 4 and word.endswith("s") else word)
    return found


def degenerate(workflow: Workflow, question: str, conversation: Sequence[dict] = ()) -> str | None:
    """Why `workflow` should not run for `question` (one line), or None when it may."""
    context = question + "\n" + "\n".join(str(turn.get("content", "")) for turn in conversation)
    asked = _words(context)
    normalized_question = " ".join(_WORD.findall(question.lower()))
    for index, step in enumerate(workflow.steps):
        subtask = step.subtask.strip()
        if not subtask:
            return f"step {index + 1}'s subtask is empty"
        for example_question, example in example_subtasks():
            if (
                _WORD.findall(subtask.lower()) == _WORD.findall(example.lower())
                and " ".join(_WORD.findall(example_question.lower())) != normalized_question
                and not (_words(example) - _GENERIC) <= asked
            ):
                return f"step {index + 1}'s subtask is copied from the planner's own examples: {subtask!r}"
        specific = _words(subtask) - _GENERIC
        # three specific words or more, none of them asked about (a question of no words is skipped)
        if asked - _GENERIC and len(specific) >= 3 and not specific & asked:
            return f"step {index + 1}'s subtask shares nothing with the question: {subtask!r}"
    return None
