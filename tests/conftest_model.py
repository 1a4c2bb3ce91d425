"""Fixtures for tests that load the real embedded Gemma-3 270M (4-bit nf4, CPU).

The converted checkpoint lives in a stable folder shared by test runs (conversion from GGUF costs
~60 s once): `$STIVA_TEST_MODEL_CACHE`, default `.test-cache/models` in the repository (git ignores
it; CI may keep it between runs), never the user's own `~/.cache`: a test run leaves nothing in
the home folder. The model is loaded once per test session.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


REPOSITORY = Path(__file__).resolve().parent.parent
TEST_CACHE = REPOSITORY / ".test-cache" / "models"  # ignored by git (.gitignore)


def stable_model_cache_dir() -> Path:
    value = os.environ.get("STIVA_TEST_MODEL_CACHE")
    return Path(value).expanduser() if value else TEST_CACHE


@pytest.fixture(scope="session")
def model_cache() -> Path:
    """STIVA_MODEL_CACHE for the whole session (the converted model is reused between runs),
    converted here, once, under a file lock: pytest-xdist's workers (and a `stiva` a test starts)
    would otherwise convert it side by side, one deleting the folder another is loading."""
    import fcntl

    from stiva_tui.inference.embedded import ensure_embedded_checkpoint

    cache = stable_model_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["STIVA_MODEL_CACHE"] = str(cache)
    with open(cache / ".test-convert.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ensure_embedded_checkpoint()
    return cache


@pytest.fixture(scope="session")
def embedded_loaded(model_cache):
    """The embedded model, converted if needed and loaded once (a LoadedModel)."""
    from stiva_tui.inference.embedded import load_embedded

    return load_embedded()


@pytest.fixture(scope="session")
def embedded_tokenizer(embedded_loaded):
    return embedded_loaded.tokenizer


async def cancel_and_expect_idle(task, loaded, what: str = "generation went on after the task was cancelled"):
    """Cancel `task` (which is generating on `loaded`) and check that the model's lock comes free
    within 10 s: generation stopped rather than running on to its token limit."""
    import asyncio
    import time

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    start = time.monotonic()
    acquired = await asyncio.to_thread(loaded.lock.acquire, True, 10)
    assert acquired, what
    loaded.lock.release()
    assert time.monotonic() - start < 10
