"""Building the pool: order, keys (environment and a real file keyring), discovery, embedded."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stiva_tui import keys
from stiva_tui.catalog import load_catalog
from stiva_tui.config import parse_config
from stiva_tui.inference.embedded import EMBEDDED_DESCRIPTION, EMBEDDED_HF_ID, EMBEDDED_MODEL_ID
from stiva_tui.pool.embedded import embedded_pool_model
from stiva_tui.pool.listing import models_json, models_table
from stiva_tui.pool.registry import Pool, build_pool, build_pool_sync
from stiva_tui.pool.types import PoolModel

OPENAI_KEY = "sk-openai-3b8e1f0c9a7d6e5f"
KEYRING_KEY = "sk-ant-keyring-9c2d7e4a1b0f"
LAB_KEY = "lab-secret-5e6f7a8b9c0d"
ALL_KEYS = (OPENAI_KEY, KEYRING_KEY, LAB_KEY)
EMBEDDED = "local/gemma-3-270m"


def _build(data: dict | None = None, **kwargs) -> Pool:
    kwargs.setdefault("discover", False)
    return build_pool_sync(parse_config(data or {}), **kwargs)


def test_no_keys_only_embedded_available():
    pool = _build()
    catalog_ids = [m.id for m in load_catalog().models()]
    assert [m.id for m in pool] == catalog_ids + [EMBEDDED]
    assert [m.id for m in pool.available()] == [EMBEDDED]
    gpt5 = pool.get("openai/gpt-5")
    assert gpt5.available is False and gpt5.api_key is None and gpt5.source == "catalog"
    assert gpt5.reason == "no key: set $OPENAI_API_KEY or add one with the keys screen"
    assert pool.get("google/gemini-2.5-pro").reason.startswith("no key: set $GEMINI_API_KEY")
    assert gpt5.base_url == "https://api.openai.com/v1"
    assert (gpt5.price_in, gpt5.price_out) == (1.25, 10.0)


def test_the_embedded_model_is_defined_once():
    """One definition (inference/embedded.py): the pool entry and the loaded weights agree."""
    model = embedded_pool_model()
    assert model.id == EMBEDDED == EMBEDDED_MODEL_ID
    assert model.provider == "embedded" and model.model == EMBEDDED_HF_ID
    assert model.description == EMBEDDED_DESCRIPTION
    assert model.kind == "embedded" and model.source == "embedded"
    assert model.price_in == model.price_out == 0
    assert model.available and model.enabled
    assert _build().models[-1] == model


def test_env_key_joins_catalog_provider(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    pool = _build()
    available = [m.id for m in pool.available()]
    assert available == ["openai/gpt-5", "openai/gpt-5-mini", "openai/gpt-4.1", EMBEDDED]
    gpt5 = pool["openai/gpt-5"]
    assert gpt5.api_key == OPENAI_KEY
    assert gpt5.reason == "key from $OPENAI_API_KEY"
    # Keyed catalog models come before keyless ones; the embedded model is last.
    ids = pool.ids()
    assert ids[:3] == available[:3]
    assert ids[-1] == EMBEDDED
    assert len(pool) == len(load_catalog().models()) + 1


def test_keyring_key_joins_catalog_provider():
    keys.set_key("anthropic", KEYRING_KEY)
    pool = _build()
    sonnet = pool["anthropic/claude-sonnet-4"]
    assert sonnet.available and sonnet.api_key == KEYRING_KEY
    assert sonnet.reason == "key from keyring"
    assert sonnet.model == "claude-sonnet-4-20250514"
    assert pool.available()[0].id == "anthropic/claude-sonnet-4"


def test_catalog_off(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    pool = _build({"catalog": False})
    assert [m.id for m in pool] == [EMBEDDED]


CONFIG = {
    "providers": [
        {"name": "mylab", "base_url": "http://127.0.0.1:9/v1"},
        {"name": "gateway", "base_url": "https://gateway.example.test/v1"},
        {"name": "keyed", "base_url": "https://keyed.example.test/v1", "api_key_env": "MYLAB_KEY"},
    ],
    "models": [
        {
            "id": "lab-qwen",
            "provider": "mylab",
            "model": "Qwen/Qwen3-32B",
            "price_in": 0.1,
            "price_out": 0.3,
            "description": "strong at math",
        },
        {"id": "gw", "provider": "gateway", "model": "m1"},
        {"id": "needs-key", "provider": "keyed", "model": "m2"},
        {"id": "off", "provider": "mylab", "model": "m3", "enabled": False},
        {"id": "my-gpt", "provider": "openai", "model": "gpt-5-mini", "description": "mine"},
        {"id": "openai/gpt-5", "provider": "openai", "model": "gpt-5-2025", "price_in": 9},
    ],
}


def test_config_models_first_with_reasons(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    pool = _build(CONFIG)
    ids = pool.ids()
    assert ids[:6] == ["lab-qwen", "gw", "needs-key", "off", "my-gpt", "openai/gpt-5"]
    assert ids.count("openai/gpt-5") == 1  # the config entry replaces the catalog one
    assert ids[6:8] == ["openai/gpt-5-mini", "openai/gpt-4.1"]
    assert ids[-1] == EMBEDDED

    lab = pool["lab-qwen"]
    assert (lab.available, lab.reason, lab.api_key) == (True, "no key needed", None)
    assert lab.base_url == "http://127.0.0.1:9/v1" and lab.source == "config"
    assert (lab.price_in, lab.price_out, lab.description) == (0.1, 0.3, "strong at math")
    gw = pool["gw"]
    assert (gw.available, gw.reason) == (True, "no key configured")
    needs = pool["needs-key"]
    assert needs.available is False
    assert needs.reason == "no key: set $MYLAB_KEY or add one with the keys screen"
    off = pool["off"]
    assert off.enabled is False and off.reason == "disabled in config"
    mine = pool["my-gpt"]
    assert mine.available and mine.api_key == OPENAI_KEY
    assert mine.base_url == "https://api.openai.com/v1" and mine.provider == "openai"
    assert pool["openai/gpt-5"].model == "gpt-5-2025" and pool["openai/gpt-5"].price_in == 9

    available = [m.id for m in pool.available()]
    assert available[:4] == ["lab-qwen", "gw", "my-gpt", "openai/gpt-5"]
    assert "off" not in available and "needs-key" not in available
    assert "off" in pool and pool.get("nope") is None


def test_config_provider_key_from_env_and_keyring(monkeypatch):
    monkeypatch.setenv("MYLAB_KEY", LAB_KEY)
    keys.set_key("mylab", KEYRING_KEY)
    pool = _build(CONFIG)
    assert pool["needs-key"].api_key == LAB_KEY
    assert pool["needs-key"].reason == "key from $MYLAB_KEY"
    # A provider without api_key_env still finds a key stored for it in the keyring.
    assert pool["lab-qwen"].api_key == KEYRING_KEY
    assert pool["lab-qwen"].reason == "key from keyring"


def test_config_provider_overrides_catalog_endpoint(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    pool = _build({"providers": [{"name": "openai", "base_url": "https://proxy.test/v1", "headers": {"X-Team": "a"}}]})
    gpt = pool["openai/gpt-5"]
    assert gpt.base_url == "https://proxy.test/v1"
    assert gpt.api_key == OPENAI_KEY  # still the catalog's variable
    assert gpt.headers == (("X-Team", "a"),)


def test_failing_keyring_still_builds(monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    keys.reset_backend()
    monkeypatch.setenv("GROQ_API_KEY", OPENAI_KEY)
    pool = _build(CONFIG)
    assert pool["groq/llama-3.3-70b"].available
    gpt = pool["openai/gpt-5"]
    assert not gpt.available and "$OPENAI_API_KEY" in gpt.reason
    assert pool["lab-qwen"].reason == "no key needed"
    assert pool.available()[-1].id == EMBEDDED


def test_pool_container():
    a = PoolModel(id="a", provider="p", model="a")
    b = PoolModel(id="b", provider="p", model="b", available=False)
    c = PoolModel(id="c", provider="p", model="c", enabled=False)
    pool = Pool([a, b, c])
    assert len(pool) == 3 and list(pool) == [a, b, c]
    assert pool.available() == [a]
    assert pool.by_id == {"a": a, "b": b, "c": c}
    assert pool.get("b") is b and pool.get("x") is None
    assert [d["id"] for d in pool.public()] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="twice"):
        Pool([a, a])


# --- discovery inside the pool -------------------------------------------------------------------


@pytest.fixture
def fake_vllm():
    body = json.dumps({"data": [{"id": "Qwen/Qwen3-8B"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


async def test_discovered_models_before_embedded(fake_vllm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    config = parse_config({"discovery": {"timeout_s": 2.0}})
    pool = await build_pool(config, discovery_ports={"vllm": fake_vllm})
    available = [m.id for m in pool.available()]
    assert available == ["openai/gpt-5", "openai/gpt-5-mini", "openai/gpt-4.1", "vllm/Qwen/Qwen3-8B", EMBEDDED]
    local = pool["vllm/Qwen/Qwen3-8B"]
    assert local.base_url == f"http://127.0.0.1:{fake_vllm}/v1"
    assert local.source == "discovered" and local.price_in == 0
    assert pool.ids()[-2:] == ["vllm/Qwen/Qwen3-8B", EMBEDDED]


async def test_discovery_off(fake_vllm):
    config = parse_config({"discovery": {"enabled": False, "timeout_s": 2.0}})
    pool = await build_pool(config, discovery_ports={"vllm": fake_vllm})
    assert "vllm/Qwen/Qwen3-8B" not in pool
    pool = await build_pool(config, discover=True, discovery_ports={"vllm": fake_vllm})
    assert "vllm/Qwen/Qwen3-8B" in pool


async def test_configured_server_not_discovered_twice(fake_vllm):
    config = parse_config(
        {
            "discovery": {"timeout_s": 2.0},
            "providers": [{"name": "mylab", "base_url": f"http://localhost:{fake_vllm}/v1"}],
            "models": [{"id": "lab", "provider": "mylab", "model": "Qwen/Qwen3-8B"}],
        }
    )
    pool = await build_pool(config, discovery_ports={"vllm": fake_vllm})
    assert "vllm/Qwen/Qwen3-8B" not in pool
    assert [m.id for m in pool.available()] == ["lab", EMBEDDED]


async def test_sync_wrapper_inside_running_loop():
    pool = build_pool_sync(parse_config({}), discover=False)
    assert pool.ids()[-1] == EMBEDDED


# --- keys never shown ----------------------------------------------------------------------------


def test_no_key_text_in_any_output(monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("MYLAB_KEY", LAB_KEY)
    keys.set_key("anthropic", KEYRING_KEY)
    pool = _build(CONFIG)
    assert pool["openai/gpt-5-mini"].api_key == OPENAI_KEY
    assert pool["anthropic/claude-sonnet-4"].api_key == KEYRING_KEY
    assert pool["needs-key"].api_key == LAB_KEY

    from rich.console import Console

    console = Console(record=True, width=250, color_system=None)
    console.print(models_table(pool, "embedded"))
    table_text = console.export_text()
    outputs = {
        "public": json.dumps(pool.public()),
        "reprs": " ".join(repr(m) for m in pool) + repr(pool),
        "strs": " ".join(str(m) for m in pool),
        "json": json.dumps(models_json(pool, "openai/gpt-5")),
        "table": table_text,
        "logs": caplog.text,
    }
    for name, text in outputs.items():
        for key in ALL_KEYS:
            assert key not in text, f"a key leaked into {name}"
    assert "openai/gpt-5" in table_text and "key from $OPENAI_API_KEY" in table_text


def test_models_json_shape(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    pool = _build(CONFIG)
    data = models_json(pool, "local/gemma-3-270m")
    assert data["conductor"] == "local/gemma-3-270m"
    assert data["total"] == len(pool) and data["available"] == len(pool.available())
    rows = {row["id"]: row for row in data["models"]}
    assert set(rows["lab-qwen"]) == {
        "id",
        "provider",
        "model",
        "available",
        "reason",
        "price_in",
        "price_out",
        "description",
        "source",
        "index",
    }
    assert rows["lab-qwen"]["index"] == 0 and rows["lab-qwen"]["available"] is True
    assert rows["off"]["available"] is False and rows["off"]["index"] is None
    assert rows["anthropic/claude-sonnet-4"]["reason"].startswith("no key: set $ANTHROPIC_API_KEY")
    assert rows[EMBEDDED]["index"] == len(pool.available()) - 1
    assert rows[EMBEDDED]["source"] == "embedded"
    json.dumps(data)  # serialisable


def test_models_table_lists_everything():
    from rich.console import Console

    pool = _build(CONFIG)
    console = Console(record=True, width=250, color_system=None)
    console.print(models_table(pool, None))
    text = console.export_text()
    assert "conductor: none" in text
    assert f"{len(pool.available())} of {len(pool)} models available" in text
    for model in pool:
        assert model.id in text
    assert "disabled in config" in text and "no key needed" in text


# --- a local endpoint the config names ---------------------------------------------------------


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_a_dead_local_endpoint_is_unreachable_and_a_live_one_available(fake_vllm, closed_port):
    """An Ollama / LM Studio URL in the config with nothing listening is not shown as available."""
    config = parse_config(
        {
            "discovery": {"timeout_s": 2.0},
            "catalog": False,
            "providers": [
                {"name": "ollama-here", "base_url": f"http://127.0.0.1:{closed_port}/v1"},
                {"name": "lab", "base_url": f"http://localhost:{fake_vllm}/v1"},
            ],
            "models": [
                {"id": "dead", "provider": "ollama-here", "model": "llama3.2"},
                {"id": "live", "provider": "lab", "model": "Qwen/Qwen3-8B"},
            ],
        }
    )
    pool = await build_pool(config, discovery_ports={})
    dead = pool["dead"]
    assert not dead.available
    assert dead.reason == f"unreachable: connection refused at http://127.0.0.1:{closed_port}/v1"
    assert (pool["live"].available, pool["live"].reason) == (True, "no key needed")
    assert [m.id for m in pool.available()] == ["live", EMBEDDED]
    # discovery off: the config is taken as written, and no local port is touched
    assert (await build_pool(config, discover=False))["dead"].available


async def test_unreachable_connects_once_to_each_endpoint(fake_vllm, closed_port):
    from stiva_tui.pool.discovery import unreachable

    live, dead = f"http://127.0.0.1:{fake_vllm}/v1", f"http://127.0.0.1:{closed_port}/v1"
    assert await unreachable([live, dead, dead], timeout_s=2.0) == {dead: "connection refused"}
    assert await unreachable([], timeout_s=2.0) == {}
