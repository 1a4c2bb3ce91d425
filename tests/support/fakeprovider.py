"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions wire format.

Tests (and benchmarks) script it per model: replies, latency, usage, and faults (429 with
Retry-After, 500, a stream cut off mid-way, malformed chunks, a hung connection). It records every
request so a test can check exactly what each worker was shown.

    with FakeProvider() as fake:
        fake.script("m1", Reply("hello world", latency_s=1.0, usage=(10, 2)))
        ... base_url = fake.base_url ...
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    text: str = "ok"
    latency_s: float = 0.0  # before the response starts
    chunk_delay_s: float = 0.0  # between chunks
    # (prompt_tokens, completion_tokens); "auto" counts words; None sends no usage at all.
    usage: tuple[int, int] | str | None = "auto"
    status: int = 200
    retry_after: str | None = None
    error_message: str = "scripted failure"
    # None | "cut" (stream stops mid-way) | "malformed" (a non-JSON chunk) | "hang" (never answers)
    # | "json" (ignore stream=True, answer with one JSON object)
    # | "keepalive" (a stream of SSE comments every 0.1 s, and never an answer)
    fault: str | None = None
    chunks: list[str] | None = None  # explicit pieces; default: split after each space
    body: object = None  # send exactly this JSON as a 200 reply (any shape: malformed-reply tests)
    # request fields this server does not take: a request with one gets a 400 naming it, as
    # OpenAI-compatible servers answer an unknown structured-output field
    refuse: tuple[str, ...] = ()
    # stop where the request's `stop` sequences first appear, as a real server does (the stop
    # itself not sent); False: stream every piece whatever the request asks
    honor_stop: bool = False

    def pieces(self) -> list[str]:
        if self.chunks is not None:
            return self.chunks
        words = self.text.split(" ")
        return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if self.text else []

    def usage_numbers(self, body: dict) -> tuple[int, int] | None:
        if self.usage is None:
            return None
        if self.usage == "auto":
            prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
            return prompt, len(self.text.split())
        return tuple(self.usage)  # type: ignore[return-value]


@dataclass
class Request:
    model: str
    messages: list[dict]
    body: dict
    headers: dict
    path: str
    at: float = field(default_factory=time.monotonic)
    sent: int = 0  # the streamed text chunks written so far (a client that stops reading sees fewer)

    @property
    def user_text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages if m.get("role") == "user")


class FakeProvider:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None):
        self.api_key = api_key
        self.requests: list[Request] = []
        self._scripts: dict[str, list[Reply]] = {}
        self._defaults: dict[str, Reply | Callable[[Request], Reply]] = {}
        self._last: dict[str, Reply] = {}
        self._lock = threading.Lock()
        self.active = 0  # requests being answered right now
        self.disconnects = 0  # clients that went away before the answer ended
        self.connections = 0  # TCP connections accepted (keep-alive reuses them)
        self.models_listed: list[str] | None = None
        self._server = _Server((host, port), _make_handler(self))
        self._server.daemon_threads = True
        # A client that hangs up mid-stream is a scripted case, not a server error to print.
        self._server.handle_error = lambda request, address: None
        self._thread: threading.Thread | None = None

    # --- scripting ---------------------------------------------------------------------------

    def script(self, model: str, *replies: Reply) -> "FakeProvider":
        """Queue replies for `model`; once used up, the last one keeps answering (unless a
        default is set for the model)."""
        with self._lock:
            self._scripts.setdefault(model, []).extend(replies)
        return self

    def default(self, model: str, reply: Reply | Callable[[Request], Reply]) -> "FakeProvider":
        """The reply for `model` when nothing is queued (a Reply or a function of the request)."""
        self._defaults[model] = reply
        return self

    def requests_for(self, model: str) -> list[Request]:
        return [r for r in self.requests if r.model == model]

    def _next_reply(self, request: Request) -> Reply:
        with self._lock:
            queue = self._scripts.get(request.model)
            if queue:
                reply = queue.pop(0)
                self._last[request.model] = reply
                return reply
            if request.model in self._last and request.model not in self._defaults:
                return self._last[request.model]
        fallback = self._defaults.get(request.model) or self._defaults.get("*")
        if callable(fallback):
            return fallback(request)
        if fallback is not None:
            return fallback
        return Reply(text=f"answer from {request.model}")

    # --- life cycle ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "FakeProvider":
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeProvider":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being answered; True if that happened in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.active == 0:
                return True
            time.sleep(0.02)
        return self.active == 0


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 makes a burst of parallel connects wait a second for a SYN retry.
    request_queue_size = 256


def _client_gone(sock: socket.socket) -> bool:
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
    return False


