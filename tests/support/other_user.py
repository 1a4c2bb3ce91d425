"""A real local model server that listens as another uid: a child process forked from the test
(which runs as root), that setuid()s to `uid`, binds 127.0.0.1:`port` and answers the model list
of the OpenAI wire (`/v1/models`) and Ollama's (`/api/tags`). What a client asked it comes back as
`server.requests` ("GET /v1/models", "POST /v1/chat/completions") once it is stopped.

The child runs nothing but the socket calls below: after a fork only the forking thread exists, so
it takes no lock another thread may hold (no logging, no imports, no threads), and it never
returns into the test: it ends with os._exit. It imports nothing after the fork either, since the
interpreter's files may not be readable by `uid`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from dataclasses import dataclass, field

import pytest

LOGIN_UID = 1500  # a login user's (UID_MIN is 1000 by default)
SYSTEM_UID = 999  # a system account's, as Ollama's installer makes


def needs_root() -> None:
    if not hasattr(os, "fork") or os.geteuid() != 0:
        pytest.skip("serving as another uid needs root")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _response(status: str, payload: object) -> bytes:
    body = json.dumps(payload).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


@dataclass
class ServerAs:
    uid: int
    port: int
    models: tuple[str, ...] = ("llama3.2:latest",)
    pid: int = 0
    requests: list[str] = field(default_factory=list)
    _log: int = -1

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ServerAs":
        replies = {
            "/v1/models": _response("200 OK", {"object": "list", "data": [{"id": m} for m in self.models]}),
            "/api/tags": _response("200 OK", {"models": [{"name": m} for m in self.models]}),
        }
        missing = _response("404 Not Found", {"error": "not found"})
        ready_r, ready_w = os.pipe()
        log_r, log_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: serve as `uid` until killed
            status = 1
            try:
                os.close(ready_r)
                os.close(log_r)
                if self.uid != os.getuid():
                    os.setgroups([])
                    os.setgid(self.uid)
                    os.setuid(self.uid)
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(("127.0.0.1", self.port))
                listener.listen(16)
                os.write(ready_w, b"1")
                while True:
                    conn, _ = listener.accept()
                    data = b""
                    while b"\r\n\r\n" not in data and len(data) < 65536:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    words = data.split(b"\r\n", 1)[0].split()
                    method, path = (words[0], words[1]) if len(words) >= 2 else (b"?", b"?")
                    os.write(log_w, method + b" " + path + b"\n")
                    conn.sendall(replies.get(path.decode("latin-1"), missing) if method == b"GET" else missing)
                    conn.close()
            except BaseException:  # noqa: BLE001 - the child says nothing; the parent sees no "ready"
                status = 1
            finally:
                os._exit(status)
        os.close(ready_w)
        os.close(log_w)
        self.pid, self._log = pid, log_r
        ready = os.read(ready_r, 1)
        os.close(ready_r)
        if ready != b"1":
            self.stop()
            raise RuntimeError(f"the server as uid {self.uid} did not start on port {self.port}")
        return self

    def stop(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = 0
        if self._log >= 0:
            text = b""
            while chunk := os.read(self._log, 65536):
                text += chunk
            os.close(self._log)
            self._log = -1
            self.requests = text.decode("latin-1").splitlines()

    def __enter__(self) -> "ServerAs":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
