"""The app starts the model process beside its first paint (issue 58, part 5): where the embedded
model will most likely plan, the child is started, and loading, while the runtime is still being
built, and the runtime then uses that same process. Where another model would plan (a key for a
hosted one, a configured pool, a remote conductor), no model process is started early."""

from __future__ import annotations

import pytest

from stiva_tui import keys
from stiva_tui.config import Config, parse_config
from stiva_tui.tui.app import own_model_plans
from tests.conftest_model import model_cache  # noqa: F401  (session fixture: the converted model)
from tests.support import procs
from tests.support.tui import hold_back_runtime_start, wait_for


def test_the_embedded_model_is_preloaded_only_where_it_will_most_likely_plan(stiva_home, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    fresh = Config()  # a fresh clone: no config file, no key
    assert own_model_plans(fresh, None)
    assert own_model_plans(fresh, "embedded")
    assert not own_model_plans(fresh, "remote:gpt-5")
    assert not own_model_plans(parse_config({"conductor": {"backend": "remote", "model": "x"}}), None)
    assert own_model_plans(parse_config({"conductor": {"backend": "embedded"}}), None)
    pool = parse_config(
        {
            "providers": [{"name": "lab", "base_url": "http://127.0.0.1:9/v1"}],
            "models": [{"id": "m", "provider": "lab", "model": "m"}],
        }
    )
    assert not own_model_plans(pool, None)  # a model of the config's own may plan
    assert own_model_plans(fresh, "nonsense") is False  # a bad override: the runtime says why, not this guess
    # a key for a hosted provider (the real file keyring): a hosted model will plan
    keys.set_key("openai", "sk-test-0123456789abcdef0123")
    assert not own_model_plans(fresh, None)
    keys.delete_key("openai")
    assert own_model_plans(fresh, None)
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test-0123456789")
    assert not own_model_plans(fresh, None)


@pytest.mark.slow
async def test_the_model_process_loads_while_the_runtime_is_built(model_cache, stiva_home, monkeypatch):  # noqa: F811
    """The real app on the default config (offline, the embedded model): its runtime's start held
    back, the model process is there and has torch loaded before the runtime exists; the runtime
    then runs on that process, and the first question is answered by it."""
    from stiva_tui.tui.app import StivaApp

    monkeypatch.delenv("STIVA_NO_WARM", raising=False)
    monkeypatch.setenv("STIVA_NO_WARM", "1")  # no warm worker: the app's own child
    gate = hold_back_runtime_start(monkeypatch)
    config = parse_config({"discovery": {"enabled": False}, "catalog": False})
    app = StivaApp(config)
    async with app.run_test(size=(120, 40)) as pilot:
        started = app._early_child
        await wait_for(pilot, lambda: started.done() and started.result() is not None, timeout=30, what="the child")
        child = started.result()[0].pid
        await wait_for(pilot, lambda: procs.maps_torch(child), timeout=120, what="torch loading in the child")
        assert app.runtime is None  # loading while the runtime was not there yet
        gate.set()
        await wait_for(pilot, lambda: app.runtime is not None, timeout=60, what="the runtime")
        assert app.runtime.model_process is app.early_models
        # the conductor loads in that same child: no second one is started
        bar = app.chat_screen.status_bar
        await wait_for(pilot, lambda: bar.conductor is not None, timeout=180, what="the conductor loaded")
        assert app.early_models.pid == child and app.early_models.generation == 1
