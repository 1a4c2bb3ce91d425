"""Messages between two of Stiva's own processes over a stream socket: length-prefixed JSON, read
back only as the messages that socket speaks.

`stiva ask`'s warm worker (cli/warm.py) and the model process (runtime/model_process.py, a socket
pair with the child it started) speak it. A frame is the body's length (4 bytes, big-endian), then
the body: one JSON object, which pydantic validates into one of the socket's message types (each a
model whose "t" field names it). Nothing in a frame names code to run, so a peer can send only
data: a frame that is not JSON (a pickle, say), is no message of that socket's, or is longer than
MAX_FRAME_BYTES is refused with a WireError that says why in one line, and nothing in it is run.
(These sockets carried pickles until 2026-12; a pickle's globals could name any callable.)

Values inside a message that are one of several classes (the engine's events, a worker's text
delta or usage) go as a union tagged by a "type" field holding the class's name: `tagged`.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Annotated, Any, TypeVar, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    ValidationError,
    WrapSerializer,
)
from pydantic_core import PydanticSerializationError

HEADER = struct.Struct(">I")  # the body's length, big-endian
MAX_FRAME_BYTES = (
    64 << 20
)  # far above any message (a plan, a run's trace); a bound on what one peer makes the other hold
TAG = "type"  # the field naming a tagged value's class

T = TypeVar("T")


class WireError(ValueError):
    """A frame this end does not read (not JSON, no message of this socket's, too long), or a
    message it cannot send. `in_step`: the whole frame was read, so the next one can be; False:
    the stream is out of step (a length over the limit was not read past) and must be closed."""

    def __init__(self, message: str, *, in_step: bool = True):
        super().__init__(message)
        self.in_step = in_step


class Message(BaseModel):
    """The base of every message on a socket: its fields are data only, checked when read; no
    field may be left out or added (a peer that sends other fields speaks something else)."""

    # inf and nan travel as JSON's common extension (Infinity, NaN), as a float held them
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


def frame(message: BaseModel) -> bytes:
    """`message` as one frame: its length, then its JSON. Raises WireError where it cannot go."""
    try:
        data = message.__pydantic_serializer__.to_json(message)
    except PydanticSerializationError:
        # A lone surrogate (a provider's "\udc80", an undecodable argv byte): JSON cannot carry
        # it, so it goes as U+FFFD, as `stiva ask` reads a question that is not UTF-8.
        data = json.dumps(_valid_text(message.model_dump(mode="json")), ensure_ascii=False).encode()
    if len(data) > MAX_FRAME_BYTES:
        raise WireError(f"a message of {len(data):,} bytes is over the {MAX_FRAME_BYTES:,}-byte limit of a frame")
    return HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader, messages: TypeAdapter[T], *, limit: int = MAX_FRAME_BYTES) -> T:
    """The next message, one of `messages`; EOFError where the other end went away, WireError for
    a frame that is not one (see WireError.in_step)."""
    try:
        size = HEADER.unpack(await reader.readexactly(HEADER.size))[0]
        if size > limit:
            raise WireError(f"a frame of {size:,} bytes is over the {limit:,}-byte limit", in_step=False)
        data = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise EOFError from exc
    return decode(data, messages)


def decode(data: bytes, messages: TypeAdapter[T]) -> T:
    """A frame's body as one of `messages`; WireError (one line saying why) for anything else."""
    try:
        return messages.validate_json(data)
    except ValidationError as exc:
        raise WireError(_why(exc, data)) from None


def _why(exc: ValidationError, data: bytes) -> str:
    if data[:1] == b"\x80":  # the first opcode of every pickle of protocol 2 or later
        return "a pickle, not a JSON message: refused unread"
    first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
    if first["type"] == "json_invalid":
        return f"not a JSON message ({first['msg']})"
    where = ".".join(str(part) for part in first["loc"])
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"not a message of this socket's: {where or 'the message'}: {first['msg']}{more}"


def _valid_text(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_valid_text(k): _valid_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid_text(v) for v in value]
    return value


# --- a value that is one of several classes, tagged with the class's name ----------------------


def _tag_of(value: Any) -> str | None:
    if isinstance(value, dict):
        tag = value.get(TAG)
        return tag if isinstance(tag, str) else None
    return type(value).__name__


def _untagged(value: Any) -> Any:
    if isinstance(value, dict) and TAG in value:
        return {k: v for k, v in value.items() if k != TAG}
    return value


def _with_tag(value: Any, handler: SerializerFunctionWrapHandler) -> Any:
    return {TAG: type(value).__name__, **handler(value)}


def tagged(*classes: type) -> Any:
    """The type "one of `classes`" (dataclasses or models), sent as the value's fields plus a
    "type" field naming its class, and read back as that class only: a name not among `classes`
    is refused, and no name is ever looked up anywhere else."""
    members = tuple(Annotated[cls, BeforeValidator(_untagged), Tag(cls.__name__)] for cls in classes)
    return Annotated[Union[members], Discriminator(_tag_of), WrapSerializer(_with_tag)]  # noqa: UP007 - built at run time
