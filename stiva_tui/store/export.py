"""Exports of a conversation: readable Markdown and a full JSON document (with every trace).

Both are built only from what the store holds, which never includes an API key.
"""

from __future__ import annotations

from typing import Any

from ..core import display as fmt
from ..core.trace import Trace, TraceConductor, TraceStep, TraceTotals
from .db import Store

__all__ = [
    "branch_lines",
    "conversation_markdown",
    "conversation_json",
    "fork_line",
    "run_markdown",
    "workflow_summary",
    "totals_line",
]

JSON_FORMAT = "stiva-conversation"
JSON_VERSION = 1


def conversation_json(store: Store, conversation_id: str) -> dict[str, Any]:
    """The conversation, its messages and the full trace of each run, as a JSON-ready dict:
    `{"format": "stiva-conversation", "version": 1, **Conversation.model_dump(mode="json")}`."""
    conversation = store.get_conversation(conversation_id)
    return {"format": JSON_FORMAT, "version": JSON_VERSION, **conversation.model_dump(mode="json")}


def conversation_markdown(store: Store, conversation_id: str) -> str:
    """The conversation as Markdown: each question and answer with a workflow summary and totals."""
    conv = store.get_conversation(conversation_id)
    lines = [
        f"# {conv.title or 'Untitled conversation'}",
        "",
        f"_{conv.kind} · started {conv.created_at[:19].replace('T', ' ')} UTC_",
        "",
    ]
    if conv.runs:
        for n, trace in enumerate(conv.runs, 1):
            lines += _run_section(n, trace)
    else:  # a conversation without recorded runs: its messages as they are
        for m in conv.messages:
            lines += [f"**{m.role.capitalize()}:**", "", m.content, ""]
    return "\n".join(lines).rstrip() + "\n"


def workflow_summary(trace: Trace) -> list[str]:
    """One short line per round: its shape and the models of its steps, e.g.
    'Round 1 (chain, 2 steps): a → b (fallback from c)'."""
    out = []
    for r in trace.rounds:
        if r.keep_previous:
            out.append(f"Round {r.round}: kept the previous answer")
            continue
        if not r.steps:
            continue
        parts = []
        for s in r.steps:
            label = s.model or "?"
            if s.status != "finished":
                label += f" ({s.status})"
            elif s.first_model != s.model:
                label += f" (fallback from {s.first_model})"
            parts.append(label)
        out.append(f"Round {r.round} ({r.shape()}, {fmt.count(len(r.steps), 'step')}): " + " → ".join(parts))
    return out


def totals_line(totals: TraceTotals) -> str:
    """'1,234 in / 567 out tokens · $0.012 · 4.2s' (with '~' when the tokens were estimated)."""
    approx = "~" if totals.estimated else ""
    return (
        f"{approx}{totals.prompt_tokens:,} in / {approx}{totals.completion_tokens:,} out tokens"
        f" · {fmt.money(totals.cost_usd)} · {fmt.seconds(totals.latency_s)}"
    )


def run_markdown(trace: Trace, *, plan: bool = False) -> str:
    """One run as Markdown: question, answer (or what it had written), workflow and totals; with
    `plan`, every round's steps: model, what each read, and its subtask."""
    lines = _run_section(1, trace)
    if plan:
        lines += plan_lines(trace)
    return "\n".join(lines).rstrip() + "\n"


def plan_lines(trace: Trace) -> list[str]:
    """The plan of each round as Markdown: one line per step, numbered from 1 as the tree numbers
    them (the plan's own access lists count from 0)."""
    out: list[str] = []
    for r in trace.rounds:
        if not r.steps:
            continue
        out += [
            f"**Plan, round {r.round}**" + (f" (made under the preference *{r.preference}*)" if r.preference else ""),
            "",
        ]
        for s in r.steps:
            reads = "steps " + ", ".join(fmt.step(j) for j in s.access) if s.access else "the question only"
            out.append(
                f"- Step {fmt.step(s.index)} · `{s.model or '?'}` · reads {reads} · {_step_status(trace, s)}: "
                f"{_one_line(s.subtask, 200) or '(no subtask)'}"
            )
        out.append("")
    return out


def _run_section(n: int, trace: Trace) -> list[str]:
    # the question once: whole, quoted under a numbered heading (not also cut short in the heading)
    lines = [f"## Question {n}", "", _quote(trace.question) if trace.question else "_(no question)_", ""]
    if trace.status == "finished":
        lines += ["**Answer**", "", trace.answer or "", ""]
    else:
        partial = trace.last_output()
        lines += [f"**Answer** — _run {trace.status}_" + (f": {trace.error}" if trace.error else ""), ""]
        if partial:
            lines += ["_Partial output:_", "", partial, ""]
    lines += [f"- System: {trace.system}" + _conductor(trace)]
    if trace.fork is not None:
        lines += [f"- {fork_line(trace)}"]
    lines += [f"- {summary}" for summary in workflow_summary(trace)]
    lines += [f"- {'Added by the branch' if trace.fork is not None else 'Totals'}: {totals_line(trace.totals)}", ""]
    for branch in trace.branches:
        lines += branch_lines(branch)
    return lines


def fork_line(branch: Trace) -> str:
    """'Branch 1 of run 3f2a…: step 2 run again on `w3`, and steps 4 that read it; kept: 1, 3'."""
    f = branch.fork
    assert f is not None
    steps = [s for r in branch.rounds if r.round == f.round for s in r.steps]
    again = [s.index for s in steps if not s.kept and s.index != f.index]
    kept = [s.index for s in steps if s.kept]
    line = f"Branch {f.branch} of run {f.of}: step {fmt.step(f.index)} run again on `{f.model or '?'}`"
    if again:
        line += f", and step{'s' if len(again) > 1 else ''} {fmt.steps(again)} that read it"
    return line + (f"; kept: step{'s' if len(kept) > 1 else ''} {fmt.steps(kept)}" if kept else "")


def branch_lines(branch: Trace) -> list[str]:
    """A branch under its run: what was run again, its answer, and what it added."""
    f = branch.fork
    assert f is not None
    lines = [f"### Branch {f.branch}: step {fmt.step(f.index)} on `{f.model or '?'}`", ""]
    if f.subtask:
        lines += [f"_Subtask:_ {_one_line(f.subtask, 200)}", ""]
    if branch.status == "finished":
        lines += [branch.answer or "", ""]
    else:
        lines += [f"_Branch {branch.status}_" + (f": {branch.error}" if branch.error else ""), ""]
    lines += [f"- {fork_line(branch)}", f"- Added by the branch: {totals_line(branch.totals)}", ""]
    return lines


def _step_status(trace: Trace, step: TraceStep) -> str:
    """A step's status in the plan's lines; a branch's step not run again is "kept"."""
    return "kept" if trace.fork is not None and step.kept else step.status


def _conductor(trace: Trace) -> str:
    c: TraceConductor = trace.conductor
    if trace.mode != "conductor" or not (c.backend or c.model):
        return ""
    who = " ".join(x for x in (c.backend, c.model and f"`{c.model}`", c.adapter and f"+ adapter `{c.adapter}`") if x)
    return f" (conductor: {who}, {c.usage.prompt_tokens:,} in / {c.usage.completion_tokens:,} out tokens)"


def _one_line(text: str | None, limit: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in (text or "").splitlines()) or ">"
