"""The app starts its model early only where the embedded model is what answers: a pool of hosted
models (a key, a local server) starts no model process at all. The offline side, in the real app:
tests/test_tui_tmux.py (the model process is there and loading before any key is pressed)."""

from __future__ import annotations

from stiva_tui.tui.app import StivaApp
from tests.support.fakeprovider import Reply
from tests.support.tui import PLAN_TWO_STEPS, make_test_config, wait_for


async def test_a_pool_of_hosted_models_starts_no_model_process(fake, stiva_home):
    fake.default("cond", Reply(PLAN_TWO_STEPS))
    config = make_test_config(fake, conductor={"backend": "auto"})
    assert config.model_process  # the app's default: models Stiva loads run in a child
    app = StivaApp(config)
    async with app.run_test(size=(140, 42)) as pilot:
        bar = app.chat_screen.status_bar
        await wait_for(pilot, lambda: bar.conductor is not None, timeout=30, what="the conductor chosen")
        await pilot.pause(0.5)  # a warm-up would have been asked for by now
        assert bar.conductor.backend == "remote", bar.conductor
        process = app.runtime.model_process
        assert process is not None, "the app runs no model process at all"
        assert process.generation == 0 and process.pid is None, "a model process started for a hosted pool"


def test_the_status_bar_says_when_the_conductor_is_the_warm_workers_model():
    """The conductor's facts start with where it runs when that is the warm worker's model (first:
    a narrow status bar cuts the line's end)."""
    from stiva_tui.conductor.choose import loaded_facts

    class Conductor:
        def __init__(self, **info):
            self.info = info

        def describe(self):
            return self.info

    facts = {"quantization": "bf16", "device": "cpu", "memory_mb": 511, "load_s": 10.8}
    assert loaded_facts(Conductor(**facts)) == "bf16 on cpu · 511\u00a0MB · loaded in 10.8\u00a0s"
    shared = loaded_facts(Conductor(**facts, warm_worker=True))
    assert shared == "in the warm worker · bf16 on cpu · 511\u00a0MB · loaded in 10.8\u00a0s"
