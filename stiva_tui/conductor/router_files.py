"""A router folder's two files, read in bounded memory before `load_router` builds the router:
`router.json` first (at most `JSON_LIMIT` bytes), then the `.npz`'s arrays, checked from the
archive's member sizes and each `.npy` header against the models `router.json` names before any
is inflated (core/reading.py). Anything else is a `ReadError` (a ValueError) of one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.reading import ReadError, read_npz, read_text

__all__ = ["JSON_LIMIT", "WEIGHTS_LIMIT", "read_router_files"]

JSON_LIMIT = 16 * 1024 * 1024
"""Bytes of `router.json` (a tfidf router's fitted frequencies are about 150 KB)."""
WEIGHTS_LIMIT = 64 * 1024 * 1024
"""Bytes of `router.npz`'s arrays, inflated: a tfidf router's float32 weights are 8,192 x 4 bytes
a model (32 KiB), so about 2,000 models."""
# d: the representation's size; m: the models router.json names
SHAPES: dict[str, tuple[int | str, ...]] = {"weights": ("d", "m"), "bias": ("m",), "mean": ("d",), "scale": ("d",)}
# n: train items; w: candidate workflows (router.json's `workflows.names`); the train items'
# representation in compressed sparse rows (p = n + 1 row starts, z entries)
WORKFLOW_SHAPES: dict[str, tuple[int | str, ...]] = {
    "wf_indptr": ("p",),
    "wf_indices": ("z",),
    "wf_data": ("z",),
    "wf_dim": (1,),
    "wf_right": ("n", "w"),
    "wf_cost": ("n", "w"),
    "wf_latency": ("n", "w"),
}


def read_router_files(json_path: Path, weights_path: Path) -> tuple[Any, dict[str, Any]]:
    """(router.json's data, the arrays by name). The arrays' columns must be the models it names."""
    try:
        data = json.loads(read_text(json_path, JSON_LIMIT))
    except RecursionError:
        raise ReadError("JSON nested too deeply", source=str(json_path)) from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise ReadError("not a Stiva router file (no list of models)", source=str(json_path))
    shapes, sizes = dict(SHAPES), {"m": len(models)}
    workflows = data.get("workflows")
    if workflows is not None:  # the per-question workflow choice (conductor/router.py WorkflowChoice)
        names = workflows.get("names") if isinstance(workflows, dict) else None
        if not isinstance(names, list):
            raise ReadError("not a Stiva router file (its workflows name no candidates)", source=str(json_path))
        shapes.update(WORKFLOW_SHAPES)
        sizes["w"] = len(names)
    return data, read_npz(weights_path, shapes, sizes=sizes, limit=WEIGHTS_LIMIT)
