"""What the store hands out besides the `Trace`: conversations, run and compare summaries, the
leaderboard. Typed pydantic models, never raw rows or dicts; `model_dump(mode="json")` gives
their JSON form (the conversation export is exactly that)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.trace import Trace
from ..core.words import ConversationKind, FailureReason, RunMode, RunStatus, Source, VoteKind

__all__ = [
    "MessageRecord",
    "Conversation",
    "ConversationSummary",
    "RunSummary",
    "CompareEntry",
    "CompareSession",
    "CompareSummary",
    "LeaderboardRow",
    "BenchRecord",
    "BenchItemRecord",
]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageRecord(_Record):
    """One message of a conversation; `seq` counts from 0 in the order they were added."""

    seq: int
    role: str
    content: str
    run_id: str | None = None
    created_at: str


class Conversation(_Record):
    """A conversation with its messages in order and the full trace of each of its runs (oldest first)."""

    id: str
    title: str = ""
    kind: ConversationKind = "chat"
    created_at: str
    updated_at: str
    messages: list[MessageRecord] = Field(default_factory=list)
    runs: list[Trace] = Field(default_factory=list)

    def turns(self) -> list[dict[str, str]]:
        """The messages as chat turns, `[{"role": ..., "content": ...}]`, in order (what a
        follow-up question sends along as the conversation so far)."""
        return [{"role": m.role, "content": m.content} for m in self.messages]


class ConversationSummary(_Record):
    """A conversation as a list shows it: no messages, only how many."""

    id: str
    title: str = ""
    kind: ConversationKind = "chat"
    created_at: str
    updated_at: str
    message_count: int = 0
    run_count: int = 0
    last_status: RunStatus | None = None  # the status of its newest run; None without runs


class RunSummary(_Record):
    """One run without its rounds and steps."""

    run_id: str
    conversation_id: str | None = None
    question: str = ""
    answer: str | None = None
    status: RunStatus = "running"
    failure: FailureReason | None = None
    mode: RunMode = "conductor"
    system: str = "conductor"
    source: Source = "tui"
    conductor_backend: str | None = None
    conductor_model: str | None = None
    conductor_adapter: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    estimated: bool = False
    error: str | None = None
    created_at: str
    finished_at: str | None = None


class CompareEntry(_Record):
    """One system's side of a comparison; `trace` is None when its run was never written or is deleted."""

    system: str
    run_id: str | None = None
    trace: Trace | None = None


class CompareSession(_Record):
    """A side-by-side comparison of systems on one question, with the vote (if any)."""

    id: str
    conversation_id: str | None = None
    question: str
    created_at: str
    entries: list[CompareEntry] = Field(default_factory=list)
    winner: str | None = None  # the system that won; None without a vote, and for a tie or "all wrong"
    vote_kind: VoteKind | None = None  # None: not voted on
    voted_at: str | None = None


class CompareSummary(_Record):
    """A comparison as a list shows it: the systems compared (in the order added) and the winner."""

    id: str
    conversation_id: str | None = None
    question: str
    created_at: str
    systems: list[str] = Field(default_factory=list)
    winner: str | None = None
    vote_kind: VoteKind | None = None


class LeaderboardRow(_Record):
    """One system's record over all compare sessions.

    `votes`: its sessions that were voted on; `win_rate` = wins / votes (0 without votes). The
    averages are over its finished runs in compare sessions (None when there are none)."""

    system: str
    sessions: int
    votes: int
    wins: int
    win_rate: float
    avg_cost_usd: float | None = None
    avg_latency_s: float | None = None
    adapter: str | None = None  # the conductor's LoRA adapter in these runs (None: the base or no conductor)

    @property
    def label(self) -> str:
        """The system, and the adapter's folder name when it ran with one."""
        return self.system if not self.adapter else f"{self.system} + adapter {Path(self.adapter).name}"


class BenchRecord(_Record):
    """One bench: what it measures and how it ended (`stop_reason` when it was stopped)."""

    id: str
    suite: str
    suite_hash: str
    systems: list[str]
    config_hash: str
    items: int  # items of the suite (after --limit)
    status: Literal["running", "finished", "stopped", "interrupted"]
    stop_reason: str | None = None
    created_at: str
    updated_at: str


class BenchItemRecord(_Record):
    """One finished (system, item) of a bench. `status` "error": its calls kept failing (not a wrong
    answer); it is asked again when the bench resumes. Tokens and cost are the system's, the
    conductor's plan included; the judge's are apart. `latency_s` counts from the item's first
    call; `queue_wait_s` is the time it waited before, behind the bench's other items."""

    system: str
    item_id: str
    run_id: str | None = None
    status: Literal["graded", "error"]
    correct: bool = False
    answer: str = ""
    extracted: str = ""
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    queue_wait_s: float = 0.0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_cost_usd: float = 0.0
