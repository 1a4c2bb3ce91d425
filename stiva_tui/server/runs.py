"""What a chat request becomes: the question and conversation, a slot among the concurrent runs,
and the part of a run's event stream that is the final answer.

Which text is the answer: the output of the last step of the last round. A step's deltas are sent
live only once that step is certain to be final — the engine marks it so on `StepStarted.final`
(the last step of a workflow in the last round the run may have). Anything else (a round-1 answer
that a later round kept) is sent whole when the run finishes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..core.events import Event, RunFinished, StepDelta, StepStarted
from .errors import APIError
from .schemas import UNSUPPORTED_PARTS, ChatMessage


@dataclass
class ChatInput:
    question: str  # the last user message
    instructions: str = ""  # every system (or developer) message, joined: read before the question
    history: list[dict] = field(default_factory=list)  # every message before the question, as sent
    # Every message as sent (roles kept, text parts joined): what a pool model named in the
    # request gets, unchanged (a pass-through).
    messages: list[dict] = field(default_factory=list)


def read_messages(messages: list[ChatMessage]) -> ChatInput:
    """Split OpenAI messages into question and conversation; refuse what Stiva cannot pass on."""
    texts: list[tuple[str, str]] = []
    verbatim: list[dict] = []
    for i, message in enumerate(messages):
        if getattr(message, "tool_calls", None) or getattr(message, "function_call", None):
            raise APIError(
                400, f"messages[{i}]: tool calls are not supported", param=f"messages.{i}", code="tools_not_supported"
            )
        text = _text_of(message, i)
        texts.append(("system" if message.role == "developer" else message.role, text))
        verbatim.append(
            {
                "role": message.role,
                "content": text,
                **({"name": message.name} if getattr(message, "name", None) else {}),
            }
        )
    last_user = max((i for i, (role, _) in enumerate(texts) if role == "user"), default=None)
    if last_user is None:
        raise APIError(
            400,
            "messages holds no user message: the last user message is the question",
            param="messages",
            code="no_user_message",
        )
    if last_user != len(texts) - 1:
        raise APIError(
            400,
            "the last message must be the user's question (a trailing assistant or system message is not supported)",
            param="messages",
            code="invalid_value",
        )
    system = "\n\n".join(text for role, text in texts if role == "system" and text)
    history = [{"role": role, "content": text} for role, text in texts[:last_user]]
    return ChatInput(texts[last_user][1], system, history, verbatim)


def _text_of(message: ChatMessage, i: int) -> str:
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for j, part in enumerate(content):
        if part.type == "text":
            parts.append(part.text or "")
        elif part.type in UNSUPPORTED_PARTS:
            raise APIError(
                400,
                f"messages[{i}].content[{j}]: {part.type} content is not supported (the pool is text-only)",
                param=f"messages.{i}.content.{j}.type",
                code="unsupported_content",
            )
        else:
            raise APIError(
                400,
                f"messages[{i}].content[{j}]: unknown content part type {part.type!r}",
                param=f"messages.{i}.content.{j}.type",
                code="invalid_value",
            )
    return "".join(parts)


class ServerBusy(Exception):
    """Every run slot is taken and the queue is full."""


class RunSlots:
    """At most `max_running` runs at once; up to `max_queue` more wait; beyond that, ServerBusy."""

    def __init__(self, max_running: int, max_queue: int):
        self.max_running = max_running
        self.max_queue = max_queue
        self.waiting = 0
        self.running = 0
        self._free = asyncio.Semaphore(max_running)

    async def acquire(self) -> None:
        if self._free.locked() and self.waiting >= self.max_queue:
            raise ServerBusy
        self.waiting += 1
        try:
            await self._free.acquire()
        finally:
            self.waiting -= 1
        self.running += 1

    def release(self) -> None:
        self.running -= 1
        self._free.release()


class AnswerBroken(Exception):
    """The final step failed after part of its answer had been sent; it cannot be taken back."""


class AnswerRelay:
    """Feeds on a run's events; returns the answer text that may be sent now."""

    def __init__(self) -> None:
        self.final: tuple[int, int] | None = None  # (round, index) of the step known to be final
        self.sent: list[str] = []

    def feed(self, event: Event) -> str:
        if isinstance(event, StepStarted) and event.final:
            if self.sent:
                raise AnswerBroken(f"step {event.index} failed after part of the answer was sent")
            self.final = (event.round, event.index)
        elif isinstance(event, StepDelta):
            if (event.round, event.index) == self.final:
                self.sent.append(event.text)
                return event.text
        elif isinstance(event, RunFinished):
            sent = "".join(self.sent)
            # The engine's answer is the final step's output: what was sent is its start.
            rest = event.answer[len(sent) :] if event.answer.startswith(sent) else ""
            self.sent.append(rest)
            return rest
        return ""


class StopFilter:
    """Cuts the answer at the first of the request's stop sequences, across chunk boundaries."""

    def __init__(self, stops: list[str]):
        self.stops = [s for s in stops if s]
        self.hold = max((len(s) for s in self.stops), default=1) - 1
        self.pending = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped or not self.stops:
            return "" if self.stopped else text
        self.pending += text
        cut = min((i for i in (self.pending.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            out, self.pending = self.pending[:cut], ""
            return out
        if len(self.pending) <= self.hold:
            return ""
        out, self.pending = self.pending[: len(self.pending) - self.hold], self.pending[len(self.pending) - self.hold :]
        return out

    def flush(self) -> str:
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out
