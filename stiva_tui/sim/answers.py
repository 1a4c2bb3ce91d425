"""Which answer a simulated model gives to a call: the documented, deterministic rule.

For a call to model M whose prompt holds the question of suite item I (found by its text; a prompt
that holds no known question gets `UNKNOWN`, which says what the pool answers and offers one of its
questions, graded wrong):

1. `p = M.skill(I.meta.domain)`: the profile's chance of a right answer on that domain.
2. **Reading earlier answers.** A step shown earlier steps' answers (`<step_N_response>` blocks,
   the engine's prompt format, so chains, fan-ins, MoA's aggregator and verifiers alike) has its
   chance moved by what it reads. With `r` right and `w` wrong drafts shown, `share = r / (r + w)`:

       p' = p + LIFT * share * (1 - p) - DRAG * (1 - share) * p        (LIFT = 0.8, DRAG = 0.25)

   A verifier that sees only right drafts closes 80% of the gap to certain; one misled by only
   wrong drafts loses a quarter of its skill. That is what makes a second step worth planning
   when, and only when, the first one is likely right.
3. **The draw.** `u = sha256(seed, M, I, the prompt with the drafts' text left out, r, w)` read
   as a number in [0, 1); the answer is right when `u < p'`. The same call always gets the same
   answer (reruns are exact); another subtask, another model or other drafts are another draw.
4. **The text.** A right answer states the reference the way a model would ("The answer is 391.",
   "Answer: B", the reference code in a ```python block), after `M.words` words of working. A
   wrong one is plausible: a nearby number, another option, the item's `meta.wrong` code (an
   off-by-one) or code that misses the point. The working is whole sentences, none said twice,
   until about `M.words` words are written.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..evals.suite import LETTERS, SuiteItem
from .profiles import SimModel

LIFT = 0.8
DRAG = 0.25
UNKNOWN = (
    "I am a simulated model (--pool sim): I answer only the questions of my suite, word for word, "
    "by a known rule, and this question is not one of them."
)
_DRAFT = re.compile(r"<step_(\d+)_response>\n?(.*?)\n?</step_\1_response>", re.DOTALL)
# The working before an answer: whole sentences in this order, none repeated (`_working`).
_WORKING = (
    "Let me work through this carefully, one part at a time.",
    "First I read the question again and note what it asks for.",
    "Then I check which facts or numbers it depends on.",
    "I set up the working step by step.",
    "Each intermediate result gets a quick sanity check before I use it.",
    "Where a unit or a format matters, I keep it explicit.",
    "I compare the result with a rough estimate to catch slips.",
    "Nothing in the question seems to have been missed.",
    "The working holds together from start to finish.",
    "So I can commit to the result.",
)


@dataclass(frozen=True)
class SimAnswer:
    text: str
    correct: bool
    item_id: str | None = None
    chance: float = 0.0  # p' of the rule
    drafts_right: int = 0
    drafts_wrong: int = 0
    # A replayed answer's own figures (sim/replay.py); None: the server's (text length, profile)
    completion_tokens: int | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None


def prompt_text(messages: Sequence[dict]) -> str:
    """Every message's text, in order (content parts joined)."""
    parts = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"{message.get('role', 'user')}: {content}")
    return "\n".join(parts)


def _unit(*key: object) -> float:
    digest = hashlib.sha256(json.dumps(key, ensure_ascii=False, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class Answerer:
    """Answers calls about the items of one or more suites (a question is found by its text)."""

    def __init__(self, items: Iterable[SuiteItem], seed: int = 0):
        self.seed = seed
        # longest first: a question that is part of another never shadows it
        self.questions = sorted(((item.question.strip(), item) for item in items), key=lambda p: -len(p[0]))

    def find(self, text: str) -> SuiteItem | None:
        for question, item in self.questions:
            if question and question in text:
                return item
        return None

    def unknown(self) -> str:
        """The answer to a prompt that holds none of the suite's questions: what the pool answers,
        and one question it does (the shortest, so that it is easy to type)."""
        known = min((q for q, _ in self.questions if q), key=lambda q: (len(q), q), default="")
        return UNKNOWN + (f' Try one that is, such as: "{known}"' if known else "")

    def answer(self, model: SimModel, messages: Sequence[dict]) -> SimAnswer:
        text = prompt_text(messages)
        drafts = [m.group(2) for m in _DRAFT.finditer(text)]
        task = _DRAFT.sub("<draft>", text)
        item = self.find(task)
        if item is None:
            return SimAnswer(_working(model) + self.unknown(), False)
        right = sum(1 for d in drafts if states_reference(item, d))
        wrong = len(drafts) - right
        p = model.skill(str(item.meta.get("domain") or ""))
        if drafts:
            share = right / len(drafts)
            p = p + LIFT * share * (1 - p) - DRAG * (1 - share) * p
        p = min(1.0, max(0.0, p))
        u = _unit("answer", self.seed, model.name, item.id, task, right, wrong)
        correct = u < p
        body = right_text(item) if correct else wrong_text(item, _unit("wrong", self.seed, model.name, item.id, task))
        return SimAnswer(_working(model) + body, correct, item.id, round(p, 6), right, wrong)


def _working(model: SimModel) -> str:
    """Whole sentences of working, in order, until `model.words` words are written (never one
    sentence twice: a model that asks for more than all of them gets all of them)."""
    if model.words <= 0:
        return ""
    sentences: list[str] = []
    count = 0
    for sentence in _WORKING:
        if count >= model.words:
            break
        sentences.append(sentence)
        count += len(sentence.split())
    return " ".join(sentences) + "\n\n"


def right_text(item: SuiteItem) -> str:
    if item.grader == "choice":
        return f"Answer: {item.answer}"
    if item.grader == "code":
        return f"```python\n{item.answer.rstrip()}\n```"
    return f"The answer is {item.answer}."


def wrong_text(item: SuiteItem, u: float) -> str:
    if item.grader == "choice":
        others = [letter for letter in LETTERS[: len(item.choices or ())] if letter != item.answer] or ["A"]
        return f"Answer: {others[int(u * len(others))]}"
    if item.grader == "code":
        wrong = item.meta.get("wrong")
        if isinstance(wrong, str) and wrong.strip():
            return f"```python\n{wrong.rstrip()}\n```"
        return "```python\ndef solution(*args):\n    return None\n```"
    if item.grader == "numeric":
        from ..evals.numbers import parse_number

        value = parse_number(item.answer)
        if value is not None:
            near = [value + 1, value - 1, value * 10, value + 10, value / 2 if value else 2.0]
            return f"The answer is {_number(near[int(u * len(near))])}."
    return "The answer is not something I can work out for certain."


def _number(value: float) -> str:
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return f"{value:g}"


def states_reference(item: SuiteItem, draft: str) -> bool:
    """Whether an earlier answer shown to a step is right (by the item's own grader, for the text
    graders; code by its reference solution being in it)."""
    if item.grader == "code":
        return bool(item.answer.strip()) and item.answer.strip() in draft
    if item.grader in ("numeric", "exact", "contains", "choice"):
        from ..evals.graders import grade

        try:
            return grade(item, draft).correct
        except Exception:  # noqa: BLE001 - a draft the grader cannot read is not a right one
            return False
    return item.answer.strip().lower() in draft.lower()
