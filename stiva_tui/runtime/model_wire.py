"""What the model process and the process that started it say over their socket pair
(model_process.py): the calls (load a conductor, plan, answer a chat) and their replies, each a
message of core/wire.py (JSON, validated on arrival; `Requests` and `Replies` read them back)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, JsonValue, TypeAdapter

from ..conductor.base import Plan, PlanRequest
from ..config import ConductorConfig
from ..core.wire import Message, tagged
from ..pool.types import ChatEvent, TextDelta, UsageReport

if TYPE_CHECKING:
    TaggedChatEvent = ChatEvent
else:
    TaggedChatEvent = tagged(TextDelta, UsageReport)

Facts = dict[str, JsonValue]  # what a conductor says about itself (describe()), its last plan's stats


class ConductorSpec(Message):
    """Which conductor a call runs on: the child builds it from this (once per spec)."""

    backend: str  # "embedded" or "local": the child says it runs no other
    config: ConductorConfig


# --- calls, to the child ------------------------------------------------------------------------


class Load(Message):
    t: Literal["load"] = "load"
    id: int = 0  # the call's number, set by ModelProcess.call; its replies carry it
    conductor: ConductorSpec


class PlanCall(Message):
    t: Literal["plan"] = "plan"
    id: int = 0
    conductor: ConductorSpec
    request: PlanRequest


class Chat(Message):
    t: Literal["chat"] = "chat"
    id: int = 0
    messages: list[dict[str, JsonValue]]
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] = []


class Preload(Message):
    """Load and warm up the embedded worker now, before any question (ModelProcess.warm_up)."""

    t: Literal["preload"] = "preload"
    id: int = 0


class Cancel(Message):
    t: Literal["cancel"] = "cancel"
    id: int


Call = Load | PlanCall | Chat | Preload
Request = Call | Cancel
Requests: TypeAdapter[Request] = TypeAdapter(Annotated[Request, Field(discriminator="t")])


# --- replies, from the child ----------------------------------------------------------------------


class Progress(Message):
    """The conductor's load, as it goes."""

    t: Literal["progress"] = "progress"
    id: int
    fraction: float | None
    message: str


class Delta(Message):
    """The plan's text, as the conductor writes it."""

    t: Literal["delta"] = "delta"
    id: int
    text: str


class Event(Message):
    """The embedded worker's own TextDelta or UsageReport."""

    t: Literal["event"] = "event"
    id: int
    event: TaggedChatEvent


class Done(Message):
    """The call's end: what a load or a plan found (nothing, for a chat)."""

    t: Literal["done"] = "done"
    id: int
    describe: Facts | None = None
    plan: Plan | None = None
    stats: Facts | None = None


class Error(Message):
    """The call failed: why, as the child's conductor or worker said it."""

    t: Literal["error"] = "error"
    id: int
    message: str


class Refused(Message):
    """A frame the child could not read (see core/wire.py): nothing of it ran."""

    t: Literal["refused"] = "refused"
    message: str


class Gone(Message):
    """Never sent: what the parent tells every call still waiting when the child went away."""

    t: Literal["gone"] = "gone"
    message: str


Reply = Progress | Delta | Event | Done | Error | Refused
Replies: TypeAdapter[Reply] = TypeAdapter(Annotated[Reply, Field(discriminator="t")])
