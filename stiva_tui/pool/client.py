"""One async streaming chat client for every OpenAI-compatible endpoint.

`HttpWorker.stream_chat(model, messages, ...)` posts to `{base_url}/chat/completions` with
`stream=True` and `stream_options.include_usage`, reads it with aiohttp, parses the SSE lines with
httpx-sse's decoder, and yields `TextDelta`s, then exactly one `UsageReport` (estimated and marked
as such when the provider sent none, or counts no call could have: see `token_count`). Failures
before any text arrives (429 with Retry-After, 5xx, connection errors, timeouts) are retried with
backoff; a failure after text has streamed raises `ProviderError` (the executor retries the whole
step). Cancelling the consuming task closes the connection.

One call's answer is at most `max_answer_bytes` of UTF-8 text (`[workers] max_answer_kb`): at the
cap the client stops reading, closes the connection and fails the call (not retryable), having
passed on only the text within the cap, so that no provider fills the memory or the history.

Every answer is masked here (`keys.AnswerMask`): the pool's keys and header values, in every form
an error text masks them, never reach a `TextDelta`, however the provider splits them across
chunks; only a character or two that may begin one is held back until the next chunk.

`PoolWorker` routes a call to the HTTP client or to the embedded in-process model.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

import aiohttp
import aiohttp.http_exceptions
from httpx_sse._decoders import SSEDecoder  # the spec's line parser, without httpx's transport

from ..config import WorkersConfig
from ..core.usage import Usage, estimate_prompt_tokens, estimate_text_tokens, token_count
from ..keys import AnswerMask
from .types import ChatEvent, PoolModel, ProviderError, StepInput, TextDelta, UsageReport, WorkerPrompt

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
MAX_RETRY_AFTER_S = 60.0
# The longest line of an event stream read whole (aiohttp's default, 128 KiB, would fail a provider
# that sends a long answer as one chunk); longer is a malformed stream. One event's data lines
# together are held to the same bound (SSE joins them until a blank line).
MAX_LINE_BYTES = 4 * 2**20
# The most answer text one call may bring, in UTF-8 bytes, unless told otherwise: [workers]
# max_answer_kb's default. A streamed answer is read chunk by chunk, so the cap may exceed the
# line bound; one chunk of it may not.
MAX_ANSWER_BYTES = WorkersConfig.model_fields["max_answer_kb"].default * 1024
# What is read of the body after [DONE] so the connection is reused, and of an error reply.
DRAIN_BYTES = 2**16


class HttpWorker:
    """Streaming chat over aiohttp; one connection pool for all providers, made in the event loop
    that first calls (a call from another loop gets a pool of its own).

    aiohttp rather than httpx: its C parser and plain asyncio cost less CPU per streamed call, the
    largest share of what `stiva serve` adds to a request (docs/decisions/aiohttp.md)."""

    def __init__(
        self,
        *,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ):
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_answer_bytes = max_answer_bytes
        # sock_read: the longest wait for the next bytes of a reply, as httpx's read timeout was.
        self._timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout_s, sock_read=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Every key and header value configured in the pool: masked in every error text.
        self.secrets: set[str] = set()

    @property
    def session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=256),
                # a line is read whole up to twice the buffer: MAX_LINE_BYTES
                timeout=self._timeout,
                read_bufsize=MAX_LINE_BYTES // 2,
                trust_env=False,
            )
            self._loop = loop
        return self._session

    def prepare(self, model: PoolModel, step: StepInput) -> WorkerPrompt | None:
        """None: a chat model is sent the engine's chat prompt, and its reply is the answer."""
        return None

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._loop is asyncio.get_running_loop():
            await session.close()

    async def stream_chat(
        self,
        model: PoolModel,
        messages: Sequence[dict],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatEvent]:
        """`extra_body`: fields added to the request as they are (a served conductor's
        structured-output field); never replacing the ones above."""
        body: dict = {
            "model": model.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if temperature is not None:
            body["temperature"] = temperature
        if stop:
            body["stop"] = list(stop)
        for key, value in (extra_body or {}).items():
            body.setdefault(key, value)
        headers = {"Accept": "text/event-stream", **dict(model.headers)}
        if model.api_key:
            headers["Authorization"] = f"Bearer {model.api_key}"
        url = f"{model.base_url.rstrip('/')}/chat/completions"

        secrets = [model.api_key, *(value for _, value in model.headers), *self.secrets]
        attempt = 0
        while True:
            attempt += 1
            streamed_text = False
            # A provider may echo the key it was sent in its answer too: every answer is masked
            # here, the one place all of them pass, before the app, `stiva ask`, the history and
            # `stiva serve` see it; a key split across deltas is held back until it can be told.
            answer = AnswerMask(secrets)
            try:
                async for event in self._stream_once(model, url, body, headers):
                    if isinstance(event, TextDelta):
                        streamed_text = True
                        text = await _masked(answer, event.text)
                        if text:
                            yield TextDelta(text)
                        continue
                    if rest := answer.flush():
                        yield TextDelta(rest)
                    yield event
                if rest := answer.flush():
                    yield TextDelta(rest)
                return
            except ProviderError as exc:
                exc.partial = streamed_text
                exc.mask(secrets)
                if streamed_text:
                    if rest := answer.flush():  # the answer so far, as it was passed on before
                        yield TextDelta(rest)
                    raise
                if not exc.retryable or attempt > self.retries:
                    raise
                await asyncio.sleep(self._delay(attempt, exc.retry_after))

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
        base = self.backoff_s * (2 ** (attempt - 1))
        return min(base, 8.0) * (0.75 + random.random() * 0.5)

    async def _stream_once(self, model: PoolModel, url: str, body: dict, headers: dict) -> AsyncIterator[ChatEvent]:
        provider = model.provider
        cap = self.max_answer_bytes
        text_parts: list[str] = []
        size = 0  # UTF-8 bytes of text_parts
        usage: Usage | None = None
        try:
            async with self.session.post(url, json=body, headers=headers) as response:
                if response.status >= 400:
                    raise _status_error(
                        response.status,
                        response.reason or "",
                        await _read_some(response),
                        response.headers.get("retry-after"),
                        provider,
                    )
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    # Some servers ignore stream=True and answer with one JSON object. Read at most
                    # what an answer within the cap can take as JSON (\u escapes: 6 bytes a byte).
                    whole = await _read_whole(response, 6 * cap + DRAIN_BYTES, cap, provider)
                    text, usage = _parse_full_reply(whole, provider)
                    if _utf8_size(text) > cap:
                        raise _too_long(cap, provider)
                    if text:
                        text_parts.append(text)
                        yield TextDelta(text)
                else:
                    decoder = SSEDecoder()
                    event_bytes = 0  # of the data lines of the event not dispatched yet
                    sent_usage = False  # a usage chunk came (plausible or not): the stream got to its end
                    async for line in _lines(response):
                        if not line:
                            event_bytes = 0
                        elif line.startswith("data"):
                            event_bytes += len(line)
                            if event_bytes > MAX_LINE_BYTES:
                                response.close()
                                raise ProviderError(
                                    f"a stream event over {MAX_LINE_BYTES // 2**20} MiB: no chat stream",
                                    provider=provider,
                                    retryable=False,
                                )
                        sse = decoder.decode(line)
                        if sse is None:
                            continue
                        data = sse.data.strip()
                        if not data:
                            continue
                        if data == "[DONE]":
                            await _drain(response)
                            break
                        chunk = _decode_chunk(data, provider)
                        if "error" in chunk and not chunk.get("choices"):
                            raise ProviderError(_error_message(chunk), provider=provider, retryable=True)
                        piece = _chunk_text(chunk, provider)
                        if piece:
                            size += _utf8_size(piece)
                            if size > cap:  # stop reading here: nothing more of it is wanted
                                response.close()
                                raise _too_long(cap, provider)
                            text_parts.append(piece)
                            yield TextDelta(piece)
                        if chunk.get("usage"):
                            usage = _usage_from(chunk["usage"], provider)
                            sent_usage = True
                    else:
                        # The stream ended without [DONE]: cut off mid-way.
                        if not text_parts and not sent_usage:
                            raise ProviderError("stream ended before any data", provider=provider, retryable=True)
                        if not sent_usage:
                            raise ProviderError(
                                "stream was cut off before it finished", provider=provider, retryable=True
                            )
        except ProviderError:
            raise
        except TimeoutError as exc:  # aiohttp's timeouts are asyncio.TimeoutError subclasses
            raise ProviderError(
                f"timed out ({type(exc).__name__}) waiting for {model.base_url}", provider=provider, retryable=True
            ) from None
        except (aiohttp.ClientError, aiohttp.http_exceptions.HttpProcessingError) as exc:  # a line too long, too
            raise ProviderError(
                f"connection failed: {exc or type(exc).__name__}", provider=provider, retryable=True
            ) from None
        if usage is None:
            # estimated so as not to undercount what the provider bills (core/usage.py)
            usage = Usage(
                estimate_prompt_tokens(body["messages"]), estimate_text_tokens("".join(text_parts)), estimated=True
            )
        yield UsageReport(usage)


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The event stream's lines without their ends (CRLF, LF; bytes that are not UTF-8 replaced)."""
    async for raw in response.content:
        yield raw.decode("utf-8", "replace").rstrip("\r\n")


async def _read_some(response: aiohttp.ClientResponse, limit: int = DRAIN_BYTES) -> str:
    """The start of an error reply's body as text: what has arrived, at most `limit` bytes."""
    data = await response.content.read(limit)
    return data.decode("utf-8", "replace")


async def _read_whole(response: aiohttp.ClientResponse, limit: int, cap: int, provider: str) -> str:
    """The whole body of a one-JSON reply as text, however many reads it arrives in (aiohttp's
    read(n) returns what has arrived so far). Over `limit` bytes, reading stops and the call fails
    as an answer over `cap`."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await response.content.read(limit + 1 - size):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            response.close()
            raise _too_long(cap, provider)
    return b"".join(chunks).decode("utf-8", "replace")


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _too_long(cap: int, provider: str) -> ProviderError:
    """The failure of a call whose answer went past the cap: the same call would again."""
    size = f"{cap // 1024} KiB" if cap % 1024 == 0 else f"{cap} byte"
    return ProviderError(
        f"answer longer than the {size} cap ([workers] max_answer_kb)", provider=provider, retryable=False
    )


async def _drain(response: aiohttp.ClientResponse, timeout_s: float = 1.0) -> None:
    """Read the end of the body after [DONE], so the connection goes back to the pool.

    Bounded in time and size: a server that keeps the body open, or sends more, only costs the
    connection (aiohttp closes one whose body was not read to the end), never the answer."""
    try:
        read = 0
        while read <= DRAIN_BYTES:
            chunk = await asyncio.wait_for(response.content.readany(), timeout_s)
            if not chunk:
                return
            read += len(chunk)
    except (TimeoutError, aiohttp.ClientError):
        pass


def _decode_chunk(data: str, provider: str) -> dict:
    try:
        chunk = json.loads(data)
    except ValueError:
        raise ProviderError(f"malformed stream chunk: {data[:80]!r}", provider=provider, retryable=True) from None
    if not isinstance(chunk, dict):
        raise ProviderError(f"malformed stream chunk: {data[:80]!r}", provider=provider, retryable=True)
    return chunk


def _chunk_text(chunk: dict, provider: str) -> str:
    """The text of one stream chunk (a chunk without choices, e.g. the usage, has none)."""
    choices = chunk.get("choices") or []
    if not isinstance(choices, list):
        raise ProviderError("malformed stream chunk: choices is not a list", provider=provider, retryable=True)
    parts = []
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        content = delta.get("content") if isinstance(delta, dict) else None
        if not isinstance(delta, dict | None) or not isinstance(content, str | None):
            raise ProviderError(f"malformed stream chunk: {json.dumps(choice)[:80]}", provider=provider, retryable=True)
        if content:
            parts.append(content)
    return "".join(parts)


def _completion_text(payload: dict, provider: str) -> str:
    """The answer of a chat completion sent whole; anything else in a 200 is a failed call."""
    choices = payload.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise ProviderError(
            f"the reply is no chat completion: {json.dumps(payload)[:80]}", provider=provider, retryable=True
        )
    content = message.get("content")
    if content is None:
        content = message.get("refusal")  # a model that declines says why here
    if not isinstance(content, str):
        raise ProviderError(
            "the reply is no chat completion: its message holds no text", provider=provider, retryable=True
        )
    return content


def _usage_from(raw: object, provider: str) -> Usage | None:
    """The usage a provider sent, or None (estimated, and marked so, as when it sends none) when
    a count is negative, not a whole number, or more than one call could use: a provider's word
    must never credit a budget or run up a total."""
    if not isinstance(raw, dict):
        raise ProviderError("malformed usage in stream", provider=provider, retryable=True)
    prompt = token_count(raw.get("prompt_tokens") or 0)
    completion = token_count(raw.get("completion_tokens") or 0)
    if prompt is None or completion is None:
        return None
    return Usage(prompt, completion)


def _parse_full_reply(text: str, provider: str) -> tuple[str, Usage | None]:
    try:
        payload = json.loads(text)
    except ValueError:
        raise ProviderError(
            f"reply is neither an event stream nor JSON: {text[:80]!r}", provider=provider, retryable=True
        ) from None
    if not isinstance(payload, dict):
        raise ProviderError("reply is not a JSON object", provider=provider, retryable=True)
    answer = _completion_text(payload, provider)
    usage = _usage_from(payload["usage"], provider) if payload.get("usage") else None
    return answer, usage


def _error_message(payload: object) -> str:
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
        if payload.get("message"):
            return str(payload["message"])[:500]
    return ""


def _status_error(status: int, reason: str, text: str, retry_after: str | None, provider: str) -> ProviderError:
    try:
        message = _error_message(json.loads(text))
    except ValueError:
        message = ""
    if not message:
        message = text.strip()[:300] or reason
    if status in (401, 403):
        message = f"authentication failed ({message}); check the provider's API key"
    elif status == 404:
        message = f"not found ({message}); check the base_url and the model name"
    return ProviderError(
        message,
        status=status,
        provider=provider,
        retryable=status in RETRYABLE_STATUS,
        retry_after=_retry_after(retry_after),
    )


# A piece of an answer longer than this is masked in a worker thread: the mask costs a few
# microseconds a character where many may begin a key's form, and a provider may send a whole
# answer (up to `max_answer_kb`) in one piece; in the event loop that would hold up every other
# run and, under `stiva serve`, every other client.
OFF_LOOP_CHARS = 16_384


async def _masked(answer: AnswerMask, piece: str) -> str:
    if len(piece) > OFF_LOOP_CHARS:
        return await asyncio.to_thread(answer.feed, piece)
    return answer.feed(piece)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class PoolWorker:
    """Routes each call to the HTTP client or, for `kind="embedded"`, the embedded model: in this
    process, or `embedded`, a worker that runs it elsewhere (runtime/model_process.py)."""

    def __init__(self, http: HttpWorker | None = None, embedded: Any = None):
        self.http = http or HttpWorker()
        self._embedded = embedded

    def know_secrets(self, models: Iterable[PoolModel]) -> None:
        """Remember the keys and header values of `models`, to mask them in every error text."""
        self.http.secrets = {value for m in models for value in (m.api_key, *(v for _, v in m.headers)) if value}

    def _route(self, model: PoolModel):
        """The worker that serves `model`."""
        if model.kind == "embedded":
            if self._embedded is None:
                from .embedded import EmbeddedWorker  # its model (torch) loads only when first used

                self._embedded = EmbeddedWorker()
            return self._embedded
        return self.http

    def prepare(self, model: PoolModel, step: StepInput) -> WorkerPrompt | None:
        """The prompt of the worker that serves `model`, where it builds its own."""
        return self._route(model).prepare(model, step)

    def stream_chat(
        self,
        model: PoolModel,
        messages: Sequence[dict],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatEvent]:
        worker = self._route(model)
        if extra_body and worker is self.http:  # the embedded model has no request body
            return self.http.stream_chat(
                model, messages, max_tokens=max_tokens, temperature=temperature, stop=stop, extra_body=extra_body
            )
        return worker.stream_chat(model, messages, max_tokens=max_tokens, temperature=temperature, stop=stop)

    async def aclose(self) -> None:
        await self.http.aclose()
