"""Completion-style prompts for base models (pre-trained, not instruction-tuned).

A base model such as the embedded Gemma-3 270M continues text: it does not follow chat turns or
rules, and a chat prompt makes it echo "User:"/"Assistant:" lines or copy the rules. Shown a few
worked examples in a fixed shape, it writes one more in the same shape. So both prompts here are
a static prefix of examples (the same for every call, so a cached prompt prefix can serve it)
followed by the new case, left open where the model is to write:

- `base_worker_prompt(...)`: "Question: ...\\nAnswer:" examples; the answer ends at the end of its
  line (`BASE_WORKER_STOPS`), under a tight token cap, and `clean_base_answer` strips any echo of
  the prompt's markers.
- `base_conductor_prompt(...)`: examples of question -> the three lists, in the grammar's exact
  form; the model writes the lists for the new question under the same grammar as ever. Subtasks
  in the examples are instructions about their question, so the model writes such instructions
  rather than text copied from rules (there are no rules in the prompt).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.arithmetic import calculation
from ..core.preference import Preference, price_text
from ..core.workflow import Workflow
from .base import PlanRequest, WorkerInfo

# --- the worker ---------------------------------------------------------------------------------

BASE_WORKER_PREFIX = """Answer each question with one short, correct sentence.

Question: What is the capital of Italy?
Answer: The capital of Italy is Rome.

Question: How many legs does a cat have?
Answer: A cat has four legs.

Question: What is 14 + 29?
Note: calculator: 14 + 29 = 43
Answer: 14 + 29 = 43.

Question: Who painted the Mona Lisa?
Answer: Leonardo da Vinci painted the Mona Lisa.

Question: What color are bananas when they are ripe?
Answer: Ripe bananas are yellow."""

# The answer is one line: the end of the line ends it (and with it a next "Question:").
BASE_WORKER_STOPS: tuple[str, ...] = ("\n",)
# One or two sentences fit in this many tokens; a base model that rambles is cut here.
BASE_WORKER_MAX_TOKENS = 48
# What an earlier step's answer may add to the prompt (the model's context is precious on a CPU).
_NOTE_CHARS = 400


@dataclass(frozen=True)
class WorkerPrompt:
    """What a worker is sent for one step: messages, and the stops and cap the prompt needs."""

    messages: list[dict]
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    base: bool = False  # a completion prompt: the reply goes through `clean_base_answer`


def base_worker_prompt(
    question: str,
    workflow: Workflow,
    index: int,
    outputs: dict[int, str],
    conversation: Sequence[dict] = (),
) -> WorkerPrompt:
    """The few-shot completion prompt of step `index` for a base model.

    Sent as two messages that the embedded worker joins as plain text: the static examples
    (`system`) and this case (`user`). The subtask is shown only when the plan has several steps:
    a one-step plan's subtask is the question itself, and a base model answers the question
    better than a paraphrase of it. Only the steps of the access list are shown, as notes, and
    a calculator's note when the task holds arithmetic (`core.arithmetic`).
    """
    step = workflow.steps[index]
    lines: list[str] = []
    if conversation:
        lines.append(_one_line_turns(conversation))
    lines.append(f"Question: {_one_line(question)}")
    for j in step.access:
        note = _one_line(outputs.get(j, ""))[:_NOTE_CHARS]
        if note:
            lines.append(f"Note: {note}")
    # A 270M model cannot add: the sum it is asked for comes from a calculator, as a note it copies.
    sums = calculation(step.subtask) if len(workflow.steps) > 1 else None
    sums = sums or calculation(question)
    if sums is not None:
        lines.append(f"Note: {sums.note}")
    if len(workflow.steps) > 1:
        lines.append(f"Task: {_one_line(step.subtask)}")
    lines.append("Answer:")
    messages = [
        {"role": "system", "content": BASE_WORKER_PREFIX},
        {"role": "user", "content": "\n".join(lines)},
    ]
    return WorkerPrompt(messages, BASE_WORKER_STOPS, BASE_WORKER_MAX_TOKENS, base=True)


# Markers of the prompt that a base model may echo at the start or end of its answer.
_LEADING = re.compile(r"^\s*(?:(?:answer|a|assistant|response)\s*:\s*)+", re.IGNORECASE)
# ...and a next marker after the end of a sentence (or a line): a new "Question:" and what follows.
_TRAILING = re.compile(
    r"(?:(?<=[.!?])|(?<=\n))\s*(?:question|q|task|note|answer|user|assistant|model_id|subtasks|access_list)"
    r"\s*[:=].*$",
    re.IGNORECASE | re.DOTALL,
)


def clean_base_answer(text: str) -> str:
    """The answer without echoes of the prompt: a leading "Answer:", a trailing "Question: ...",
    role labels, or the plan's list syntax."""
    text = _LEADING.sub("", text.strip())
    text = _TRAILING.sub("", text)
    return text.strip()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _one_line_turns(conversation: Sequence[dict], limit_chars: int = 600) -> str:
    """Earlier turns, one line each and without chat role labels (a base model would echo them);
    the newest are kept when they are long."""
    lines = [
        ("Earlier answer: " if turn.get("role") == "assistant" else "Earlier question: ")
        + _one_line(turn.get("content", ""))
        for turn in conversation
    ]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) > limit_chars and kept:
            break
        kept.append(line[:limit_chars])
        used += len(line)
    return "\n".join(reversed(kept))


# --- the conductor ------------------------------------------------------------------------------

