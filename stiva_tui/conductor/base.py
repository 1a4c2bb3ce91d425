"""The Conductor protocol: plan a workflow for a question over a pool.

Every backend (remote, local, embedded) implements `plan()`. It streams its reasoning through
`on_delta` as text arrives and returns a validated `Plan`. Backends never import Textual, and
torch only inside the local backends' own code paths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..core.preference import Preference
from ..core.usage import Usage
from ..core.workflow import Workflow
from ..inference.progress import Progress


class ConductorError(Exception):
    """The conductor could not produce a plan; the message says why and what to do. `usage` is
    what its failed attempts consumed (a remote conductor's calls are paid for even so)."""

    def __init__(self, message: str = "", usage=None):
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class WorkerInfo:
    """One pool model as the conductor sees it: numbered from 0 in the prompt."""

    id: str
    description: str
    # "embedded" for the in-process base model (the base-model prompts keep it out of examples'
    # strong role), else "openai".
    kind: str = "openai"
    # What the preference sentence tells the conductor (USD per 1M tokens; seconds a call, when known).
    price_in: float = 0.0
    price_out: float = 0.0
    latency_s: float | None = None


@dataclass(frozen=True)
class PreviousRound:
    """What a later round shows the conductor: its last workflow and that round's answer."""

    workflow: Workflow
    answer: str
    # Model ids of the pool at the time, so the workflow can be shown with names.
    step_models: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanRequest:
    question: str
    workers: Sequence[WorkerInfo]
    max_steps: int = 5
    # Earlier turns, oldest first: {"role": "user"|"assistant", "content": str}.
    conversation: Sequence[dict] = ()
    round: int = 1
    previous: PreviousRound | None = None
    # The user's cost and latency preference (core/preference.py); None: none stated.
    preference: Preference | None = None
    # The question's answers cannot be compared (a live open question, core/open_text.py's
    # `comparable`): plan one model, no vote or cascade (the engine replaces a plan that has one).
    single_model: bool = False


@dataclass(frozen=True)
class Plan:
    workflow: Workflow
    reasoning: str  # the text before the lists (a <think> block removed)
    raw_text: str  # everything the conductor wrote
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    attempts: int = 1  # 2 when a repair retry was needed


DeltaCallback = Callable[[str], None]


@runtime_checkable
class Conductor(Protocol):
    backend: str  # "remote" | "local" | "embedded"
    model: str  # what runs the conductor (HF id, folder, or pool model id)
    quantization: str | None  # "nf4" for the 4-bit local backends, None for remote
    adapter: str | None  # a LoRA adapter on the model (local backends), else None

    @property
    def loaded(self) -> bool:
        """Whether `plan()` can start at once (a remote conductor always can)."""
        ...

    async def load(self, progress: Progress | None = None) -> None:
        """Load the model (local backends, in a thread, once). Raises ConductorError saying why."""
        ...

    async def plan(self, request: PlanRequest, on_delta: DeltaCallback | None = None) -> Plan:
        """Plan one round. Raises ConductorError when no valid plan can be had."""
        ...

    def describe(self) -> dict:
        """Backend facts for display and traces: backend, model, quantization, device, memory..."""
        ...


_SIMPLE_WORDS = 16
_SIMPLE_CHARS = 120


def is_simple_question(question: str) -> bool:
    """A short, one-line question: one step is the plan for it."""
    text = question.strip()
    return "\n" not in text and "```" not in text and len(text) <= _SIMPLE_CHARS and len(text.split()) <= _SIMPLE_WORDS
