"""The `remote` conductor: any pool model prompted with the conductor prompt.

The plan is parsed and validated; when it does not parse, the model is shown its parse error once
and asked again (one repair retry). A reply that broke off after text had arrived (a cut or
garbled stream, the deadline) is asked for again, as a worker's step would be, and every call is
bounded by `deadline_s`. This is the scale-out path: a conductor served by vLLM or
SGLang over several GPUs is just another OpenAI-compatible endpoint.

Structured output (`[conductor] structured`): the plan's JSON schema (`grammar.lists_json_schema`)
goes in the request, so the server decodes only plans `parse_workflow` reads, as the local
backend's grammar does. `json_schema` sends OpenAI's `response_format` (vLLM, SGLang, llama.cpp
and Ollama accept it), `vllm` vLLM's `structured_outputs`, `sglang` SGLang's `json_schema`
string; `auto` sends `response_format` to discovered local servers only, never to a hosted
provider. A server that refuses the field (a 4xx naming it; under `auto`, any 4xx but auth and
rate limits) is asked again without it, and that model is sent none for the rest of the process.

A plan is read as it streams and the call is stopped (its stream closed) as soon as its three
lists are complete and valid (`plan_end`): a small planner that would go on writing until its
token limit costs only its plan. Each call asks for at most `plan_token_bound(pool, steps)` tokens,
what a brief reasoning (`[conductor] max_reasoning_tokens`) and the lists need, not a chat reply's
thousands; a reply that reaches that bound without its lists (by the server's count, or by its
streamed chunks when the server does not hold to the limit, where reading stops) is cut: no
repair retry, the engine's fallback answers at once. A stopped call's usage counts what was
streamed (estimated: the server's count never came).

The plain prompt asks the planner to close its plan with `PLAN_END` and sends that as a stop
sequence, so the reply ends on its own at the plan's end and the server reports its usage: a
stream closed by the client never gets the server's count, and a server that went on generating
after the close billed more than was read (633/439 counted where 549/234 were estimated). Where
the count still does not come, the estimate is marked and never under it (core/usage.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from ..core.usage import Usage, estimate_prompt_tokens, estimate_text_tokens
from ..core.workflow import WorkflowParseError, parse_workflow, plan_end, split_reasoning
from ..pool.types import PoolModel, ProviderError, TextDelta, UsageReport, Worker
from .base import ConductorError, DeltaCallback, Plan, PlanRequest
from .grammar import lists_json_schema
from .prompt import GENERATION_PREFIX, conductor_messages

REPAIR_PROMPT = (
    "Your plan could not be read: {error}.\n"
    "Write the plan again: the three lines model_id = [...], subtasks = [...], access_list = [...], "
    "following the rules, and nothing after them."
)

JSON_SUFFIX = (
    'Answer with one JSON object and nothing else: {"model_id": [...], "subtasks": [...], "access_list": [...]}.'
)
STRUCTURED_MODES = ("auto", "json_schema", "vllm", "sglang", "none")
# Words in a 4xx reply that say the server refused the structured-output field itself.
_REFUSAL_WORDS = ("response_format", "guided", "structured_output", "json_schema", "unknown", "extra", "unrecognized")
# The tokens a plan may take (`plan_token_bound`): a brief reasoning ([conductor]
# max_reasoning_tokens, as a local conductor's), the lists' labels and brackets, and per step a
# subtask of a sentence or two, its model number and its access list.
PLAN_REASONING_TOKENS = 256
PLAN_FRAME_TOKENS = 24
PLAN_STEP_TOKENS = 48
# What the plain prompt asks the planner to write after its lists, and the stop sequence that ends
# its reply there. After a complete plan the reply is read on for at most PLAN_TAIL_CHUNKS chunks
# (the line break and this mark, where the server does not stop at it) for the server's count.
PLAN_END = "END OF PLAN"
PLAN_TAIL_CHUNKS = 8
_refused: set[tuple[str, str]] = set()  # (base_url, model) that refused the field, for this process
_log = logging.getLogger(__name__)


def plan_token_bound(pool_size: int, max_steps: int, reasoning_tokens: int = PLAN_REASONING_TOKENS) -> int:
    """The most tokens a planner's reply needs for `max_steps` steps over a pool of `pool_size`:
    `reasoning_tokens` of reasoning and the three lists, each step's access list naming up to
    every earlier step (two tokens each). 555 for 5 steps over 3 models."""
    steps = max(1, max_steps)
    digits = len(str(max(0, pool_size - 1)))
    lists = PLAN_FRAME_TOKENS + steps * (PLAN_STEP_TOKENS + digits + 2) + steps * (steps - 1)
    return max(0, reasoning_tokens) + lists


def structured_fields(mode: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The request fields that carry `schema` in `mode` (an explicit mode, not auto or none)."""
    if mode == "vllm":
        return {"structured_outputs": {"json": schema}}
    if mode == "sglang":
        return {"json_schema": json.dumps(schema)}
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "stiva_plan", "schema": schema}}}


