"""Shared fixtures: an isolated STIVA_HOME, a file keyring, and scripted local providers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakeprovider import FakeProvider  # noqa: E402

# No test may reach a hub or the internet.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


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

    return [PoolModel(id=n, provider="fake", model=n, base_url=fake.base_url, price_in=price_in,
                      price_out=price_out, description=f"test model {n}") for n in names]
