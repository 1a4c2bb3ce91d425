"""The completion-style conductor prompt for base models (pre-trained, not instruction-tuned).

A base model such as the embedded Gemma-3 270M continues text: it does not follow chat turns or
rules, and a chat prompt makes it echo "User:"/"Assistant:" lines or copy the rules. Shown a few
worked examples in a fixed shape, it writes one more in the same shape. So the prompt here is a
static prefix of examples (the same for every call, so a cached prompt prefix can serve it)
followed by the new case, left open where the model is to write.

`base_conductor_prompt(...)`: examples of question -> the three lists, in the grammar's exact
form; the model writes the lists for the new question under the same grammar as ever. Subtasks in
the examples are instructions about their question, so the model writes such instructions rather
than text copied from rules (there are no rules in the prompt). The embedded *worker's* few-shot
prompt and answer clean-up are the worker's own: `pool/embedded.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.preference import Preference, price_text
from ..pool.embedded import NOTE_CHARS, one_line, one_line_turns
from .base import PlanRequest, WorkerInfo

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
        case.append(one_line_turns(request.conversation))
    if request.previous is not None and request.round > 1:
        case.append(f"Previous answer: {one_line(request.previous.answer)[:NOTE_CHARS]}")
        case.append("(If the previous answer is right, the lists are empty.)")
    if request.preference is not None:
        prices = ", ".join(f"{i} {price_text(w)}" for i, w in enumerate(request.workers))
        case.append(f"The user prefers {request.preference.wish}. Prices: {prices}.")
    case.append(f"Question: {one_line(request.question)}")
    parts.append("\n".join(case))
    return "\n\n".join(parts)
