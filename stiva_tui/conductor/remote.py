"""The `remote` conductor: any pool model prompted with the conductor prompt.

The plan is parsed and validated; when it does not parse, the model is shown its parse error once
and asked again (one repair retry). A reply that broke off after text had arrived (a cut or
garbled stream, the deadline) is asked for again, as a worker's step would be, and every call is
bounded by `deadline_s`. This is the scale-out path: a conductor served by vLLM or
SGLang over several GPUs is just another OpenAI-compatible endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from ..core.usage import Usage, estimate_tokens
from ..core.workflow import WorkflowParseError, parse_workflow, split_reasoning
from ..pool.types import PoolModel, ProviderError, TextDelta, UsageReport, Worker
from .base import ConductorError, DeltaCallback, Plan, PlanRequest
from .prompt import GENERATION_PREFIX, conductor_messages

REPAIR_PROMPT = (
    "Your plan could not be read: {error}.\n"
    "Write the plan again: the three lines model_id = [...], subtasks = [...], access_list = [...], "
    "following the rules, and nothing after them."
)


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
        max_tokens: int | None = 1024,
        temperature: float | None = 0.0,
        deadline_s: float | None = None,
        retries: int = 1,
    ):
        self.pool_model = model
        self.model = model.id
        self.worker = worker
        self.max_repairs = max_repairs
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.deadline_s = deadline_s
        self.retries = retries  # further tries of a reply that broke off after text had arrived

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
        messages = conductor_messages(request)
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + f"\n\nBegin with: {GENERATION_PREFIX}"}
        usage = Usage()
        error: WorkflowParseError | None = None
        for attempt in range(1, self.max_repairs + 2):
            if error is not None:
                if on_delta:
                    on_delta(f"\n[plan could not be read: {error}; asking again]\n")
            try:
                text, call_usage = await self._complete(messages, on_delta)
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

    async def _complete(self, messages: list[dict], on_delta: DeltaCallback | None) -> tuple[str, Usage]:
        """One reply of the conductor model; one that broke off after text is asked for again.
        A reply that broke off is still paid for: its prompt and the text so far are estimated."""
        spent = Usage()
        for attempt in range(self.retries + 1):
            try:
                text, usage = await self._call(messages, on_delta)
                return text, spent + usage
            except ProviderError as exc:
                spent = spent + getattr(exc, "spent", Usage())
                if not (exc.retryable and exc.partial) or attempt == self.retries:
                    raise ConductorError(f"the conductor model {self.model} failed: {exc}", spent) from None
                if on_delta:
                    on_delta(f"\n[the reply broke off ({exc}); asking again]\n")
        raise AssertionError("unreachable")

    async def _call(self, messages: list[dict], on_delta: DeltaCallback | None) -> tuple[str, Usage]:
        parts: list[str] = []
        usage = Usage()
        stream = self.worker.stream_chat(
            self.pool_model, messages, max_tokens=self.max_tokens, temperature=self.temperature
        )
        try:
            async with asyncio.timeout(self.deadline_s), contextlib.aclosing(stream):
                async for event in stream:
                    if isinstance(event, TextDelta):
                        parts.append(event.text)
                        if on_delta:
                            on_delta(event.text)
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
        return "".join(parts), usage


def _estimate(messages: list[dict], parts: list[str]) -> Usage:
    """What a call that broke off consumed, estimated: its prompt and the text that arrived."""
    return Usage(sum(estimate_tokens(m["content"]) for m in messages), estimate_tokens("".join(parts)), True)
