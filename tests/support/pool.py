"""Configs of the pools tests run on: the real-HTTP fake provider's (`tests/support/fakeprovider.py`)
and, at the end, a simulated pool's (`sim_pool_config`).

    write_lab_config(tmp_path / "c.toml", fake.base_url, ["cond", ("w1", 1.0, 2.0)])

writes a TOML config whose pool is those models on one provider, "lab", at `base_url`, with the
settings every such test wants: no catalog, no discovery, no retries, `cond` the remote
conductor. A model is its id, `(id, price_in, price_out)`, or a dict of its fields. `sections`
are merged into the defaults, one level deep (`conductor={"fallback_model": "w1"}` keeps the
backend and the model); a section the defaults lack is added (`bench={"judge": "wrong"}`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tomli_w

Model = str | tuple[str, float, float] | Mapping[str, Any]


def lab_config(base_url: str, models: Iterable[Model], **sections: Any) -> dict[str, Any]:
    """The config as the dict `parse_config` takes (see the module's docstring)."""
    data: dict[str, Any] = {
        "catalog": False,
        "conductor": {"backend": "remote", "model": "cond"},
        "discovery": {"enabled": False},
        "workers": {"retries": 0},
        "providers": [{"name": "lab", "base_url": base_url}],
        "models": [_model(m) for m in models],
    }
    for key, value in sections.items():
        data[key] = {**data[key], **value} if isinstance(data.get(key), dict) else value
    return data


def write_lab_config(path: Path, base_url: str, models: Iterable[Model], **sections: Any) -> Path:
    """`lab_config(...)` written to `path` as TOML; returns `path`."""
    path.write_text(tomli_w.dumps(lab_config(base_url, models, **sections)))
    return path


def _model(model: Model) -> dict[str, Any]:
    if isinstance(model, str):
        return {"id": model, "provider": "lab", "model": model}
    if isinstance(model, tuple):
        name, price_in, price_out = model
        return {"id": name, "provider": "lab", "model": name, "price_in": price_in, "price_out": price_out}
    return {"provider": "lab", "model": model["id"], **model}


def sim_pool_config(base_url: str, names: Iterable[str]) -> Any:
    """The parsed config of a simulated pool served at `base_url` (a SimServer's), its models
    named `names`, planned in one step with no free reasoning: what the learning tests train on."""
    from stiva_tui.config import parse_config

    return parse_config(
        {
            "providers": [{"name": "sim", "base_url": base_url}],
            "models": [{"id": name, "provider": "sim", "model": name} for name in names],
            "catalog": False,
            "embedded_worker": False,
            "discovery": {"enabled": False},
            "workers": {"retries": 0},
            "conductor": {"max_steps": 1, "max_reasoning_tokens": 0, "max_subtask_chars": 20},
        }
    )