BASE_CONDUCTOR_INTRO = (
    "A conductor plans how a team of language models answers each question. For every question "
    "it writes three lists: model_id (the model number of each step), subtasks (an instruction "
    "for each step) and access_list (the earlier steps each step may read). The last step writes "
    "the final answer."
)


@dataclass(frozen=True)
class _Example:
    question: str
    models: tuple[int, ...]
    subtasks: tuple[str, ...]
    access: tuple[str, ...]

    def text(self) -> str:
        models = ", ".join(str(m) for m in self.models)
        subtasks = ", ".join(f'"{s}"' for s in self.subtasks)
        return (
            f"Question: {self.question}\nmodel_id = [{models}]\nsubtasks = [{subtasks}]\n"
            f"access_list = [{', '.join(self.access)}]"
        )


def _example_models(workers: Sequence[WorkerInfo], preference: Preference | None) -> tuple[int, int]:
    """The models the worked examples use: the one every example starts on, and the second step's.

    With no preference, the first model that is not the embedded one, then the next model. With
    one, the model at the preference's point of the pool's price range: `best` the dearest (list
    prices order a provider's models by capability), `cheap` the cheapest, `balanced` nearer the
    dear end; for `fast` (latency weighing more than cost) the quickest, when every latency is
    known; and as the second step's, its neighbour in that order (the next cheapest for `cheap`),
    never a model far dearer than the wish. A base model copies its examples' model numbers far
    more than it reads a sentence, so the examples show the wish."""
    real = [i for i, w in enumerate(workers) if not _is_embedded(w)] or list(range(len(workers)))
    if not real:
        return 0, 0
    if preference is None:
        first = real[0]
        return first, next((i for i in range(len(workers)) if i != first), first)
    if preference.latency > preference.cost and all(workers[i].latency_s is not None for i in real):
        order = sorted(real, key=lambda i: (workers[i].latency_s, i))
        at = 0
    else:
        order = sorted(real, key=lambda i: (-(workers[i].price_in + workers[i].price_out), i))
        at = round(preference.thrift * (len(order) - 1))
    if len(order) == 1:
        return order[0], order[0]
    return order[at], order[at + 1] if at + 1 < len(order) else order[at - 1]


def _examples(workers: Sequence[WorkerInfo], max_steps: int, preference: Preference | None = None) -> list[_Example]:
    """Worked examples that fit this pool and step limit (model numbers that exist). Under the
    `cheap` level every example is one step: a second step is a second bill."""
    strong, other = _example_models(workers, preference)
    examples = [
        _Example("What is the capital of Italy?", (strong,), ("Name the capital of Italy.",), ("[]",)),
        _Example("How many legs does a spider have?", (strong,), ("Say how many legs a spider has.",), ("[]",)),
    ]
    if max_steps >= 2 and (preference is None or preference.thrift < 1.0):
        examples.append(
            _Example(
                "Write a short poem about the sea, then check that it rhymes.",
                (strong, other),
                ("Write a short poem about the sea.", "Check that the poem of step 0 rhymes and give the final poem."),
                ("[]", "[0]"),
            )
        )
    examples.append(_Example("What is 12 times 3?", (strong,), ("Compute 12 times 3.",), ("[]",)))
    return examples


def example_subtasks() -> list[tuple[str, str]]:
    """(question, subtask) of every worked example the base conductor prompt shows: a plan that
    copies one of them for another question is garbage (`conductor.guard`)."""
    workers = [WorkerInfo("a", "", "openai"), WorkerInfo("b", "", "openai")]
    return [(e.question, s) for e in _examples(workers, 5) for s in e.subtasks]


def _is_embedded(worker: WorkerInfo) -> bool:
    return worker.kind == "embedded"


def base_conductor_prefix(workers: Sequence[WorkerInfo], max_steps: int, preference: Preference | None = None) -> str:
    """The static part of the base conductor prompt: what it does, the models, the examples."""
    models = "\n".join(
        f"{i}: {w.id}" + (f" - {w.description.strip()}" if w.description.strip() else "") for i, w in enumerate(workers)
    )
    examples = "\n\n".join(e.text() for e in _examples(workers, max_steps, preference))
    return f"{BASE_CONDUCTOR_INTRO}\n\nModels:\n{models}\n\n{examples}"


def base_conductor_prompt(request: PlanRequest) -> str:
    """The whole base conductor prompt, ending right after the question: the grammar's lists
    begin with a newline, so the model's first token starts "model_id = [" on the next line."""
    parts = [base_conductor_prefix(request.workers, request.max_steps, request.preference)]
    case: list[str] = []
    if request.conversation:
        case.append(_one_line_turns(request.conversation))
    if request.previous is not None and request.round > 1:
        case.append(f"Previous answer: {_one_line(request.previous.answer)[:_NOTE_CHARS]}")
        case.append("(If the previous answer is right, the lists are empty.)")
    if request.preference is not None:
        prices = ", ".join(f"{i} {price_text(w)}" for i, w in enumerate(request.workers))
        case.append(f"The user prefers {request.preference.wish}. Prices: {prices}.")
    case.append(f"Question: {_one_line(request.question)}")
    parts.append("\n".join(case))
    return "\n\n".join(parts)


_SIMPLE_WORDS = 16
_SIMPLE_CHARS = 120


def is_simple_question(question: str) -> bool:
    """A short, one-line question: one step is the plan for it."""
    text = question.strip()
    return "\n" not in text and "```" not in text and len(text) <= _SIMPLE_CHARS and len(text.split()) <= _SIMPLE_WORDS
