"""The embedded worker: Gemma-3 270M on the CPU, in process, always available offline.

`EmbeddedWorker` implements the `Worker` protocol for the pool model `local/gemma-3-270m`
(`embedded_pool_model()`; the model itself is defined once, in `inference.embedded`). It shares
the loaded model with the embedded conductor (one load per process), streams text as tokens arrive, reports exact token usage, and honours `max_tokens`,
`temperature` (0 = greedy), `stop` strings and cancellation (closing or cancelling the stream
stops generation at the next token).

The worker owns its prompting (`prepare`, the `Worker` protocol's hook): a base model continues
text, it does not follow chat turns or rules, and a chat prompt makes it echo "User:"/"Assistant:"
lines or copy the rules. Shown a few worked examples in a fixed shape, it writes one more in the
same shape. So each step is sent `BASE_WORKER_PREFIX`, a static prefix of "Question: ...\nAnswer:"
examples (the same for every call, so its KV cache serves every call), then the case, left open
after "Answer:". The answer ends at the end of its line (`BASE_WORKER_STOPS`), under a tight token
cap, and `clean_base_answer` strips any echo of the prompt's markers. (The embedded conductor's
few-shot prompt is the conductor's: `conductor/fewshot.py`.)

torch/transformers are imported only when a chat starts.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Sequence

from ..core.arithmetic import calculation
from ..core.usage import Usage
from ..inference.embedded import EMBEDDED_DESCRIPTION, EMBEDDED_HF_ID, EMBEDDED_MODEL_ID
from .types import ChatEvent, PoolModel, ProviderError, StepInput, TextDelta, UsageReport, WorkerPrompt

DEFAULT_MAX_TOKENS = 256  # a cap for callers that set none (the few-shot prompt sets 48)

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
NOTE_CHARS = 400


def base_worker_prompt(step: StepInput) -> WorkerPrompt:
    """The few-shot completion prompt of one step for the base model.

    Sent as two messages that the worker joins as plain text: the static examples (`system`) and
    this case (`user`). The subtask is shown only when the plan has several steps: a one-step
    plan's subtask is the question itself, and a base model answers the question better than a
    paraphrase of it. Only the steps of the access list are shown, as notes, and a calculator's
    note when the task holds arithmetic (`core.arithmetic`).
    """
    workflow = step.workflow
    subtask = workflow.steps[step.index]
    lines: list[str] = []
    if step.conversation:
        lines.append(one_line_turns(step.conversation))
    lines.append(f"Question: {one_line(step.question)}")
    for j in subtask.access:
        note = one_line(step.outputs.get(j, ""))[:NOTE_CHARS]
        if note:
            lines.append(f"Note: {note}")
    # A 270M model cannot add: the sum it is asked for comes from a calculator, as a note it copies.
    sums = calculation(subtask.subtask) if len(workflow.steps) > 1 else None
    sums = sums or calculation(step.question)
    if sums is not None:
        lines.append(f"Note: {sums.note}")
    if len(workflow.steps) > 1:
        lines.append(f"Task: {one_line(subtask.subtask)}")
    lines.append("Answer:")
    messages = [
        {"role": "system", "content": BASE_WORKER_PREFIX},
        {"role": "user", "content": "\n".join(lines)},
    ]
    return WorkerPrompt(messages, BASE_WORKER_STOPS, BASE_WORKER_MAX_TOKENS, finish=clean_base_answer)


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


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def one_line_turns(conversation: Sequence[dict], limit_chars: int = 600) -> str:
    """Earlier turns, one line each and without chat role labels (a base model would echo them);
    the newest are kept when they are long. The embedded conductor's prompt shows them so too."""
    lines = [
        ("Earlier answer: " if turn.get("role") == "assistant" else "Earlier question: ")
        + one_line(turn.get("content", ""))
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


IN_PROCESS = "in-process, CPU"
OWN_PROCESS = "own process, CPU"  # the app and `stiva serve` ([model_process], on by default)


def embedded_pool_model(own_process: bool = False) -> PoolModel:
    """The embedded model as a pool model; its reason says where it runs: in this process, or in
    the model process of its own (`own_process`, runtime/model_process.py)."""
    return PoolModel(
        id=EMBEDDED_MODEL_ID,
        provider="embedded",
        model=EMBEDDED_HF_ID,
        price_in=0.0,
        price_out=0.0,
        description=EMBEDDED_DESCRIPTION,
        kind="embedded",
        available=True,
        reason=OWN_PROCESS if own_process else IN_PROCESS,
        source="embedded",
    )


class EmbeddedWorker:
    """Streams chat completions from the in-process Gemma-3 270M."""

    def __init__(self, progress=None, default_max_tokens: int = DEFAULT_MAX_TOKENS):
        self.progress = progress
        self.default_max_tokens = default_max_tokens
        self._loaded = None
        self._lock = threading.Lock()

    def _load_sync(self):
        if self._loaded is None:
            with self._lock:
                if self._loaded is None:
                    from ..inference.embedded import load_embedded

                    self._loaded = load_embedded(self.progress)
        return self._loaded

    def prepare(self, model: PoolModel, step: StepInput) -> WorkerPrompt:
        """Every step is sent the few-shot completion prompt (module docstring)."""
        return base_worker_prompt(step)

    async def load(self):
        if self._loaded is not None:
            return self._loaded
        return await asyncio.to_thread(self._load_sync)

    async def warm_up(self) -> None:
        """Load the model and answer a throwaway question of one token: the few-shot examples'
        KV cache is computed then (every later step reuses it), and so is torch's first-call
        set-up, neither of them then in the first question's time."""
        from ..core.workflow import Step, Workflow

        prompt = base_worker_prompt(StepInput("Hello?", Workflow((Step(0, "Hello?", ()),)), 0, {}))
        stream = self.stream_chat(embedded_pool_model(), prompt.messages, max_tokens=1, stop=prompt.stop)
        async for _event in stream:
            pass

    async def stream_chat(
        self,
        model: PoolModel,
        messages: Sequence[dict],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> AsyncIterator[ChatEvent]:
        from ..inference.errors import ModelError
        from ..inference.generation import generate_sync, render_completion, shared_prefix_len

        try:
            loaded = await self.load()
        except ModelError as exc:
            raise ProviderError(str(exc), provider="embedded") from exc
        # A base model: it is sent its few-shot completion prompt (`prepare`), which is
        # continued as plain text, never wrapped in chat turns.
        prompt = loaded.tokenizer(render_completion(messages), add_special_tokens=True)["input_ids"]
        # The first message (the few-shot examples) is the same on every call: its KV cache is
        # kept on the model, so only the case is prefilled.
        prefix_tokens = 0
        if len(messages) > 1:
            head = loaded.tokenizer(render_completion(messages[:1]), add_special_tokens=True)["input_ids"]
            prefix_tokens = shared_prefix_len(head, prompt)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        stop_event = threading.Event()
        done = object()

        def on_text(text: str) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, text)
            except RuntimeError:
                stop_event.set()

        def run():
            try:
                return generate_sync(
                    loaded,
                    prompt,
                    max_new_tokens=max_tokens or self.default_max_tokens,
                    temperature=float(temperature or 0.0),
                    stop_strings=list(stop or ()),
                    stop_event=stop_event,
                    on_text=on_text,
                    prefix_tokens=prefix_tokens,
                )
            finally:
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, done)
                except RuntimeError:
                    pass

        future = loop.run_in_executor(None, run)
        try:
            while True:
                item = await queue.get()
                if item is done:
                    break
                yield TextDelta(item)
            try:
                result = await future
            except Exception as exc:  # noqa: BLE001
                raise ProviderError(f"generation failed: {type(exc).__name__}: {exc}", provider="embedded") from exc
            yield UsageReport(Usage(result.prompt_tokens, result.completion_tokens))
        finally:
            # Closed early (cancelled, or the consumer stopped reading): stop generating.
            stop_event.set()
