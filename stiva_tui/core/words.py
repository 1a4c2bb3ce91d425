"""The vocabulary every layer shares: run statuses, step statuses, sources, modes, conversation
kinds, failure reasons and vote kinds. The history's CHECK constraints hold exactly these words (a test
compares them), so a word is added here and in one new store upgrade step, together.
"""

from __future__ import annotations

from typing import Literal, get_args

RunStatus = Literal["running", "finished", "failed", "cancelled", "interrupted"]
# interrupted: the process that ran it is gone (killed); what it had streamed is kept.
StepStatus = Literal["waiting", "running", "finished", "failed", "cancelled", "interrupted"]
# What a stored run's step reads as (core/trace.py): a stored status, or "skipped", a step of a
# finished run that never ran (an agreement gate before it ended the round; it is stored as waiting)
TraceStepStatus = StepStatus | Literal["skipped"]
# Which front end started a run.
Source = Literal["tui", "cli", "api", "bench", "train"]
# conductor: planned by the conductor; direct: one model; moa: Mixture-of-Agents;
# workflow: a given workflow run without planning (training rollouts, replays).
RunMode = Literal["conductor", "direct", "moa", "workflow"]
# chat: the app's chat; ask: one `stiva ask` (and its --continue calls); compare: the app's
# compare mode; api: one request to `stiva serve`; bench, train: those commands' runs.
ConversationKind = Literal["chat", "ask", "compare", "api", "bench", "train"]
# Why a run did not finish: its budget ran out, the conductor wrote no plan, a step failed on
# every model, it was cancelled, or a bug.
FailureReason = Literal["budget", "conductor", "step", "cancelled", "internal"]
# A compare-mode vote: one system's answer won; all answers were equally good (a tie); or every
# answer was wrong. Only "winner" names a system.
VoteKind = Literal["winner", "tie", "all_wrong"]

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
STEP_STATUSES: tuple[str, ...] = get_args(StepStatus)
SOURCES: tuple[str, ...] = get_args(Source)
RUN_MODES: tuple[str, ...] = get_args(RunMode)
CONVERSATION_KINDS: tuple[str, ...] = get_args(ConversationKind)
FAILURE_REASONS: tuple[str, ...] = get_args(FailureReason)
VOTE_KINDS: tuple[str, ...] = get_args(VoteKind)

# The kind of conversation each front end keeps.
KIND_OF_SOURCE: dict[Source, ConversationKind] = {
    "tui": "chat",
    "cli": "ask",
    "api": "api",
    "bench": "bench",
    "train": "train",
}
