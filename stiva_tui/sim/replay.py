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
- **Usage and cost:** the recorded answer's tokens: its completion tokens, and its prompt tokens
  where the step was asked the question alone (a direct answer, a vote's or a cascade's step: what
  was recorded); a step that read other steps' drafts has its prompt tokens estimated from what was
  sent (about four characters a token). Each model's prices in and out are the ones its recorded
  costs were made with: fitted by least squares to (prompt tokens, completion tokens, cost) over its
  answers, which is exact where the bench priced tokens linearly (`stiva bench import --prices`, a
  provider's list prices); where the fit cannot be made (one answer, or costs not linear), its
  recorded cost per token, both ways. So `direct:MODEL` on a replay costs what the bench recorded,
  and a vote or a cascade the sum of the recorded costs of the steps that ran.
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
    prompt_tokens: int | None = None


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
        text = prompt_text(messages)
        task = _DRAFT.sub("<draft>", text)
        read_drafts = task != text
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
            prompt_tokens=None if read_drafts else recorded.prompt_tokens,
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
    usage_rows: dict[str, list[tuple[int, int, float]]] = {}
    for record in recorded.answers:
        question = record.question.strip()
        if not question:
            continue
        name = record.model
        answers.setdefault(question, {})[name] = Recorded(
            record.answer, record.correct, record.completion_tokens, record.latency_s, record.prompt_tokens
        )
        item_ids[question] = record.item_id
        cost, tokens = spent.get(name, (0.0, 0))
        spent[name] = (cost + record.cost_usd, tokens + record.prompt_tokens + record.completion_tokens)
        usage_rows.setdefault(name, []).append((record.prompt_tokens, record.completion_tokens, record.cost_usd))
    if not answers:
        raise ReplayError(f"--pool replay:{bench_text}: the runs of bench {bench_id} are gone from the history")
    models = []
    order = list(recorded.models)
    for name, (cost, tokens) in sorted(
        spent.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])
    ):
        price = cost / tokens * 1e6 if tokens else 0.0
        price_in, price_out = fitted_prices(usage_rows.get(name, [])) or (price, price)
        latencies = sorted(a[name].latency_s for a in answers.values() if name in a)
        models.append(
            SimModel(
                name,
                {},
                price_in,
                price_out,
                latencies[len(latencies) // 2] if latencies else 0.0,
                0,
                f"recorded: {name}'s answers ({recorded.source})"
                if recorded.source
                else f"recorded: {name}'s answers in bench {bench_id}",
                prefix=REPLAY_PREFIX,
            )
        )
    return models, ReplayAnswerer(answers, item_ids)


def fitted_prices(rows: Sequence[tuple[int, int, float]]) -> tuple[float, float] | None:
    """(USD per 1M prompt tokens, per 1M completion tokens) that made `rows`' costs, by least
    squares; None where they cannot be told apart (fewer than two independent rows), a price
    would be negative, or the fit misses a cost by more than a thousandth of it."""
    sxx = sum(p * p for p, _, _ in rows)
    syy = sum(c * c for _, c, _ in rows)
    sxy = sum(p * c for p, c, _ in rows)
    sxz = sum(p * z for p, _, z in rows)
    syz = sum(c * z for _, c, z in rows)
    det = sxx * syy - sxy * sxy
    if not rows or det <= 1e-9 * max(1.0, sxx * syy):
        return None
    a = (sxz * syy - syz * sxy) / det
    b = (syz * sxx - sxz * sxy) / det
    if a < 0 or b < 0:
        return None
    for p, c, z in rows:
        if abs(a * p + b * c - z) > 1e-3 * max(abs(z), 1e-9):
            return None
    return a * 1e6, b * 1e6
