"""Discovery of local servers against real HTTP servers on 127.0.0.1 (random ports)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stiva_tui.pool.discovery import (
    DEFAULT_PORTS,
    discover_models,
    discover_servers,
    short_model_name,
)


def _serve(routes: dict[str, tuple[int, object]]):
    """A real HTTP server answering GET path -> (status, JSON or text body)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            status, body = routes.get(self.path, (404, {"error": "not found"}))
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type",
                             "text/html" if isinstance(body, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    return server, seen


@pytest.fixture
def http_server():
    servers = []

    def start(routes):
        server, seen = _serve(routes)
        servers.append(server)
        return server.server_address[1], seen

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def hanging_port():
    """A port that accepts connections and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (socket.timeout, OSError):
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(2)
    for conn in held:
        conn.close()
    listener.close()
    assert held, "the client never connected"


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


VLLM_MODELS = {"object": "list", "data": [
    {"id": "Qwen/Qwen3-32B", "object": "model", "owned_by": "vllm"},
    {"id": "meta-llama/Llama-3.1-8B-Instruct", "object": "model"},
]}


def test_default_ports():
    assert DEFAULT_PORTS == {"ollama": 11434, "vllm": 8000, "llamacpp": 8080, "lmstudio": 1234}


async def test_finds_openai_style_server(http_server):
    port, seen = http_server({"/v1/models": (200, VLLM_MODELS)})
    start = time.monotonic()
    models = await discover_models(ports={"vllm": port}, timeout_s=2.0)
    assert time.monotonic() - start < 2.0
    assert seen == ["/v1/models"]
    assert [m.id for m in models] == [
        "vllm/Qwen/Qwen3-32B", "vllm/meta-llama/Llama-3.1-8B-Instruct"]
    first = models[0]
    assert first.provider == "vllm"
    assert first.model == "Qwen/Qwen3-32B"
    assert first.base_url == f"http://127.0.0.1:{port}/v1"
    assert (first.price_in, first.price_out) == (0.0, 0.0)
    assert first.source == "discovered" and first.kind == "openai"
    assert first.available and first.api_key is None
    assert "vLLM" in first.description


async def test_ollama_falls_back_to_api_tags(http_server):
    port, seen = http_server({"/api/tags": (200, {"models": [
        {"name": "llama3.2:latest", "model": "llama3.2:latest"},
        {"name": "qwen2.5:7b", "model": "qwen2.5:7b"},
    ]})})
    servers = await discover_servers(ports={"ollama": port}, timeout_s=2.0)
    assert seen == ["/v1/models", "/api/tags"]
    assert len(servers) == 1
    assert servers[0].base_url == f"http://127.0.0.1:{port}/v1"
    models = servers[0].pool_models()
    assert [(m.id, m.model) for m in models] == [
        ("ollama/llama3.2", "llama3.2:latest"), ("ollama/qwen2.5:7b", "qwen2.5:7b")]


async def test_ollama_openai_endpoint_preferred(http_server):
    port, seen = http_server({"/v1/models": (200, {"data": [{"id": "llama3.2:latest"}]})})
    models = await discover_models(ports={"ollama": port}, timeout_s=2.0)
    assert seen == ["/v1/models"]
    assert [m.id for m in models] == ["ollama/llama3.2"]


async def test_nothing_listening_is_quick():
    port = _closed_port()
    start = time.monotonic()
    result = await discover_servers(ports={"vllm": port, "llamacpp": _closed_port()},
                                    timeout_s=5.0)
    elapsed = time.monotonic() - start
    assert result == []
    assert elapsed < 1.0, f"refused connections took {elapsed:.2f}s"


async def test_hanging_server_is_bounded(hanging_port):
    start = time.monotonic()
    result = await discover_servers(ports={"lmstudio": hanging_port}, timeout_s=0.3)
    elapsed = time.monotonic() - start
    assert result == []
    assert 0.2 < elapsed < 1.5, f"took {elapsed:.2f}s"


async def test_probes_run_concurrently(http_server, hanging_port):
    good, _ = http_server({"/v1/models": (200, {"data": [{"id": "model-a"}]})})
    start = time.monotonic()
    servers = await discover_servers(
        ports={"vllm": hanging_port, "ollama": hanging_port, "lmstudio": good}, timeout_s=0.5)
    elapsed = time.monotonic() - start
    assert [s.name for s in servers] == ["lmstudio"]
    assert servers[0].models == ("model-a",)
    assert elapsed < 1.4, f"took {elapsed:.2f}s: probes were not concurrent"


async def test_unrelated_server_is_ignored(http_server):
    port, _ = http_server({"/v1/models": (200, "<html>hello</html>")})
    port2, _ = http_server({"/v1/models": (200, {"status": "ok"})})
    port3, _ = http_server({})  # 404 everywhere
    servers = await discover_servers(
        ports={"vllm": port, "llamacpp": port2, "ollama": port3}, timeout_s=2.0)
    assert servers == []


async def test_server_with_no_models(http_server):
    port, _ = http_server({"/v1/models": (200, {"data": []})})
    servers = await discover_servers(ports={"llamacpp": port}, timeout_s=2.0)
    assert len(servers) == 1 and servers[0].models == ()
    assert servers[0].pool_models() == []


async def test_ports_select_and_skip():
    assert await discover_servers(ports={}, timeout_s=0.2) == []
    assert await discover_servers(ports={"vllm": None}, timeout_s=0.2) == []
    with pytest.raises(ValueError, match="unknown local server"):
        await discover_servers(ports={"nginx": 80}, timeout_s=0.2)


@pytest.mark.parametrize("name, short", [
    ("llama3.2:latest", "llama3.2"),
    ("qwen2.5:7b", "qwen2.5:7b"),
    ("/models/qwen-7b.Q4_K_M.gguf", "qwen-7b.Q4_K_M"),
    ("Qwen/Qwen3-32B", "Qwen/Qwen3-32B"),
    ("gemma.gguf", "gemma"),
])
def test_short_model_name(name, short):
    assert short_model_name(name) == short