class RemoteConductor:
    backend = "remote"
    quantization = None
    adapter = None
    loaded = True  # nothing to load: the model is served elsewhere

    def __init__(
        self,
        model: PoolModel,
        worker: Worker,
        *,
        max_repairs: int = 1,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        deadline_s: float | None = None,
        retries: int = 1,
        structured: str = "auto",
        reasoning_tokens: int = PLAN_REASONING_TOKENS,
    ):
        if structured not in STRUCTURED_MODES:
            raise ValueError(f"structured must be one of {', '.join(STRUCTURED_MODES)}")
        self.pool_model = model
        self.model = model.id
        self.worker = worker
        self.max_repairs = max_repairs
        self.max_tokens = max_tokens  # None: each plan's own bound, `plan_token_bound`
        self.reasoning_tokens = reasoning_tokens  # the reasoning that bound allows
        self.temperature = temperature
        self.deadline_s = deadline_s
        self.retries = retries  # further tries of a reply that broke off after text had arrived
        self.structured = structured
        self._structured_ok = False  # a structured call of this conductor has succeeded

    @property
    def _key(self) -> tuple[str, str]:
        return (self.pool_model.base_url.rstrip("/"), self.pool_model.model)

    def structured_mode(self) -> str | None:
        """The mode the next plan is asked in: None for the plain prompt."""
        if self.structured == "none" or self._key in _refused or self.pool_model.kind == "embedded":
            return None
        if self.structured == "auto":
            return "json_schema" if self.pool_model.source == "discovered" else None
        return self.structured

    async def load(self, progress: object = None) -> None:
        """Nothing to load (the Conductor protocol)."""

    def describe(self) -> dict:
        return {
            "backend": self.backend,
            "model": self.model,
            "quantization": None,
            "device": self.pool_model.base_url or self.pool_model.provider,
        }

    async def plan(self, request: PlanRequest, on_delta: DeltaCallback | None = None) -> Plan:
        started = time.monotonic()
        base = conductor_messages(request)
        mode = self.structured_mode()
        extra: dict[str, Any] | None = None
        if mode is not None:
            schema = lists_json_schema(len(request.workers), request.max_steps, allow_empty=request.round > 1)
            extra = structured_fields(mode, schema)
        messages = _with_suffix(base, extra is not None)
        shape = _Shape(
            len(request.workers),
            request.max_steps,
            request.round > 1,
            self.max_tokens or plan_token_bound(len(request.workers), request.max_steps, self.reasoning_tokens),
        )
        usage = Usage()
        error: WorkflowParseError | None = None
        for attempt in range(1, self.max_repairs + 2):
            if error is not None:
                if on_delta:
                    on_delta(f"\n[plan could not be read: {error}; asking again]\n")
            try:
                text, call_usage = await self._complete(messages, shape, on_delta, extra)
            except _Refused as refused:
                usage = usage + refused.spent
                extra = None
                messages = _with_suffix(base, False) + messages[len(base) :]
                try:
                    text, call_usage = await self._complete(messages, shape, on_delta, None)
                except ConductorError as exc:
                    raise ConductorError(str(exc), usage + (exc.usage or Usage())) from None
            except ConductorError as exc:
                raise ConductorError(str(exc), usage + (exc.usage or Usage())) from None
            usage = usage + call_usage
            try:
                workflow = parse_workflow(text, len(request.workers), request.max_steps, allow_empty=request.round > 1)
            except WorkflowParseError as exc:
                error = exc
                messages = [
                    *messages,
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": REPAIR_PROMPT.format(error=exc)},
                ]
                continue
            return Plan(workflow, split_reasoning(text), text, usage, round(time.monotonic() - started, 4), attempt)
        raise ConductorError(f"{self.model} wrote no valid plan after {self.max_repairs + 1} tries: {error}", usage)

    async def _complete(
        self,
        messages: list[dict],
        shape: "_Shape",
        on_delta: DeltaCallback | None,
        extra: dict[str, Any] | None = None,
    ) -> tuple[str, Usage]:
        """One reply of the conductor model; one that broke off after text is asked for again.
        A reply that broke off is still paid for: its prompt and the text so far are estimated.
        A server that refuses `extra` (the structured-output field) raises `_Refused`."""
        spent = Usage()
        for attempt in range(self.retries + 1):
            try:
                try:
                    text, usage = await self._call(messages, shape, on_delta, extra)
                except ConductorError as exc:  # cut at the bound: the tries before it are paid for too
                    raise ConductorError(str(exc), spent + (exc.usage or Usage())) from None
                if extra:
                    self._structured_ok = True
                return text, spent + usage
            except ProviderError as exc:
                spent = spent + getattr(exc, "spent", Usage())
                if extra and self._refuses(exc):
                    if self._key not in _refused:
                        _refused.add(self._key)
                        _log.warning(
                            "the conductor model %s refused the structured-output field (%s); "
                            "planning with the plain prompt from now on",
                            self.model,
                            exc,
                        )
                    raise _Refused(spent) from None
                if not (exc.retryable and exc.partial) or attempt == self.retries:
                    raise ConductorError(f"the conductor model {self.model} failed: {exc}", spent) from None
                if on_delta:
                    on_delta(f"\n[the reply broke off ({exc}); asking again]\n")
        raise AssertionError("unreachable")

    def _refuses(self, exc: ProviderError) -> bool:
        """Whether `exc` says the server will not take the structured-output field."""
        status = exc.status or 0
        if not 400 <= status < 500 or status in (401, 403, 408, 429) or exc.partial:
            return False
        if self.structured == "auto" and not self._structured_ok:
            return True
        return any(word in str(exc).lower() for word in _REFUSAL_WORDS)

    async def _call(
        self,
        messages: list[dict],
        shape: "_Shape",
        on_delta: DeltaCallback | None,
        extra: dict[str, Any] | None = None,
    ) -> tuple[str, Usage]:
        """One streamed reply, read until its plan is complete (then the stream is closed), its
        end, or `shape.bound` chunks (a server that does not hold to max_tokens). A plan that is
        complete is read on to the next event only: the usage, when the reply ends with its lists."""
        parts: list[str] = []  # what was streamed
        text = ""  # the same, joined
        plan: str | None = None  # the text up to the end of its lists, once they are complete
        chunks = 0
        tail = 0  # chunks read after the plan was complete
        usage: Usage | None = None
        # extra_body is passed only when there is one: a worker without it still plans plainly
        options: dict[str, Any] = {"extra_body": extra} if extra else {"stop": [PLAN_END]}
        stream_chat: Any = self.worker.stream_chat
        stream = stream_chat(self.pool_model, messages, max_tokens=shape.bound, temperature=self.temperature, **options)
        try:
            async with asyncio.timeout(self.deadline_s), contextlib.aclosing(stream):
                async for event in stream:
                    if isinstance(event, TextDelta):
                        parts.append(event.text)
                        chunks += 1
                        if plan is not None:  # text after a complete plan: read on briefly for the count
                            tail += 1
                            if tail > PLAN_TAIL_CHUNKS or PLAN_END in "".join(parts[-tail:]):
                                break
                            continue
                        checked = len(text)
                        text += event.text
                        end = plan_end(text, shape.pool, shape.steps, allow_empty=shape.allow_empty, since=checked)
                        if end is not None:
                            # The lists are complete. Read on only a few chunks: the server's usage
                            # when the reply ends here (at PLAN_END), else reading stops.
                            plan = text[:end]
                            if on_delta and end > checked:
                                on_delta(text[checked:end])
                            continue
                        if on_delta:
                            on_delta(event.text)
                        if chunks >= shape.bound:  # a server past max_tokens: stop reading
                            break
                    elif isinstance(event, UsageReport):
                        usage = event.usage
        except TimeoutError:
            error = ProviderError.past_deadline(self.pool_model.provider, self.deadline_s, bool(parts))
            error.spent = _estimate(messages, parts)
            raise error from None
        except ProviderError as exc:
            exc.partial = exc.partial or bool(parts)
            exc.spent = _estimate(messages, parts) if parts else Usage()
            raise
        if usage is None:  # stopped before the server's count came: what was streamed
            usage = _estimate(messages, parts)
        if plan is not None:
            return plan, usage
        if chunks >= shape.bound or usage.completion_tokens >= shape.bound:
            raise ConductorError(
                f"{self.model} wrote no complete plan within its bound of {shape.bound} tokens (cut there; "
                "a planner that reasons at length needs a larger [conductor] max_reasoning_tokens)",
                usage,
            )
        return text, usage


def _estimate(messages: list[dict], parts: list[str]) -> Usage:
    """What a call that broke off consumed, estimated so as not to undercount: its prompt with the
    chat template's overhead, and the text that arrived."""
    return Usage(estimate_prompt_tokens(messages), estimate_text_tokens("".join(parts)), True)


@dataclass(frozen=True)
class _Shape:
    """What a plan's reply is read against: the pool's size, the step limit, whether empty lists
    are a plan (a later round), and the bound on its tokens."""

    pool: int
    steps: int
    allow_empty: bool
    bound: int


class _Refused(Exception):
    """The server refused the structured-output field; `spent` is what the tries cost."""

    def __init__(self, spent: Usage):
        super().__init__("structured output refused")
        self.spent = spent


def _with_suffix(messages: list[dict], structured: bool) -> list[dict]:
    """The conductor messages with the closing line: the JSON object when the server is held to
    the schema, else the start of the reasoning the plain prompt asks for."""
    suffix = (
        JSON_SUFFIX if structured else f"Begin with: {GENERATION_PREFIX} End with a line {PLAN_END} after the lists."
    )
    return [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + f"\n\n{suffix}"}]
