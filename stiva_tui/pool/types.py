"""What the pool is made of: models, and the events a streaming chat call yields."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..core.usage import Usage
from ..core.workflow import Workflow

ModelKind = Literal["openai", "embedded"]


class ProviderError(Exception):
    """A chat call failed. `status` is the HTTP status (None for connection faults)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        provider: str | None = None,
    ):
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.provider = provider
        self.partial = False  # set when text had already streamed before the failure
        prefix = f"{provider}: " if provider else ""
        code = f"HTTP {status}: " if status else ""
        super().__init__(f"{prefix}{code}{message}")
        self.message = message

    @classmethod
    def past_deadline(cls, provider: str, deadline_s: float | None, partial: bool) -> "ProviderError":
        """A call that ran past `[workers] deadline_s`: it fails like any other (retry, fallback)."""
        error = cls(
            f"no complete reply within {deadline_s:g} s ([workers] deadline_s)", provider=provider, retryable=True
        )
        error.partial = partial
        return error

    def mask(self, secrets: "Iterable[str | None]") -> "ProviderError":
        """Replace every one of `secrets` (and anything shaped like a key) in the message: a
        provider may echo the key it was sent, and this text is shown, stored and served."""
        from ..keys import mask

        self.message = mask(self.message, secrets)
        self.args = (mask(str(self.args[0]) if self.args else "", secrets), *self.args[1:])
        return self


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class UsageReport:
    usage: Usage


ChatEvent = TextDelta | UsageReport


@dataclass(frozen=True)
class PoolModel:
    """One model of the pool. `api_key` never leaves the process: not shown, stored or logged."""

    id: str  # what the conductor and the user see
    provider: str
    model: str  # the provider's own name for it
    base_url: str = ""
    price_in: float = 0.0  # USD per 1M input tokens
    price_out: float = 0.0  # USD per 1M output tokens
    description: str = ""
    kind: ModelKind = "openai"
    enabled: bool = True
    available: bool = True
    reason: str = ""  # why it is (un)available: "key from $OPENAI_API_KEY", "no key", ...
    source: str = "config"  # config | catalog | discovered | embedded
    planner: bool = False  # marked to plan (catalog or config) when there is no local conductor
    latency_s: float | None = None  # typical seconds a call (config, sim profile); None: unknown
    api_key: str | None = field(default=None, repr=False, compare=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.price_in + usage.completion_tokens * self.price_out) / 1e6

    def public(self) -> dict:
        """Everything about the model that may be shown or stored (no key)."""
        return {
            "id": self.id,
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
            "price_in": self.price_in,
            "price_out": self.price_out,
            "description": self.description,
            "kind": self.kind,
            "enabled": self.enabled,
            "available": self.available,
            "reason": self.reason,
            "source": self.source,
            "planner": self.planner,
        }


@dataclass(frozen=True)
class StepInput:
    """What one step of a plan is about: the question, the plan, the step's index in it, the
    earlier steps' outputs (by index) and the conversation before the question."""

    question: str
    workflow: Workflow
    index: int
    outputs: Mapping[int, str]
    conversation: Sequence[dict[str, Any]] = ()


@dataclass(frozen=True)
class WorkerPrompt:
    """What a worker is sent for one step: messages, and the stops and cap the prompt needs.
    `finish` is the worker's clean-up of the reply (a base model's echoes of its prompt); None:
    the reply is the answer as it is."""

    messages: list[dict[str, Any]]
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    finish: Callable[[str], str] | None = None


class WorkerWrapper:
    """A worker in front of another (`self.worker`): the secrets to mask, the prompting and the
    closing are the inner one's. Subclasses add `stream_chat`."""

    worker: Any

    def prepare(self, model: PoolModel, step: StepInput) -> WorkerPrompt | None:
        prepare = getattr(self.worker, "prepare", None)
        return prepare(model, step) if prepare is not None else None

    def know_secrets(self, models: Iterable[PoolModel]) -> None:
        know = getattr(self.worker, "know_secrets", None)
        if know is not None:
            know(models)

    async def aclose(self) -> None:
        await self.worker.aclose()


class Worker(Protocol):
    """Anything that streams a chat completion: the HTTP client, the embedded model.

    A worker may also own its prompting, with a method the engine calls when it has one:
    `prepare(model, step: StepInput) -> WorkerPrompt | None`, the prompt it builds itself for
    a step on `model` (the embedded base model's few-shot prompt, with its stops, cap and answer
    clean-up). None, or no such method: the engine sends its chat prompt, and the reply as it is.
    """

    def stream_chat(
        self,
        model: PoolModel,
        messages: Sequence[dict],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> AsyncIterator[ChatEvent]:
        """Yield TextDelta events as text arrives, then exactly one UsageReport."""
        ...
