"""`stiva serve`: the engine as an OpenAI-compatible API (FastAPI on uvicorn).

Models: `conductor` (up to 5 steps, 2 rounds), `conductor-mini` (up to 2 steps, 1 round), and every
available pool model by its id, passed straight through (one key reaches all of them).

Choices worth knowing (also in docs/api.md):
- Streaming sends the final answer only: the deltas of a step are streamed live once that step is
  certain to be the last one (see runs.py); earlier steps show up as SSE comment lines
  (`: stiva step 1 started on w1`), which clients ignore but which keep proxies from timing out.
- A streaming request gets a real status code for anything that fails in its first
  `commit_after_s` (1 s): the 200 and the event stream start only once there is text to send or
  that time has passed. A failure after that arrives as an `error` event, as OpenAI's API does.
- `usage` counts every token the request cost: the conductor and every worker call.
- A run stopped by the budget is a 402 (`insufficient_quota`, code `budget_exceeded`): the request
  was valid and could succeed with a bigger budget, so it is not a 400. A provider failure is a
  502 naming the step and the provider's message. A full server is a 429 with Retry-After.
- `max_tokens` / `max_completion_tokens` and `temperature` apply to every worker call; `stop` goes
  upstream with the last step of each round (the answer) and also cuts the text the client
  receives, for providers that ignore it.
- What a provider wrote reaches a client printable and masked: escape sequences, control and
  invisible characters stripped, then the pool's keys and header values masked in every form
  (keys.AnswerMask), in the JSON body, each stream chunk (a key split across chunks is held back
  until it can be told) and each error. Text over OFF_LOOP_CHARS is masked in a worker thread, so
  one request's long answer never holds up the event loop that serves every other client.
- Connections (connections.py): deadlines for a request's head, its body and idle keep-alives
  (a 408 for a request sent too slowly), and for replies a client does not read (a few pipelined
  requests are answered ahead of what it has read, then the rest wait), a cap on open and on idle
  connections that closes stalled ones first, and one log line, not a traceback per connection,
  when file descriptors run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Header, Request, Security
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPBearer

from ..core.events import Event, PlanEstimated, RunCancelled, RunFailed, RunFinished, StepStarted, WorkflowReady
from ..core.terminal import printable
from ..core.words import FailureReason
from ..engine.executor import RunResult
from ..keys import AnswerMask, mask, mask_known
from ..runtime import PRESETS, Ask, AskError, ConductorMode, DirectMode, Fork, Runtime
from .auth import Guard, is_loopback_host, load_or_create_token
from .errors import APIError, install_error_handlers
from .runs import AnswerBroken, AnswerRelay, ChatInput, RunSlots, ServerBusy, StopFilter, read_messages
from .schemas import ChatCompletionRequest, ErrorResponse, ForkRequest, chunk_object, completion_object, usage_object

log = logging.getLogger("stiva.server")

ERRORS = {status: {"model": ErrorResponse} for status in (400, 401, 402, 404, 413, 429, 502, 503)}
POLL_S = 0.2  # how often a waiting request checks whether its client is still there
# Answer text longer than this is made printable and masked in a worker thread, not in the event
# loop: the mask costs about a microsecond a character, and a provider may send 1 MB in one chunk.
OFF_LOOP_CHARS = 16_384


def serve(
    config: Any,
    host: str | None = None,
    port: int | None = None,
    no_auth: bool = False,
    show_token: bool = False,
    *,
    conductor: str | None = None,
) -> int:
    """Run the API until interrupted (blocking). Returns the process exit code: 2 when `no_auth`
    is asked for on a non-loopback host, 1 when the server could not start."""
    host = host or config.serve.host
    port = port or config.serve.port
    token: str | None = None
    if no_auth:
        if not is_loopback_host(host):
            print(
                f"stiva serve: --no-auth is refused on {host}: without a token anyone who can reach "
                "that address could spend your provider credit. Use it only with 127.0.0.1, ::1 or "
                "localhost.",
                file=sys.stderr,
            )
            return 2
        print("stiva serve: authentication is off (--no-auth, loopback only)", file=sys.stderr)
    else:
        served = load_or_create_token()
        if served.created:
            print(f"stiva serve: created the API token (kept in {served.where}):\n  {served.value}")
            if served.where not in ("keyring",) and not served.where.startswith("$"):
                print("  no keyring backend works here, so it was saved to that file (mode 0600)")
        elif show_token:
            print(f"stiva serve: API token (from {served.where}):\n  {served.value}")
        else:
            print(f"stiva serve: API token from {served.where} (`stiva serve --show-token` prints it)")
        token = served.value
        if show_token:
            if served.created:
                print(f"stiva serve: API token (from {served.where}):\n  {served.value}")
            return 0  # --show-token prints the token and exits
    print(f"stiva serve: http://{_url_host(host)}:{port}/v1  (models: GET /v1/models)")
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            return runner.run(_serve(config, host, port, token, conductor))
    except KeyboardInterrupt:
        return 0


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (every Linux and macOS install: a dependency),
    else asyncio's own: less CPU per request (`benchmarks/perf/serve.py --loop`; the figures are in
    docs/measurements.md)."""
    try:
        import uvloop
    except ImportError:  # Windows, where uvloop does not build
        return None
    return uvloop.new_event_loop


