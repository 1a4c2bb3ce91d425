"""The request body of `POST /v1/chat/completions` (declared in the OpenAPI document) and the
response objects, in the OpenAI wire format.

Fields OpenAI clients commonly send but Stiva does not act on (seed, penalties, logprobs, ...) are
accepted and ignored; the ones it cannot honour (tools, functions, n > 1) are refused by the app
with a clear 400 rather than silently dropped.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Content parts Stiva cannot pass on: the pool is text-only.
# Stop sequences: as many as OpenAI's API takes, each of a bounded length. Every streamed chunk is
# searched for each of them in the event loop, and the longest sets how much text waits.
MAX_STOPS = 4
MAX_STOP_CHARS = 1000
UNSUPPORTED_PARTS = {"image_url", "input_audio", "file", "image", "audio", "input_image", "input_file"}


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    # Only the roles Stiva takes: tool and function messages need tool calling, which it has not.
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ContentPart] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """An OpenAI chat-completions request. `stiva_trace: true` adds the workflow trace."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [{"model": "conductor-mini", "messages": [{"role": "user", "content": "What is 6 x 7?"}]}]
        },
    )

    model: str = Field(
        min_length=1,
        description="`conductor`, `conductor-mini`, or a pool model id",
        examples=["conductor", "conductor-mini"],
    )
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1, description="per worker call")
    max_completion_tokens: int | None = Field(None, ge=1, description="per worker call")
    temperature: float | None = Field(None, ge=0, le=2)
    stop: str | list[str] | None = Field(
        None, description=f"up to {MAX_STOPS} sequences of at most {MAX_STOP_CHARS} characters each"
    )
    n: int | None = Field(None, ge=1)
    user: str | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    stiva_trace: bool = Field(False, strict=True, description="true adds the workflow trace")
    stiva_preference: str | float | None = Field(
        None,
        description="what the conductor optimises for: best, balanced, cheap, fast, or a number from 0 "
        "(best) to 1 (cheap); default: the server's [conductor] prefer. A pool model named as "
        "`model` has no conductor, so this changes nothing there",
        examples=["cheap"],
    )

    @field_validator("stop")
    @classmethod
    def _stops(cls, value):
        stops = [value] if isinstance(value, str) else value or []
        if len(stops) > MAX_STOPS:
            raise ValueError(f"at most {MAX_STOPS} stop sequences (got {len(stops)})")
        if any(len(stop) > MAX_STOP_CHARS for stop in stops):
            raise ValueError(f"a stop sequence is at most {MAX_STOP_CHARS} characters")
        return value

    @field_validator("stiva_preference")
    @classmethod
    def _preference(cls, value):
        from ..core.preference import parse_preference

        parse_preference(value)  # a PreferenceError (ValueError) is the request's 400, naming the field
        return value


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


def usage_object(totals: Any) -> dict:
    """OpenAI's usage object; `stiva_orchestration` is the part of it the conductor's planning
    took (its failed attempts included), apart, as orchestrating APIs report it."""
    prompt, completion = int(totals.prompt_tokens), int(totals.completion_tokens)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "stiva_orchestration": {
            "total_tokens": int(getattr(totals, "conductor_tokens", 0)),
            "cost_usd": float(getattr(totals, "conductor_cost_usd", 0.0)),
        },
    }


def completion_object(completion_id: str, model: str, answer: str, totals: Any, created: int | None = None) -> dict:
    """A `chat.completion` object."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": answer}, "logprobs": None, "finish_reason": "stop"}
        ],
        "usage": usage_object(totals),
    }


def chunk_object(
    completion_id: str,
    model: str,
    created: int,
    delta: dict | None,
    finish_reason: str | None = None,
    usage: dict | None = None,
    with_usage_field: bool = False,
) -> dict:
    """A `chat.completion.chunk`; `delta=None` gives the usage-only chunk (no choices)."""
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
    }
    chunk["choices"] = (
        [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    )
    if with_usage_field:
        chunk["usage"] = usage  # null on every chunk but the last when include_usage is asked for
    return chunk


class ForkRequest(BaseModel):
    """`POST /v1/runs/{run_id}/fork`: run the run's step `step` (numbered as the app's tree
    numbers it: 2, or "2.3" for round 2) again on `model`, and every step that reads it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"step": 2, "model": "gpt-4o", "subtask": "Check the draft, briefly."}]},
    )

    step: int | str
    model: str
    subtask: str | None = None