def _make_handler(fake: FakeProvider):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # small SSE writes must not wait for delayed ACKs

        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def setup(self) -> None:
            super().setup()
            with fake._lock:
                fake.connections += 1

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                models = fake.models_listed
                if models is None:
                    models = sorted(set(fake._scripts) | set(fake._defaults) - {"*"})
                self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "bad json"}})
                return
            if fake.api_key and self.headers.get("authorization") != f"Bearer {fake.api_key}":
                self._json(401, {"error": {"message": "invalid api key"}})
                return
            request = Request(
                model=str(body.get("model")),
                messages=list(body.get("messages") or []),
                body=body,
                headers={k.lower(): v for k, v in self.headers.items()},
                path=self.path,
            )
            with fake._lock:
                fake.requests.append(request)
                fake.active += 1
            try:
                self._answer(request, fake._next_reply(request))
            except (BrokenPipeError, ConnectionResetError):
                fake.disconnects += 1
            finally:
                with fake._lock:
                    fake.active -= 1

        def _sleep(self, seconds: float) -> bool:
            """Sleep, watching the client; False if it went away."""
            deadline = time.monotonic() + seconds
            while True:
                if _client_gone(self.connection):
                    fake.disconnects += 1
                    self.close_connection = True
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return True
                time.sleep(min(0.02, left))

        def _answer(self, request: Request, reply: Reply) -> None:
            if reply.latency_s and not self._sleep(reply.latency_s):
                return
            if reply.fault == "hang":
                while self._sleep(0.05):
                    pass
                return
            if reply.fault == "keepalive":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    while self._sleep(0.1):
                        self._chunk(": keep-alive\n\n")
                except OSError:  # the client went away
                    pass
                return
            refused = [name for name in reply.refuse if name in request.body]
            if refused:
                self._json(400, {"error": {"message": f"unknown field: {refused[0]}", "type": "invalid_request"}})
                return
            if reply.status >= 400:
                headers = {"Retry-After": reply.retry_after} if reply.retry_after else {}
                self._json(reply.status, {"error": {"message": reply.error_message, "type": "scripted"}}, headers)
                return
            if reply.body is not None:
                self._json(200, reply.body)
                return
            usage = reply.usage_numbers(request.body)
            if reply.fault == "json" or not request.body.get("stream"):
                payload = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": request.model,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}
                    ],
                }
                if usage:
                    payload["usage"] = {
                        "prompt_tokens": usage[0],
                        "completion_tokens": usage[1],
                        "total_tokens": sum(usage),
                    }
                # With a chunk delay, the body goes out in two writes that far apart, as a long
                # reply over a real network arrives in several reads.
                self._json(200, payload, split_s=reply.chunk_delay_s)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            pieces = reply.pieces()
            if reply.honor_stop and request.body.get("stop"):
                pieces = _until_stop(pieces, request.body["stop"])
            for i, piece in enumerate(pieces):
                if reply.fault == "cut" and i >= max(1, len(pieces) // 2):
                    # Stop mid-way: end the connection without finishing the chunked body.
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if reply.fault == "malformed" and i == max(1, len(pieces) // 2):
                    self._chunk("data: {not json\n\n")
                chunk = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "model": request.model,
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
                self._chunk(f"data: {json.dumps(chunk)}\n\n")
                request.sent += 1
                if reply.chunk_delay_s and i < len(pieces) - 1 and not self._sleep(reply.chunk_delay_s):
                    return
            final = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "model": request.model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
            self._chunk(f"data: {json.dumps(final)}\n\n")
            include_usage = (request.body.get("stream_options") or {}).get("include_usage")
            if usage and include_usage:
                chunk = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "model": request.model,
                    "choices": [],
                    "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
                }
                self._chunk(f"data: {json.dumps(chunk)}\n\n")
            self._chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _chunk(self, text: str) -> None:
            data = text.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _json(self, status: int, payload: object, headers: dict | None = None, split_s: float = 0.0) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            parts = [data[: len(data) // 2], data[len(data) // 2 :]] if split_s else [data]
            for i, part in enumerate(parts):
                if i:
                    time.sleep(split_s)
                self.wfile.write(part)
                self.wfile.flush()

    return Handler


def _until_stop(pieces: list[str], stops: list[str]) -> list[str]:
    """`pieces` up to where the first of `stops` begins in their joined text."""
    text = "".join(pieces)
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    if cut < 0:
        return pieces
    kept, length = [], 0
    for piece in pieces:
        if length + len(piece) >= cut:
            if cut > length:
                kept.append(piece[: cut - length])
            break
        kept.append(piece)
        length += len(piece)
    return kept