async def _serve(config: Any, host: str, port: int, token: str | None, conductor: str | None) -> int:
    from ..runtime import StartupError
    from .connections import guarded_server

    try:
        # the models Stiva loads itself run in a process of their own: their load and their decode
        # loop hold the GIL, which would hold up every other request meanwhile
        runtime = await Runtime.create(config, conductor=conductor, model_process=config.model_process)
    except StartupError as exc:
        print(f"stiva serve: {exc}", file=sys.stderr)
        return 1
    for warning in runtime.warnings:  # a model the config names is unavailable right now
        print(f"stiva serve: warning: config: {warning}", file=sys.stderr)
    try:
        app = create_app(runtime, token)
        server = guarded_server(app, config.serve, host=host, port=port, log_level="info", timeout_graceful_shutdown=5)
        try:
            await server.serve()
        except SystemExit as exc:  # uvicorn exits when it cannot bind the port
            return int(exc.code or 1)
        return 0 if server.started else 1
    finally:
        await runtime.aclose()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


# --- the app --------------------------------------------------------------------------------------


def create_app(
    runtime: Runtime, token: str | None, *, commit_after_s: float = 1.0, keepalive_s: float = 5.0
) -> FastAPI:
    """The ASGI app over `runtime` (not closed by the app). `token=None` turns auth off."""
    server = _Server(runtime, commit_after_s, keepalive_s)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        server.start_conductor()
        yield
        await server.stop()

    app = FastAPI(
        title="Stiva",
        version="0.1.0",
        lifespan=lifespan,
        summary="OpenAI-compatible chat completions, orchestrated by Stiva's conductor",
    )
    install_error_handlers(app)
    app.add_middleware(
        Guard,
        token=token,
        max_body_bytes=runtime.config.serve.max_body_bytes,
        allowed_hosts=tuple(runtime.config.serve.allowed_hosts),
    )
    # Declares the bearer scheme in the OpenAPI document; the check itself is in Guard, so it runs
    # before the body is read (and for unknown routes too).
    bearer = [Security(HTTPBearer(auto_error=False))]

    @app.get("/v1/models", dependencies=bearer, responses=ERRORS)
    async def list_models() -> dict:
        return {"object": "list", "data": server.model_cards()}

    @app.get("/v1/models/{model_id:path}", dependencies=bearer, responses=ERRORS)
    async def get_model(model_id: str) -> dict:
        for card in server.model_cards():
            if card["id"] == model_id:
                return card
        raise _unknown_model(model_id)

    @app.post("/v1/chat/completions", dependencies=bearer, responses=ERRORS, response_model=None)
    async def chat_completions(
        body: ChatCompletionRequest, request: Request, x_stiva_trace: str | None = Header(None)
    ) -> Response:
        """An OpenAI chat completion. Streaming (`stream: true`) sends `chat.completion.chunk`
        events and `data: [DONE]`."""
        trace = body.stiva_trace or (x_stiva_trace or "").strip().lower() in ("1", "true", "yes")
        return await server.complete(request, body, trace)

    @app.post("/v1/runs/{run_id}/fork", dependencies=bearer, responses=ERRORS, response_model=None)
    async def fork_run(run_id: str, body: ForkRequest, request: Request) -> Response:
        """A branch of a finished run: step `step` runs again on `model` (with `subtask` where
        given), and every step that reads it; the others keep their outputs, uncalled and unpaid.
        The reply gives the branch's answer, what it added (`usage`, `stiva_cost_usd`,
        `stiva_latency_s`) and its trace; the branch is kept under the run in the history."""
        return await server.fork(request, run_id, body)

    return app


