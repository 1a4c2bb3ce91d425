"""The simulated pool's HTTP server: the OpenAI chat-completions wire format on 127.0.0.1.

    server = SimServer(models, items, seed=0).start()      # a thread of its own; .base_url
    ...
    server.stop()

`GET /v1/models` lists the models; `POST /v1/chat/completions` answers by the rule of `answers`,
streamed as SSE chunks (with the usage chunk when `stream_options.include_usage` is set) or as one
JSON object. Each answer takes the model's latency (times `latency_scale`) and reports usage as
~4 characters a token. FastAPI on uvicorn, the stack `stiva serve` already stands on, so
everything above the HTTP client is the real path: streaming, usage, timeouts, retries.
"""

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterable, Sequence

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations (Request).
from ..evals.suite import SuiteItem
from .answers import Answerer, SimAnswer
from .profiles import SimModel


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


class SimServer:
    def __init__(
        self,
        models: Sequence[SimModel],
        items: Iterable[SuiteItem],
        *,
        seed: int = 0,
        latency_scale: float = 1.0,
        host: str = "127.0.0.1",
        answerer=None,
    ):
        self.models = {m.name: m for m in models}
        # anything with .answer(model, messages) -> SimAnswer: the profiles' rule, or a replay
        self.answerer = answerer if answerer is not None else Answerer(items, seed)
        self.latency_scale = latency_scale
        self.host = host
        self.calls = 0
        self.answers: list[tuple[str, SimAnswer]] = []  # (model, answer) of every call, for tests and figures
        self._server = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        assert self._socket is not None, "not started"
        return self._socket.getsockname()[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def app(self):
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse, StreamingResponse

        app = FastAPI(title="Stiva simulated pool", docs_url=None, redoc_url=None, openapi_url=None)

        @app.get("/v1/models")
        async def list_models():
            return {
                "object": "list",
                "data": [{"id": name, "object": "model", "owned_by": "stiva-sim"} for name in self.models],
            }

        @app.post("/v1/chat/completions")
        async def complete(request: Request):
            try:
                body = await request.json()
            except ValueError:
                return JSONResponse(
                    {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}, 400
                )
            if not isinstance(body, dict):
                return JSONResponse(
                    {"error": {"message": "the body is not a JSON object", "type": "invalid_request_error"}}, 400
                )
            model = self.models.get(str(body.get("model")))
            if model is None:
                return JSONResponse(
                    {"error": {"message": f"unknown model {body.get('model')!r}", "type": "invalid_request_error"}}, 404
                )
            messages = body.get("messages")
            if not isinstance(messages, list):
                return JSONResponse(
                    {"error": {"message": "messages must be a list", "type": "invalid_request_error"}}, 400
                )
            answer = self.answerer.answer(model, [m for m in messages if isinstance(m, dict)])
            self.calls += 1
            self.answers.append((model.name, answer))
            usage = {
                "prompt_tokens": answer.prompt_tokens
                if answer.prompt_tokens is not None
                else sum(_tokens(str(m.get("content", ""))) for m in messages if isinstance(m, dict)),
                "completion_tokens": answer.completion_tokens or _tokens(answer.text),
            }
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            latency = (model.latency_s if answer.latency_s is None else answer.latency_s) * self.latency_scale
            ident = f"chatcmpl-sim-{self.calls}"
            if not body.get("stream"):
                await asyncio.sleep(latency)
                return {
                    "id": ident,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model.name,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": answer.text}, "finish_reason": "stop"}
                    ],
                    "usage": usage,
                }
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._stream(ident, model.name, answer.text, usage, latency, include_usage),
                media_type="text/event-stream",
            )

        return app

    async def _stream(self, ident: str, model: str, text: str, usage: dict, latency: float, include_usage: bool):
        words = text.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        batches = [pieces[i : i + 8] for i in range(0, len(pieces), 8)] or [[""]]
        await asyncio.sleep(latency * 0.3)  # the time to the first token
        for n, batch in enumerate(batches):
            if n:
                await asyncio.sleep(latency * 0.7 / max(1, len(batches) - 1))
            chunk = {
                "id": ident,
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [{"index": 0, "delta": {"content": "".join(batch)}, "finish_reason": None}],
            }
            yield f"data: {json.dumps(chunk)}\n\n"
        final = {
            "id": ident,
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
        yield f"data: {json.dumps(final)}\n\n"
        if include_usage:
            yield f"data: {json.dumps({'id': ident, 'object': 'chat.completion.chunk', 'model': model, 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    def start(self) -> "SimServer":
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((self.host, 0))
        config = uvicorn.Config(
            self.app(), log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=30
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="stiva-sim-pool", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the simulated pool's server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = None

    def __enter__(self) -> "SimServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
