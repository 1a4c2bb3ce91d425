"""Choosing the conductor backend from the config.

`select_conductor(config, pool_models, worker_for_remote=None, progress=None)` returns the
conductor and a human reason. `auto` picks, in order:

1. `local`: the 4-bit conductor, when a CUDA GPU with enough free memory is there and the model
   is available locally;
2. `remote` on a pool model, whenever the pool has models other than the embedded one (a 270M
   base model must never plan for real models: its subtasks, copied from its own worked
   examples, made answers worse than one direct call). Which model plans (`choose_planner`):
   the config's `[conductor] model` when it names a pool model; else the cheapest model marked
   `planner` (in the catalog, or `planner = true` in a `[[models]]` entry): a plan is a few
   hundred tokens that a cheap, format-reliable model writes as well as a frontier one; else the
   first `[[models]]` entry of the config (the user's own first choice), else the first model of
   the pool.
3. `embedded`: Gemma-3 270M on the CPU, when nothing else can plan.

An explicit `local` that cannot run raises `ConductorError` (on a GPU without xgrammar, the `gpu`
extra that a chat install leaves out, in one line that says how to add it). `auto` goes on to a
pool model or the embedded one, its reason saying why. `describe_choice(config, models)` explains
the choice without loading a model. Models are not loaded here: the conductors load on first use
(or `await conductor.load()`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import DEFAULT_LOCAL_MODEL, ConductorConfig
from ..core.reading import read_text
from ..inference.grammar_mask import grammar_missing
from ..inference.progress import Progress
from .base import Conductor, ConductorError


def _cuda_free_gib() -> float | None:
    """Free memory of CUDA device 0 in GiB; None when there is no usable CUDA GPU."""
    from ..inference.checkpoints import free_cuda_bytes

    free = free_cuda_bytes()
    return None if free is None else free / 2**30


def _embedded_reason(why: str) -> str:
    """The reason shown when the embedded backend runs because the local one cannot."""
    return f"embedded: {why}" if why == "no CUDA GPU" else f"embedded: {why} — falling back"


def embedded_fallback(config: ConductorConfig, why: str) -> tuple[Conductor, str]:
    """The embedded conductor for `config`, and the reason: the local backend cannot run (`why`)."""
    from .embedded import EmbeddedConductor

    return EmbeddedConductor.from_config(config), _embedded_reason(why)


def _local_model_status(model: str) -> tuple[bool, str, float]:
    """(available locally, description, estimated GiB needed in 4-bit)."""
    import json

    from ..inference.checkpoints import estimate_4bit_bytes, hf_cached

    path = Path(model).expanduser()
    config_file: Path | None = None
    if path.exists():
        if not (path / "config.json").exists():
            return False, f"{path} is not a model folder (no config.json)", 0.0
        config_file = path / "config.json"
        where = f"folder {path}"
    else:
        if model.startswith(("/", ".", "~")) or model.count("/") > 1:
            return False, f"local model {model} not found", 0.0
        if not hf_cached(model):
            return (
                False,
                f"local model {model} not found in the Hugging Face cache (`hf download {model}` fetches it)",
                0.0,
            )
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(model, "config.json")
            config_file = Path(found) if isinstance(found, str) else None
        except Exception:  # noqa: BLE001
            config_file = None
        where = f"{model} (HF cache)"
    need = 6.0
    if config_file is not None:
        try:
            from types import SimpleNamespace

            data = json.loads(read_text(config_file, 16 << 20))  # a model's config.json: kilobytes
            kind = data.get("model_type")
            if kind and not _is_causal_lm(kind):
                return False, f"{model} is a {kind!r} model, not a causal language model", 0.0
            text = data.get("text_config") or data
            ns = SimpleNamespace(**text)
            ns.tie_word_embeddings = data.get("tie_word_embeddings", False)
            need = estimate_4bit_bytes(ns) / 2**30 * 1.15 + 1.5
        except Exception:  # noqa: BLE001
            pass
    return True, where, need


def _is_causal_lm(model_type: str) -> bool:
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except Exception:  # noqa: BLE001 - let the loader say what is wrong
        return True
    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


def _local_reason(config: ConductorConfig) -> tuple[bool, str]:
    """Whether the local backend can run, and why (not)."""
    model = config.model or DEFAULT_LOCAL_MODEL
    free = _cuda_free_gib()
    if free is None:
        return False, "no CUDA GPU"
    if (missing := grammar_missing()) is not None:
        return False, missing
    ok, where, need = _local_model_status(model)
    if not ok:
        return False, where
    if need > free:
        return False, f"{model} needs ~{need:.0f} GiB of GPU memory, {free:.0f} GiB free"
    if config.adapter and not (Path(config.adapter).expanduser() / "adapter_config.json").exists():
        return False, f"LoRA adapter {config.adapter} not found"
    return True, f"CUDA GPU with {free:.0f} GiB free, {where}"


def loaded_facts(conductor: Any) -> str:
    """What a loaded conductor runs on, for one line: "nf4 on cuda · 5.4 GB · loaded in 41.2 s"."""
    try:
        info = conductor.describe()
    except Exception:  # noqa: BLE001 - a display detail must not break anything
        return ""
    parts = []
    quantization, device = info.get("quantization"), info.get("device")
    if quantization and device:
        parts.append(f"{quantization} on {device}")
    elif device:  # a remote conductor: where it is served
        parts.append(f"via {device}")
    if info.get("adapter"):
        parts.append(f"LoRA {info['adapter']}")
    memory = info.get("memory_mb")
    if memory:
        parts.append(f"{memory / 1024:.1f}\u00a0GB" if memory >= 1024 else f"{memory:.0f}\u00a0MB")
    if info.get("converted_s") is not None:  # the first start's one-time conversion, apart from the load
        parts.append(f"converted once in {info['converted_s']:.0f}\u00a0s")
    if info.get("load_s"):  # no-break spaces, so rich keeps a number with its unit (Textual may not)
        parts.append(f"loaded in {info['load_s']:.1f}\u00a0s")
    if info.get("warm_worker"):  # the app and `stiva serve` on the warm worker's model (shared_models.py)
        parts.insert(0, "in the warm worker")  # first: a narrow status bar cuts the line's end
    return " · ".join(parts)


def choose_planner(config: ConductorConfig, pool_models: Sequence[Any]) -> tuple[Any, str] | None:
    """The pool model that plans when `auto` has no local conductor, and why; None when the pool
    holds nothing but the embedded model (see the module's docstring for the rule)."""
    real = [
        m
        for m in pool_models
        if getattr(m, "kind", "") != "embedded" and getattr(m, "enabled", True) and getattr(m, "available", True)
    ]
    if not real:
        return None
    named = next((m for m in real if m.id == config.model), None)
    if named is not None:
        return named, "the config's [conductor] model"
    marked = [m for m in real if getattr(m, "planner", False)]
    if marked:
        cheapest = min(marked, key=lambda m: (m.price_in + m.price_out, marked.index(m)))
        return cheapest, ("the cheapest model marked planner" if len(marked) > 1 else "marked planner")
    configured = [m for m in real if getattr(m, "source", "") == "config"]
    if configured:
        return configured[0], "the first [[models]] entry (mark one planner = true to choose)"
    return real[0], "the first model of the pool (mark one planner = true to choose)"


def _embedded_configured_reason(pool_models: Sequence[Any]) -> str:
    """Why `backend = "embedded"` runs: the config says so, or `--pool sim` (or `replay:`) chose it,
    since a simulated model answers questions and cannot plan."""
    from ..config import REPLAY_PROVIDER, SIM_PROVIDER

    providers = {getattr(m, "provider", "") for m in pool_models if getattr(m, "kind", "") != "embedded"}
    if providers and providers <= {SIM_PROVIDER, REPLAY_PROVIDER}:
        return (
            "embedded: the simulated pool's models answer but cannot plan "
            "(Gemma-3 270M on the CPU plans; one step on short questions)"
        )
    return "embedded: config says so"


def _remote_reason(why_not_local: str, model: Any, why: str) -> str:
    return f"remote: {why_not_local}; {model.id} plans ({why})"


def describe_choice(config: ConductorConfig, pool_models: Sequence[Any] = ()) -> str:
    """Which backend `select_conductor` would pick, and why; loads no model (may import torch)."""
    backend = config.backend
    if backend == "router":
        return f"router: a one-pass router picks the model, cascade or vote ({config.model})"
    if backend == "remote":
        return f"remote: config says so ({config.model})"
    if backend == "embedded":
        reason = _embedded_configured_reason(pool_models)
        return reason if "(" in reason else f"{reason} (Gemma-3 270M on the CPU)"
    ok, why = _local_reason(config)
    if backend == "local":
        return f"local: {why}" if ok else f"local (will fail): {why}"
    if ok:
        return f"local: {why}"
    planner = choose_planner(config, pool_models)
    if planner is not None:
        return _remote_reason(why, *planner)
    return _embedded_reason(why)


def fallback_conductor(
    config: ConductorConfig, pool_models: Sequence[Any], worker: Any, why: str, deadline_s: float | None = None
) -> tuple[Conductor, str]:
    """What `auto` runs when the local conductor cannot (`why`): a pool model planning, else the
    embedded model."""
    planner = choose_planner(config, pool_models)
    if planner is not None and worker is not None:
        from .remote import RemoteConductor

        model, reason = planner
        return RemoteConductor(
            model,
            worker,
            deadline_s=deadline_s,
            structured=config.structured,
            reasoning_tokens=config.max_reasoning_tokens,
        ), _remote_reason(why, model, reason)
    return embedded_fallback(config, why)


def select_conductor(
    config: ConductorConfig,
    pool_models: Sequence[Any] = (),
    worker_for_remote: Any = None,
    progress: Progress | None = None,
    deadline_s: float | None = None,
) -> tuple[Conductor, str]:
    """The conductor for `config` and the reason for the choice (no model is loaded here).
    `deadline_s` bounds each call of a remote conductor, as [workers] deadline_s does a worker's."""
    backend = config.backend
    if backend == "router":
        from .router import RouterConductor

        return RouterConductor(config.model), f"router: one pass picks the model, cascade or vote ({config.model})"
    if backend == "remote":
        from .remote import RemoteConductor

        model = next((m for m in pool_models if getattr(m, "id", None) == config.model), None)
        if model is None:
            known = ", ".join(getattr(m, "id", "?") for m in pool_models) or "none"
            raise ConductorError(
                f"[conductor] model = {config.model!r} is not a pool model (known: {known}); "
                "set it to the id of a model in the pool"
            )
        if worker_for_remote is None:
            raise ConductorError("the remote conductor needs a worker to call its model")
        return (
            RemoteConductor(
                model,
                worker_for_remote,
                deadline_s=deadline_s,
                structured=config.structured,
                reasoning_tokens=config.max_reasoning_tokens,
            ),
            f"remote: config says so ({config.model})",
        )
    if backend == "embedded":
        from .embedded import EmbeddedConductor

        return EmbeddedConductor.from_config(config), _embedded_configured_reason(pool_models)
    ok, why = _local_reason(config)
    if ok:
        from .local import LocalConductor

        return LocalConductor.from_config(config), f"local: {why}"
    if backend == "local":
        if why == grammar_missing():  # the how-to is the one thing to say
            raise ConductorError(f"the local conductor cannot run: {why}")
        raise ConductorError(
            f'the local conductor cannot run: {why}. Use backend = "embedded" or "auto", or fix [conductor] model'
        )
    return fallback_conductor(config, pool_models, worker_for_remote, why, deadline_s)