def _unknown_model(model: str) -> APIError:
    return APIError(
        404, f"the model {model!r} does not exist: see GET /v1/models", param="model", code="model_not_found"
    )


@dataclass
class _Request:
    """One chat request on its way through a run."""

    id: str  # the run id; the completion id is chatcmpl-<id>
    model: str
    chat: ChatInput
    trace: bool
    stream: bool
    include_usage: bool
    stops: list[str]
    created: int

    @property
    def completion_id(self) -> str:
        return f"chatcmpl-{self.id}"


class _Server:
    def __init__(self, runtime: Runtime, commit_after_s: float, keepalive_s: float):
        self.runtime = runtime
        cfg = runtime.config.serve
        self.slots = RunSlots(cfg.max_concurrent_runs, cfg.max_queue)
        self.commit_after_s = commit_after_s
        self.keepalive_s = keepalive_s
        self.conductor_task: asyncio.Task | None = None
        self.runs: set[asyncio.Task] = set()

    # --- life cycle ---------------------------------------------------------------------------

    def start_conductor(self) -> None:
        """Choose/load the conductor in the background: pass-through models work meanwhile."""
        self.conductor_task = asyncio.create_task(self.runtime.ensure_conductor(), name="stiva-conductor")
        runtime = self.runtime
        self.conductor_task.add_done_callback(lambda task: _log_conductor(task, runtime))

    async def stop(self) -> None:
        tasks = [t for t in (self.conductor_task, *self.runs) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def conductor(self, request: Request):
        if self.runtime.conductor is not None:
            return self.runtime.conductor
        if self.conductor_task is None:  # an app used without its lifespan
            self.start_conductor()
        assert self.conductor_task is not None
        try:
            if not await _until_done_or_gone(request, asyncio.shield(self.conductor_task)):
                return None
        except Exception as exc:
            raise APIError(
                503,
                f"the conductor is not available: {exc}; pass-through models still work",
                code="conductor_unavailable",
            ) from None
        return self.runtime.conductor

    def secrets(self) -> set[str]:
        """Every key and header value in the pool: masked in all a client is sent."""
        return {v for m in self.runtime.pool for v in (m.api_key, *(value for _, value in m.headers)) if v}

    # --- models -------------------------------------------------------------------------------

    def model_cards(self) -> list[dict]:
        cards = [
            {"id": name, "object": "model", "created": 0, "owned_by": "stiva", "description": preset.description}
            for name, preset in PRESETS.items()
        ]
        for model in self.runtime.models:
            if model.id not in PRESETS:
                cards.append(
                    {
                        "id": model.id,
                        "object": "model",
                        "created": 0,
                        "owned_by": model.provider,
                        "description": model.description,
                    }
                )
        return cards

    # --- a chat completion --------------------------------------------------------------------

    async def complete(self, request: Request, body: ChatCompletionRequest, trace: bool) -> Response:
        _refuse_unsupported(body)
        _refuse_invalid_text(body)
        orchestrated = body.model in PRESETS
        if not orchestrated and body.model not in {m.id for m in self.runtime.models}:
            raise _unknown_model(body.model)
        chat = read_messages(body.messages)
        stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
        req = _Request(
            uuid.uuid4().hex,
            body.model,
            chat,
            trace,
            body.stream,
            bool(body.stream_options and body.stream_options.include_usage),
            stops,
            int(time.time()),
        )
        if orchestrated and await self.conductor(request) is None:
            return _client_gone()
        try:
            admitted = await _until_done_or_gone(request, self.slots.acquire())
        except ServerBusy:
            raise APIError(
                429,
                f"the server is busy: {self.slots.max_running} runs are going and "
                f"{self.slots.max_queue} waiting; try again shortly",
                code="server_busy",
                headers={"Retry-After": "1"},
            ) from None
        if not admitted:
            return _client_gone()
        events: asyncio.Queue[Event | None] = asyncio.Queue()
        ask = Ask(
            chat.question,
            mode=ConductorMode(preset=body.model) if orchestrated else DirectMode(body.model),
            source="api",
            history=chat.history,
            instructions=chat.instructions,
            run_id=req.id,
            options=dict(
                max_tokens=body.max_completion_tokens or body.max_tokens,
                temperature=body.temperature,
                stop=tuple(req.stops) or None,  # the answer's step stops upstream too
                preference=body.stiva_preference,
                # a pool model named in the request gets its messages unchanged
                **({} if orchestrated else {"messages": tuple(chat.messages)}),
            ),
        )
        task = asyncio.create_task(self._run(ask, events.put_nowait if req.stream else None))
        self.runs.add(task)
        task.add_done_callback(self.runs.discard)
        # A done callback, not a `finally`: a task cancelled before it starts never runs its body.
        task.add_done_callback(lambda _: self.slots.release())
        task.add_done_callback(lambda _: events.put_nowait(None))
        if req.stream:
            return await self._stream(request, req, task, events)
        return await self._respond(request, req, task)

    async def fork(self, request: Request, run_id: str, body: ForkRequest) -> Response:
        """A fork (engine/fork.py) through the session service, in one of the server's run slots."""
        fork = Fork(run_id, str(body.step), body.model, subtask=body.subtask, source="api")
        try:
            self.runtime.sessions.fork_plan(fork)  # a wrong run, step or model: a 4xx, nothing run
        except AskError as exc:
            missing = str(exc).startswith("no run")
            raise APIError(
                404 if missing else 400, str(exc), code="run_not_found" if missing else "invalid_fork"
            ) from None
        try:
            admitted = await _until_done_or_gone(request, self.slots.acquire())
        except ServerBusy:
            raise APIError(
                429, "the server is busy; try again shortly", code="server_busy", headers={"Retry-After": "1"}
            ) from None
        if not admitted:
            return _client_gone()
        try:
            task = asyncio.ensure_future(self.runtime.sessions.fork(fork))
            self.runs.add(task)
            task.add_done_callback(self.runs.discard)
            if not await _until_done_or_gone(request, task):
                return _client_gone()  # the branch is kept as cancelled; the run is untouched
        finally:
            self.slots.release()
        outcome = task.result()
        result = outcome.result
        if result.status != "finished":
            raise _run_error(result.failure or "internal", result.error)
        return JSONResponse(
            {
                "object": "stiva.branch",
                "id": result.run_id,
                "run_id": outcome.original,
                "branch": outcome.branch,
                "step": str(body.step),
                "model": body.model,
                "answer": result.answer,
                "usage": usage_object(result.totals),
                "stiva_cost_usd": result.totals.cost_usd,
                "stiva_latency_s": result.totals.latency_s,
                "stiva_trace": self._trace(result.run_id),
            },
            headers={"x-stiva-run-id": result.run_id},
        )

    async def _run(self, ask: Ask, emit: Any) -> RunResult:
        """The run, through the session service: recorded as a conversation of kind "api"."""
        outcome = await self.runtime.sessions.ask(ask, emit=emit)
        for warning in outcome.warnings:
            log.warning("run %s: %s", ask.run_id, warning)
        return outcome.result

    async def _respond(self, request: Request, req: _Request, task: asyncio.Task) -> Response:
        if not await _until_done_or_gone(request, task):
            return _client_gone()
        result: RunResult = task.result()
        secrets = self.secrets()
        if result.status != "finished":
            raise _run_error(result.failure or "internal", mask(result.error or "", secrets))
        # The engine already cut the answer at the request's stop sequences.
        answer = await _off_loop_if_long(mask_known, result.answer, secrets)
        body = completion_object(req.completion_id, req.model, answer, result.totals, req.created)
        if req.trace:
            body["stiva_trace"] = self._trace(req.id)
        return JSONResponse(body, headers={"x-stiva-run-id": req.id})

    async def _stream(self, request: Request, req: _Request, task: asyncio.Task, events: asyncio.Queue) -> Response:
        sse = _SSE(req, task, self._trace, self.secrets())
        # Hold the status line back until there is answer text or the run has ended (so an early
        # failure gets its real status code), or `commit_after_s` has passed.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.commit_after_s
        blocks: list[str] = []
        while not sse.has_content and sse.outcome is None and (left := deadline - loop.time()) > 0:
            try:
                event = await asyncio.wait_for(events.get(), min(left, POLL_S))
            except TimeoutError:
                if await request.is_disconnected():
                    task.cancel()
                    return _client_gone()
                continue
            blocks += await sse.handle(event)
        if isinstance(sse.outcome, APIError) and not sse.has_content:
            raise sse.outcome

        async def body() -> AsyncIterator[str]:
            try:
                yield sse.start()
                for block in blocks:
                    yield block
                while sse.outcome is None:
                    try:
                        event = await asyncio.wait_for(events.get(), self.keepalive_s)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    for block in await sse.handle(event):
                        yield block
            finally:
                # The client went away (Starlette cancels this generator) or the run ended.
                if not task.done():
                    task.cancel()

        return StreamingResponse(
            body(),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no", "x-stiva-run-id": req.id},
        )

    def _trace(self, run_id: str) -> dict | None:
        store = self.runtime.store
        if store is None:
            return None
        try:
            return store.get_trace(run_id).model_dump(mode="json")
        except Exception as exc:  # the trace is extra; never fail the answer over it
            log.warning("no trace for run %s: %s", run_id, exc)
            return None


class _SSE:
    """Turns one run's events into server-sent events; `outcome` is set once the run has ended
    (True when it finished, an APIError when it failed)."""

    def __init__(self, req: _Request, task: asyncio.Task, trace: Any, secrets: set[str]):
        self.req = req
        self.task = task
        self.trace = trace
        self.secrets = secrets
        self.relay = AnswerRelay()
        self.mask = AnswerMask(secrets)  # printable, then masked; a key across chunks is held back
        self.stop = StopFilter(req.stops)
        self.has_content = False
        self.outcome: bool | APIError | None = None

    def start(self) -> str:
        return self._chunk({"role": "assistant", "content": ""})

    async def handle(self, event: Event | None) -> list[str]:
        if event is None:  # the task ended without a terminal event: it never started, or crashed
            if self.outcome is None:
                exc = None if self.task.cancelled() else self.task.exception()
                log.error("run %s ended unexpectedly: %r", self.req.id, exc)
                return self._fail(APIError(500, "internal server error", code="internal_error"))
            return []
        try:
            text = self.relay.feed(event)
        except AnswerBroken as exc:
            self.task.cancel()
            return self._fail(APIError(502, f"{exc}; the answer is incomplete", code="upstream_error"))
        blocks: list[str] = []
        if isinstance(event, WorkflowReady):
            blocks.append(f": stiva round {event.round}: {len(event.workflow.steps)} step(s)\n\n")
        elif isinstance(event, PlanEstimated):
            # the plan's expected cost before its calls, and what the budget did to it
            note = f"; {event.note}" if event.note else ""
            blocks.append(f": stiva round {event.round}: estimate ${event.cost_usd:.6f}{note}\n\n")
        elif isinstance(event, StepStarted):
            # one line: a discovered model's id is a local server's text, and a line break in it
            # would begin an event of its own
            blocks.append(f": stiva step {event.index + 1} started on {' '.join(printable(event.model).split())}\n\n")
        text = await _off_loop_if_long(self.mask.feed, text) if text else ""
        if isinstance(event, RunFinished):
            text += self.mask.flush()
        text = self.stop.feed(text) if text else ""
        if isinstance(event, RunFinished):
            text += self.stop.flush()
        if text and not self.has_content:
            # A model's first token often starts with a space (" Paris"): the answer does not,
            # as the non-streamed reply's does not.
            text = text.lstrip()
        if text:
            self.has_content = True
            blocks.append(self._chunk({"content": text}))
        if isinstance(event, RunFinished):
            self.outcome = True
            blocks.append(self._chunk({}, "stop"))
            if self.req.include_usage:
                blocks.append(
                    self._data(
                        chunk_object(
                            self.req.completion_id,
                            self.req.model,
                            self.req.created,
                            None,
                            usage=_usage(event),
                            with_usage_field=True,
                        )
                    )
                )
            if self.req.trace:
                chunk = chunk_object(self.req.completion_id, self.req.model, self.req.created, None)
                chunk["stiva_trace"] = self.trace(self.req.id)
                blocks.append(self._data(chunk))
            blocks.append("data: [DONE]\n\n")
        elif isinstance(event, RunFailed):
            blocks += self._fail(_run_error(event.reason, mask(event.error or "", self.secrets)))
        elif isinstance(event, RunCancelled):
            self.outcome = APIError(499, "cancelled", code="cancelled")
        return blocks

    def _fail(self, error: APIError) -> list[str]:
        self.outcome = error
        return [self._data(error.body())]

    def _chunk(self, delta: dict, finish_reason: str | None = None) -> str:
        return self._data(
            chunk_object(
                self.req.completion_id,
                self.req.model,
                self.req.created,
                delta,
                finish_reason,
                with_usage_field=self.req.include_usage,
            )
        )

    @staticmethod
    def _data(payload: dict) -> str:
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


# --- helpers --------------------------------------------------------------------------------------


async def _off_loop_if_long(work: Callable[..., str], text: str, *args: Any) -> str:
    """`work(text, *args)`: in a worker thread when `text` is long, so the event loop keeps
    answering other clients meanwhile (the thread gives the GIL back every few milliseconds)."""
    if len(text) > OFF_LOOP_CHARS:
        return await asyncio.to_thread(work, text, *args)
    return work(text, *args)


def _refuse_unsupported(body: ChatCompletionRequest) -> None:
    for name in ("tools", "functions"):
        if getattr(body, name):
            raise APIError(
                400,
                f"{name} are not supported: Stiva's workers answer in text only",
                param=name,
                code="tools_not_supported",
            )
    for name in ("tool_choice", "function_call"):
        if getattr(body, name) not in (None, "none", "auto"):
            raise APIError(400, f"{name} is not supported", param=name, code="tools_not_supported")
    if body.n is not None and body.n > 1:
        raise APIError(400, "n > 1 is not supported: each request gives one answer", param="n", code="invalid_value")


def _refuse_invalid_text(body: ChatCompletionRequest) -> None:
    """A 400 naming the field for text that is not valid Unicode (a lone surrogate such as
    \\ud800, which JSON can spell): nothing deeper can store or send it."""
    fields: list[tuple[str, object]] = [("model", body.model), ("user", body.user)]
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    fields += [("stop", stop) for stop in stops]
    for i, message in enumerate(body.messages):
        fields.append((f"messages.{i}.name", message.name))
        if isinstance(message.content, str):
            fields.append((f"messages.{i}.content", message.content))
        else:
            fields += [(f"messages.{i}.content.{j}.text", part.text) for j, part in enumerate(message.content or [])]
    for param, value in fields:
        if isinstance(value, str) and not _valid_unicode(value):
            raise APIError(
                400, f"{param} is not valid Unicode text (it holds a lone surrogate)", param=param, code="invalid_value"
            )


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _run_error(reason: FailureReason, error: str) -> APIError:
    """A failed run as an error object: the budget is a 402, anything upstream a 502, a bug a 500."""
    if reason == "budget":
        return APIError(402, f"the run was {error}", code="budget_exceeded")
    if reason == "conductor":
        return APIError(502, error, code="conductor_failed")
    if reason == "internal":
        return APIError(500, error, code="internal_error")
    return APIError(502, error, code="upstream_error")


def _usage(event: RunFinished) -> dict:
    return usage_object(event.totals)


async def _until_done_or_gone(request: Request, awaitable: Any) -> bool:
    """Await `awaitable` while its client is there: True when it is done, False (and cancelled)
    when the client disconnected first. Exceptions of `awaitable` propagate."""
    task = asyncio.ensure_future(awaitable)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=POLL_S)
            if done:
                task.result()
                return True
            if await request.is_disconnected():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return False
    finally:
        if not task.done():
            task.cancel()


def _client_gone() -> Response:
    # Nobody reads this: the client has hung up (499 is nginx's name for that).
    return Response(status_code=499)


def _log_conductor(task: asyncio.Task, runtime: Runtime) -> None:
    if task.cancelled():
        return
    if task.exception() is not None:
        log.error("the conductor could not be loaded: %s", task.exception())
        return
    conductor = task.result()
    log.info("conductor: %s · %s — %s", conductor.backend, conductor.model, runtime.reason_for(conductor))
