"""`--pool replay:BENCH_ID`: a bench's recorded answers of real models, served as a pool.

Routing research trains and checks routers on cached model outputs (RouterBench); this is the
same for Stiva: bench the models once for real (`stiva bench SUITE --systems 'direct:*'`), then
train or bench a conductor on their answers without paying for a single call again:

    stiva train SUITE --pool replay:3f2a9c --base embedded --out adapter/

- **The models** are the bench's `direct:` systems, in its order, as `replay:MODEL` (for `direct:openai/gpt-4o`,
  `replay:openai/gpt-4o`), served by the simulated pool's server over the real OpenAI wire format on
  127.0.0.1, so everything above the HTTP client is the real path.
- **An answer:** a call whose prompt holds the question of a recorded item (found by its text,
  the longest question first) gets that model's recorded answer to it, whatever else the prompt
  says: what a model would have written after reading other steps' drafts, or under another
  subtask, is not known, so a replay cannot reward a chain for what its second step read. A
  prompt with no recorded question, or an item the model failed on, gets a plain "no answer"
  that is graded wrong.
- **Usage and cost:** the recorded answer's completion tokens; prompt tokens estimated from what
  was sent (about four characters a token). Each model's price is its recorded cost per token in
  that bench (both ways: the bench keeps each item's total cost, not its split).
- **Latency:** the recorded answer's, times `[sim] latency_scale`.
- **Where they come from:** the caller reads the bench from the history (`stiva_tui.bench.replay`)
  and passes a `RecordedBench` in; the simulated pool does not open the store.

Every report made on it says "recorded pool" and names the bench (sim/labels.py), and on a bench of
`stiva bench import`, where its answers came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .answers import _DRAFT, SimAnswer, prompt_text
from .labels import REPLAY_PREFIX as REPLAY_PREFIX  # the pool ids' prefix, where it always was
from .profiles import SimModel

NO_ANSWER = "No recorded answer: this question was not in the replayed bench for this model."


class ReplayError(Exception):
    """The bench cannot be replayed; the message says why."""


@dataclass(frozen=True)
class Recorded:
    text: str
    correct: bool
    completion_tokens: int
    latency_s: float


class ReplayAnswerer:
    """The recorded answers: {question: {model name: Recorded}} (the `Answerer` protocol)."""

    def __init__(self, answers: dict[str, dict[str, Recorded]], item_ids: dict[str, str]):
        self.answers = answers
        self.item_ids = item_ids  # question -> its item id
        self.questions = sorted(answers, key=lambda q: -len(q))

    def find(self, text: str) -> str | None:
        for question in self.questions:
            if question and question in text:
                return question
        return None

    def answer(self, model: SimModel, messages: Sequence[dict]) -> SimAnswer:
        task = _DRAFT.sub("<draft>", prompt_text(messages))
        question = self.find(task)
        recorded = self.answers.get(question or "", {}).get(model.name)
        if question is None or recorded is None:
            return SimAnswer(NO_ANSWER, False, self.item_ids.get(question or ""))
        return SimAnswer(
            recorded.text,
            recorded.correct,
            self.item_ids[question],
            completion_tokens=recorded.completion_tokens,
            latency_s=recorded.latency_s,
        )


@dataclass(frozen=True)
class RecordedAnswer:
    """One graded `direct:` answer of the bench, as its caller read it from the history."""

    model: str  # the benched pool model: `direct:MODEL` without "direct:"
    item_id: str
    question: str  # the run's question; "" when the run is gone from the history
    answer: str
    correct: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float


@dataclass(frozen=True)
class RecordedBench:
    """What a replay serves: a bench's id, its `direct:` models in its order, and their graded
    answers. The caller reads it from the history (`stiva_tui.bench.replay`); this package does not
    open the store."""

    bench_id: str
    models: tuple[str, ...]
    answers: tuple[RecordedAnswer, ...]
    # where recorded answers of `stiva bench import` came from ("11 models (zeroeval: PATH)"); "" for
    # a bench Stiva ran
    source: str = ""


def replay_pool(recorded: RecordedBench, bench_text: str) -> tuple[list[SimModel], ReplayAnswerer]:
    """(the replay models, their answerer) for `--pool replay:BENCH_TEXT` (ReplayError if unusable)."""
    bench_id = recorded.bench_id
    if not recorded.answers:
        raise ReplayError(
            f"--pool replay:{bench_text}: bench {bench_id} has no graded direct: answers to replay; "
            "bench the models first: stiva bench SUITE --systems 'direct:*'"
        )
    answers: dict[str, dict[str, Recorded]] = {}
    item_ids: dict[str, str] = {}
    spent: dict[str, tuple[float, int]] = {}
    for record in recorded.answers:
        question = record.question.strip()
        if not question:
            continue
        name = record.model
        answers.setdefault(question, {})[name] = Recorded(
            record.answer, record.correct, record.completion_tokens, record.latency_s
        )
        item_ids[question] = record.item_id
        cost, tokens = spent.get(name, (0.0, 0))
        spent[name] = (cost + record.cost_usd, tokens + record.prompt_tokens + record.completion_tokens)
    if not answers:
        raise ReplayError(f"--pool replay:{bench_text}: the runs of bench {bench_id} are gone from the history")
    models = []
    order = list(recorded.models)
    for name, (cost, tokens) in sorted(
        spent.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])
    ):
        price = cost / tokens * 1e6 if tokens else 0.0
        latencies = sorted(a[name].latency_s for a in answers.values() if name in a)
        models.append(
            SimModel(
                name,
                {},
                price,
                price,
                latencies[len(latencies) // 2] if latencies else 0.0,
                0,
                f"recorded: {name}'s answers ({recorded.source})"
                if recorded.source
                else f"recorded: {name}'s answers in bench {bench_id}",
                prefix=REPLAY_PREFIX,
            )
        )
    return models, ReplayAnswerer(answers, item_ids)
