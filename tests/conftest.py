"""Shared fixtures: an isolated STIVA_HOME, a file keyring, and scripted local providers."""

from __future__ import annotations

import os

import pytest

from tests.support.fakeprovider import FakeProvider

# No test may reach a hub or the internet.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Under pytest-xdist, each worker's torch (and each `stiva` a test starts) takes its share of the
# cores, not all of them: n workers each spinning n threads on n cores starve one another.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    os.environ.setdefault("MKL_NUM_THREADS", str(_share))

# Markers that put a test in the slow lane whatever else it is marked.
SLOW_MARKERS = ("slow", "model", "tmux")


def pytest_addoption(parser):
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="run the slow lane too (tests marked slow, model or tmux): the whole suite",
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by markers
def pytest_collection_modifyitems(config, items):
    """`model` and `tmux` tests are slow too. Without --runslow and without a `-m` expression of
    one's own, the slow lane is left out: `pytest` runs the fast lane, `pytest --runslow` all of
    it, `pytest -m slow` the slow lane alone."""
    for item in items:
        if any(item.get_closest_marker(name) for name in SLOW_MARKERS[1:]) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    if config.getoption("--runslow") or config.getoption("markexpr"):
        return
    fast = [item for item in items if not item.get_closest_marker("slow")]
    if len(fast) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("slow")])
        config.stash[_LEFT_OUT] = len(items) - len(fast)
        items[:] = fast


_LEFT_OUT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter, config):
    left_out = config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"the slow lane ({left_out} tests) was left out: run everything with --runslow, "
            "or the slow lane alone with -m slow"
        )


@pytest.fixture(autouse=True)
def stiva_home(tmp_path, monkeypatch):
    """Every test gets its own STIVA_HOME and a real file keyring inside it, and no provider key
    from the environment."""
    from stiva_tui import keys
    from stiva_tui.catalog import load_catalog

    home = tmp_path / "stiva-home"
    home.mkdir()
    monkeypatch.setenv("STIVA_HOME", str(home))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg-config"))
    for provider in load_catalog().providers:
        monkeypatch.delenv(provider.api_key_env, raising=False)
    monkeypatch.delenv("MYLAB_KEY", raising=False)
    # no warm `stiva ask` worker outliving a test (tests/test_ask_warm.py turns it back on)
    monkeypatch.setenv("STIVA_NO_WARM", "1")
    keys.reset_backend()  # the keyring backend is chosen again, from this environment
    yield home
    keys.reset_backend()


@pytest.fixture
def fake():
    with FakeProvider() as server:
        yield server


def pool_models(fake: FakeProvider, *names: str, price_in: float = 1.0, price_out: float = 2.0):
    """PoolModels named `names`, served by `fake` under the same names."""
    from stiva_tui.pool.types import PoolModel

    return [
        PoolModel(
            id=n,
            provider="fake",
            model=n,
            base_url=fake.base_url,
            price_in=price_in,
            price_out=price_out,
            description=f"test model {n}",
        )
        for n in names
    ]
