"""Discovery of local servers against real HTTP servers on 127.0.0.1 (random ports)."""

from __future__ import annotations

import json
import os
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
    """A real HTTP server answering GET path -> (status, JSON or text body), or a function giving them."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            route = routes.get(self.path, (404, {"error": "not found"}))
            status, body = route() if callable(route) else route
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html" if isinstance(body, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
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
            except (TimeoutError, OSError):
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


VLLM_MODELS = {
    "object": "list",
    "data": [
        {"id": "Qwen/Qwen3-32B", "object": "model", "owned_by": "vllm"},
        {"id": "meta-llama/Llama-3.1-8B-Instruct", "object": "model"},
    ],
}


def test_default_ports():
    assert DEFAULT_PORTS == {"ollama": 11434, "vllm": 8000, "llamacpp": 8080, "lmstudio": 1234}


async def test_finds_openai_style_server(http_server):
    port, seen = http_server({"/v1/models": (200, VLLM_MODELS)})
    start = time.monotonic()
    models = await discover_models(ports={"vllm": port}, timeout_s=2.0)
    assert time.monotonic() - start < 2.0
    assert seen == ["/v1/models"]
    assert [m.id for m in models] == ["vllm/Qwen/Qwen3-32B", "vllm/meta-llama/Llama-3.1-8B-Instruct"]
    first = models[0]
    assert first.provider == "vllm"
    assert first.model == "Qwen/Qwen3-32B"
    assert first.base_url == f"http://127.0.0.1:{port}/v1"
    assert (first.price_in, first.price_out) == (0.0, 0.0)
    assert first.source == "discovered" and first.kind == "openai"
    assert first.available and first.api_key is None
    assert "vLLM" in first.description


async def test_ollama_falls_back_to_api_tags(http_server):
    port, seen = http_server(
        {
            "/api/tags": (
                200,
                {
                    "models": [
                        {"name": "llama3.2:latest", "model": "llama3.2:latest"},
                        {"name": "qwen2.5:7b", "model": "qwen2.5:7b"},
                    ]
                },
            )
        }
    )
    servers = await discover_servers(ports={"ollama": port}, timeout_s=2.0)
    assert seen == ["/v1/models", "/api/tags"]
    assert len(servers) == 1
    assert servers[0].base_url == f"http://127.0.0.1:{port}/v1"
    models = servers[0].pool_models()
    assert [(m.id, m.model) for m in models] == [
        ("ollama/llama3.2", "llama3.2:latest"),
        ("ollama/qwen2.5:7b", "qwen2.5:7b"),
    ]


async def test_ollama_openai_endpoint_preferred(http_server):
    port, seen = http_server({"/v1/models": (200, {"data": [{"id": "llama3.2:latest"}]})})
    models = await discover_models(ports={"ollama": port}, timeout_s=2.0)
    assert seen == ["/v1/models"]
    assert [m.id for m in models] == ["ollama/llama3.2"]


async def test_nothing_listening_is_quick():
    port = _closed_port()
    start = time.monotonic()
    result = await discover_servers(ports={"vllm": port, "llamacpp": _closed_port()}, timeout_s=30.0)
    elapsed = time.monotonic() - start
    assert result == []
    # a refused connection ends the probe at once: it never waits out the (long) timeout
    assert elapsed < 30.0 / 4, f"refused connections took {elapsed:.2f}s"


async def test_hanging_server_is_bounded(hanging_port):
    start = time.monotonic()
    result = await discover_servers(ports={"lmstudio": hanging_port}, timeout_s=0.3)
    elapsed = time.monotonic() - start
    assert result == []
    # it waited for the timeout, and gave up (the server never answers): a generous upper bound
    assert 0.25 < elapsed < 0.3 * 20, f"took {elapsed:.2f}s"


async def test_probes_run_concurrently(http_server, hanging_port):
    good, _ = http_server({"/v1/models": (200, {"data": [{"id": "model-a"}]})})
    servers = await discover_servers(
        ports={"vllm": hanging_port, "ollama": hanging_port, "lmstudio": good}, timeout_s=0.5
    )
    assert [s.name for s in servers] == ["lmstudio"]  # the hanging ones hold nothing up
    assert servers[0].models == ("model-a",)
    # Three servers that each answer only once all three have been asked: probes made one at a
    # time never meet (the first is refused). Event order, not a clock.
    all_asked = threading.Barrier(3)

    def meet():
        try:
            all_asked.wait(timeout=5.0)
        except threading.BrokenBarrierError:
            return 503, {"error": "asked alone"}
        return 200, {"data": [{"id": "model-a"}]}

    ports = {name: http_server({"/v1/models": meet})[0] for name in ("vllm", "llamacpp", "lmstudio")}
    servers = await discover_servers(ports=ports, timeout_s=10.0)
    assert sorted(s.name for s in servers) == ["llamacpp", "lmstudio", "vllm"], "probes were not concurrent"


async def test_unrelated_server_is_ignored(http_server):
    port, _ = http_server({"/v1/models": (200, "<html>hello</html>")})
    port2, _ = http_server({"/v1/models": (200, {"status": "ok"})})
    port3, _ = http_server({})  # 404 everywhere
    servers = await discover_servers(ports={"vllm": port, "llamacpp": port2, "ollama": port3}, timeout_s=2.0)
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


@pytest.mark.parametrize(
    "name, short",
    [
        ("llama3.2:latest", "llama3.2"),
        ("qwen2.5:7b", "qwen2.5:7b"),
        ("/models/qwen-7b.Q4_K_M.gguf", "qwen-7b.Q4_K_M"),
        ("Qwen/Qwen3-32B", "Qwen/Qwen3-32B"),
        ("gemma.gguf", "gemma"),
    ],
)
def test_short_model_name(name, short):
    assert short_model_name(name) == short


# --- what a local server may name a model (issue 40: nothing it sends reaches the terminal raw) ---

HOSTILE_IDS = [
    "evil\x1b]2;pwned\x07",  # OSC 2: retitles the terminal
    "clip\x1b]52;c;ZWNobyBwd25lZA==\x07",  # OSC 52: fills the clipboard
    "\x1b[2Jcleared",  # CSI
    "\u202eevil-bidi",  # a right-to-left override
    "csi8\x9b2J",  # 8-bit CSI
    "tab\tname",
    "new\nline",
    "zero\u200bwidth",
    "x" * 201,  # longer than any model name
]
FINE_IDS = ["good-model", "Qwen/Qwen3-8B", "with spaces ünïcödé 日本", "y" * 200]


async def test_model_ids_that_are_not_printable_or_too_long_are_skipped(http_server, caplog):
    import logging

    from stiva_tui.pool.discovery import MAX_MODEL_ID_CHARS

    assert MAX_MODEL_ID_CHARS == 200
    listed = [FINE_IDS[0], *HOSTILE_IDS[:4], *FINE_IDS[1:], *HOSTILE_IDS[4:]]
    port, _ = http_server({"/v1/models": (200, {"data": [{"id": name} for name in listed]})})
    with caplog.at_level(logging.WARNING, logger="stiva_tui.pool.discovery"):
        servers = await discover_servers(ports={"vllm": port}, timeout_s=2.0)
    assert len(servers) == 1
    assert servers[0].models == tuple(FINE_IDS)  # the rest of the server's list is kept
    models = servers[0].pool_models()
    assert [m.model for m in models] == FINE_IDS
    assert all(m.id.isprintable() and m.model.isprintable() for m in models)
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == len(HOSTILE_IDS)
    assert all(f"127.0.0.1:{port}" in line for line in skipped)
    # The log line names the id without its control characters acting on anything.
    assert all(line.isprintable() for line in skipped)
    assert any("\\x1b]2;pwned\\x07" in line for line in skipped)


async def test_ollama_tags_with_hostile_names_are_skipped(http_server):
    port, _ = http_server(
        {"/api/tags": (200, {"models": [{"name": "llama3.2:latest"}, {"name": "bad\x1b]52;c;QQ==\x07:latest"}]})}
    )
    models = await discover_models(ports={"ollama": port}, timeout_s=2.0)
    assert [m.id for m in models] == ["ollama/llama3.2"]


async def test_a_server_listing_too_many_models_gives_a_bounded_list(http_server, caplog):
    import logging

    from stiva_tui.pool.discovery import MAX_MODELS_PER_SERVER

    port, _ = http_server({"/v1/models": (200, {"data": [{"id": f"m{i}"} for i in range(5000)]})})
    with caplog.at_level(logging.WARNING, logger="stiva_tui.pool.discovery"):
        servers = await discover_servers(ports={"vllm": port}, timeout_s=5.0)
    assert len(servers[0].models) == MAX_MODELS_PER_SERVER
    assert servers[0].models[0] == "m0"
    assert any("5000 models" in r.getMessage() for r in caplog.records)


async def test_a_huge_reply_is_not_read_whole(http_server):
    from stiva_tui.pool.discovery import MAX_LIST_BYTES

    padding = "x" * (MAX_LIST_BYTES + 10)
    port, _ = http_server({"/v1/models": (200, {"data": [{"id": "m"}], "pad": padding})})
    assert await discover_servers(ports={"vllm": port}, timeout_s=5.0) == []


async def test_discovered_models_are_shown_as_discovered_in_the_listing(http_server):
    """`stiva models` (the table and --json) names a discovered model as such, with the URL it
    came from, and never carries a hostile id."""
    import io

    from rich.console import Console

    from stiva_tui.config import parse_config
    from stiva_tui.pool.listing import models_json, models_table
    from stiva_tui.pool.registry import build_pool

    port, _ = http_server({"/v1/models": (200, {"data": [{"id": "local-7b"}, {"id": HOSTILE_IDS[1]}]})})
    pool = await build_pool(
        parse_config({"discovery": {"timeout_s": 2.0}, "catalog": False}), discovery_ports={"vllm": port}
    )
    url = f"http://127.0.0.1:{port}/v1"
    rows = {row["id"]: row for row in models_json(pool, None)["models"]}
    assert rows["vllm/local-7b"]["source"] == "discovered" and url in rows["vllm/local-7b"]["reason"]
    assert not any("clip" in model_id for model_id in rows)
    out = io.StringIO()
    Console(file=out, width=220, color_system=None).print(models_table(pool, None))
    table = out.getvalue()
    assert "vllm/local-7b" in table and "(discovered)" in table and url in table
    assert "\x1b" not in table and "\x07" not in table


# --- whose server it is (issue 50, item 4): a port says nothing of who holds it ---


async def test_a_server_of_another_login_user_is_left_out_and_own_and_system_ones_are_kept():
    """Three real servers, each in a process of its own uid: another login user's (1500) on the
    Ollama port is left out and asked nothing but its model list; root's own and a system
    account's (999, as Ollama's installer makes) join the pool as today."""
    from stiva_tui.pool.discovery import discover
    from tests.support.other_user import LOGIN_UID, SYSTEM_UID, ServerAs, free_port, needs_root

    needs_root()
    with (
        ServerAs(LOGIN_UID, free_port(), ("secret-listener",)) as stranger,
        ServerAs(SYSTEM_UID, free_port(), ("system-model",)) as system,
        ServerAs(os.getuid(), free_port(), ("own-model",)) as own,
    ):
        found = await discover(
            ports={"ollama": stranger.port, "vllm": system.port, "lmstudio": own.port}, timeout_s=5.0
        )
        servers = await discover_servers(ports={"ollama": stranger.port}, timeout_s=5.0)
    assert sorted((s.name, s.models) for s in found.servers) == [
        ("lmstudio", ("own-model",)),
        ("vllm", ("system-model",)),
    ]
    assert [(item.name, item.base_url, item.uid) for item in found.left_out] == [
        ("ollama", stranger.base_url, LOGIN_UID)
    ]
    assert not any(m.model == "secret-listener" for m in found.models())
    assert servers == []  # discover_servers (and discover_models) give only the trusted ones
    line = found.left_out[0].line()
    assert line.startswith(f"left out: Ollama at {stranger.base_url} runs as another user (")
    assert f"uid {LOGIN_UID})" in line and "[[providers]]" in line and "\n" not in line
    assert all(request.startswith("GET ") for request in stranger.requests), stranger.requests
    assert system.requests and own.requests


async def test_where_the_owner_cannot_be_read_a_server_is_trusted_as_before(tmp_path):
    """No /proc/net/tcp (macOS, Windows): the listener's owner is unknown, and the server is
    trusted as before discovery looked (docs/security.md says so)."""
    from stiva_tui.pool.discovery import discover
    from tests.support.other_user import LOGIN_UID, ServerAs, free_port, needs_root

    needs_root()
    with ServerAs(LOGIN_UID, free_port()) as stranger:
        found = await discover(ports={"ollama": stranger.port}, timeout_s=5.0, proc_net=tmp_path / "no-proc")
    assert [s.name for s in found.servers] == ["ollama"] and found.left_out == ()


PROC_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2CAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1500        0 1 1 0 100 0 0 10 0
   1: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 2 1 0 100 0 0 10 0
   2: 0100007F:2CAA 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
   3: 0200007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1501        0 4 1 0 100 0 0 10 0
"""
PROC_TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:04D2 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1502        0 5 1 0 100 0 0 10 0
   1: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1503        0 6 1 0 100 0 0 10 0
"""


def test_listeners_are_read_from_proc_net_tcp_and_tcp6(tmp_path):
    """The kernel's tables as Linux writes them (x86: each 32-bit word little-endian): a listener
    on 127.0.0.1 or on every address (0.0.0.0, ::) is reached by a probe of 127.0.0.1; one on
    127.0.0.2 or ::1 is not, nor a connected socket on the same port."""
    import sys

    from stiva_tui.pool.discovery import listener_uids, listening_sockets

    if sys.byteorder != "little":
        pytest.skip("the rows above are written as a little-endian machine writes them")
    (tmp_path / "tcp").write_text(PROC_TCP)
    (tmp_path / "tcp6").write_text(PROC_TCP6)
    sockets = listening_sockets(tmp_path)
    assert sockets is not None and len(sockets) == 5
    assert listener_uids(sockets, 11434) == {1500}  # 0x2CAA on 127.0.0.1; the connected row is not a listener
    assert listener_uids(sockets, 8000) == {999}  # 0x1F40 on 0.0.0.0
    assert listener_uids(sockets, 1234) == {1502}  # 0x04D2 on ::, which takes IPv4 too
    assert listener_uids(sockets, 8080) == set()  # on 127.0.0.2 and ::1: not where the probe goes
    assert listener_uids(sockets, 9999) == set()
    assert listening_sockets(tmp_path / "none") is None and listener_uids(None, 11434) == set()


def test_the_login_range_starts_at_uid_min_of_login_defs(tmp_path):
    from stiva_tui.pool.discovery import login_uid_min, trusted_owner

    defs = tmp_path / "login.defs"
    defs.write_text("# UID_MIN 5\nUID_MAX 60000\nUID_MIN\t\t 2000\n")
    assert login_uid_min(defs) == 2000
    assert trusted_owner(1999, defs) and not trusted_owner(2000, defs)
    assert login_uid_min(tmp_path / "missing") == 1000  # login.defs' own default
    defs.write_text("UID_MIN lots\n")
    assert login_uid_min(defs) == 1000
    assert trusted_owner(os.getuid(), defs) and trusted_owner(0, defs)
    assert not trusted_owner(65534, tmp_path / "missing")  # nobody is not a system account's uid


def test_stiva_models_says_in_one_line_that_another_users_server_was_left_out(stiva_home, tmp_path):
    """The real `stiva models`, with `[discovery] ports` pointing Ollama at a server of uid 1500:
    its models are not in the pool, and one line says so and how to add it; named under
    [[providers]] on purpose, it is the config's (no line), and its model is available."""
    from tests.support.cli import run_stiva
    from tests.support.other_user import LOGIN_UID, ServerAs, free_port, needs_root

    needs_root()
    env = {**os.environ, "STIVA_HOME": str(stiva_home), "COLUMNS": "400"}
    with ServerAs(LOGIN_UID, free_port(), ("theirs-7b",)) as stranger:
        config = tmp_path / "config.toml"
        discovery = f"[discovery]\ntimeout_s = 5.0\nports = {{ ollama = {stranger.port}, vllm = 0, llamacpp = 0, lmstudio = 0 }}\n"
        config.write_text(f"catalog = false\n{discovery}")
        shown = run_stiva("models", "--config", str(config), env=env)
        listed = run_stiva("models", "--config", str(config), "--json", env=env)

        config.write_text(
            f'catalog = false\n{discovery}\n[[providers]]\nname = "theirs"\nbase_url = "{stranger.base_url}"\n\n'
            f'[[models]]\nid = "theirs-7b"\nprovider = "theirs"\nmodel = "theirs-7b"\n'
        )
        named = run_stiva("models", "--config", str(config), "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if "left out" in line]
    assert lines == [
        f"left out: Ollama at {stranger.base_url} runs as another user (uid {LOGIN_UID}); "
        "to use it, name it under [[providers]] in the config"
    ]
    assert "theirs-7b" not in shown.stdout
    assert listed.returncode == 0, listed.stderr
    listing = json.loads(listed.stdout)
    assert listing["left_out"] == lines and not any("theirs" in m["id"] for m in listing["models"])
    assert named.returncode == 0, named.stderr
    listing = json.loads(named.stdout)
    assert listing["left_out"] == []
    assert next(m for m in listing["models"] if m["id"] == "theirs-7b")["available"]


async def test_discovery_ports_in_the_config_move_where_servers_are_looked_for(http_server):
    from stiva_tui.config import parse_config
    from stiva_tui.pool.registry import build_pool

    port, seen = http_server({"/v1/models": (200, {"data": [{"id": "moved-model"}]})})
    ports = {"ollama": 0, "vllm": port, "llamacpp": 0, "lmstudio": 0}
    pool = await build_pool(parse_config({"discovery": {"timeout_s": 2.0, "ports": ports}, "catalog": False}))
    assert [m.id for m in pool if m.source == "discovered"] == ["vllm/moved-model"] and seen == ["/v1/models"]


@pytest.mark.parametrize(
    "ports, field",
    [
        ({"nginx": 80}, "discovery.ports.nginx"),
        ({"ollama": 70000}, "discovery.ports.ollama"),
        ({"vllm": "8000"}, "discovery.ports.vllm"),
    ],
)
def test_discovery_ports_that_cannot_be_are_config_errors(ports, field):
    from stiva_tui.config import ConfigError, DiscoveryConfig, parse_config

    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_config({"discovery": {"ports": ports}})
    assert set(DiscoveryConfig.model_fields["ports"].annotation.__args__[0].__args__) == set(DEFAULT_PORTS)


def test_the_config_templates_discovery_section_is_the_defaults(tmp_path):
    """The generated config's commented [discovery] lines, uncommented, are valid and change nothing."""
    from stiva_tui.config import Config, load_config
    from stiva_tui.config_template import TEMPLATE

    wanted = ("# [discovery]", "# enabled = ", "# timeout_s = 0.3", "# ports = ")
    text = "\n".join(line[2:] if line.startswith(wanted) else line for line in TEMPLATE.splitlines())
    assert "\n[discovery]\nenabled = true " in text
    path = tmp_path / "config.toml"
    path.write_text(text)
    discovery = load_config(path).discovery
    assert (discovery.enabled, discovery.timeout_s) == (Config().discovery.enabled, Config().discovery.timeout_s)
    assert discovery.ports == DEFAULT_PORTS
