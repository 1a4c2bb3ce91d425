"""Exports of a conversation: readable Markdown and a full JSON document (with every trace).

Both are built only from what the store holds, which never includes an API key.
"""

from __future__ import annotations

from typing import Any

from .db import Store

__all__ = ["conversation_markdown", "conversation_json", "workflow_summary", "totals_line"]

JSON_FORMAT = "stiva-conversation"
JSON_VERSION = 1


def conversation_json(store: Store, conversation_id: str) -> dict:
    """The conversation, its messages and the full trace of each run, as a JSON-ready dict."""
    conv = store.get_conversation(conversation_id)
    return {"format": JSON_FORMAT, "version": JSON_VERSION, **conv}


def conversation_markdown(store: Store, conversation_id: str) -> str:
    """The conversation as Markdown: each question and answer with a workflow summary and totals."""
    conv = store.get_conversation(conversation_id)
    title = conv["title"] or "Untitled conversation"
    lines = [f"# {title}", "", f"_{conv['kind']} · started {conv['created_at'][:19].replace('T', ' ')} UTC_", ""]
    if conv["runs"]:
        for n, trace in enumerate(conv["runs"], 1):
            lines += _run_section(n, trace)
    else:  # a conversation without recorded runs: its messages as they are
        for m in conv["messages"]:
            lines += [f"**{m['role'].capitalize()}:**", "", m["content"], ""]
    return "\n".join(lines).rstrip() + "\n"


def _run_section(n: int, trace: dict) -> list[str]:
    lines = [f"## {n}. {_one_line(trace['question'], 80) or '(no question)'}", ""]
    lines += ["**Question**", "", _quote(trace["question"]), ""]
    if trace["status"] == "finished":
        lines += ["**Answer**", "", trace["answer"] or "", ""]
    else:
        partial = _last_output(trace)
        lines += [f"**Answer** — _run {trace['status']}_" + (f": {trace['error']}" if trace["error"] else ""), ""]
        if partial:
            lines += ["_Partial output:_", "", partial, ""]
    lines += [f"- System: {trace['system']}" + _conductor(trace)]
    for summary in workflow_summary(trace):
        lines.append(f"- {summary}")
    lines += [f"- Totals: {totals_line(trace['totals'])}", ""]
    return lines


def workflow_summary(trace: dict) -> list[str]:
    """One short line per round: its shape and the models of its steps, e.g. 'Round 1 (chain): a → b'."""
    out = []
    for r in trace["rounds"]:
        if r["keep_previous"]:
            out.append(f"Round {r['round']}: kept the previous answer")
            continue
        steps = r["steps"]
        if not steps:
            continue
        parts = []
        for s in steps:
            label = s["model"] or "?"
            if s["status"] != "finished":
                label += f" ({s['status']})"
            if len(s["attempt_log"]) and s["status"] == "finished" and s["attempt_log"][0]["model"] != s["model"]:
                label += f" (fallback from {s['attempt_log'][0]['model']})"
            parts.append(label)
        out.append(f"Round {r['round']} ({_shape(r)}, {len(steps)} step{'s' if len(steps) != 1 else ''}): "
                   + " → ".join(parts))
    return out


def totals_line(totals: dict) -> str:
    """'1,234 in / 567 out tokens · $0.0123 · 4.2 s' (with '~' when the tokens were estimated)."""
    approx = "~" if totals.get("estimated") else ""
    return (
        f"{approx}{totals['prompt_tokens']:,} in / {approx}{totals['completion_tokens']:,} out tokens"
        f" · ${totals['cost_usd']:.4f} · {totals['latency_s']:.1f} s"
    )


def _shape(round_: dict) -> str:
    wf = round_.get("workflow")
    if not wf:
        return "direct"
    try:
        from ..conductor.workflow import workflow_from_lists

        models = wf.get("model_id") or []
        return workflow_from_lists(
            wf, pool_size=max(models, default=0) + 1, max_steps=max(len(models), 1), allow_empty=True
        ).shape()
    except Exception:  # noqa: BLE001 - an odd stored workflow still exports
        return "workflow"


def _conductor(trace: dict) -> str:
    c = trace["conductor"]
    if trace["mode"] != "conductor" or not (c["backend"] or c["model"]):
        return ""
    who = " ".join(x for x in (c["backend"], c["model"] and f"`{c['model']}`") if x)
    u = c["usage"]
    return f" (conductor: {who}, {u['prompt_tokens']:,} in / {u['completion_tokens']:,} out tokens)"


def _last_output(trace: dict) -> str:
    for r in reversed(trace["rounds"]):
        for s in reversed(r["steps"]):
            if s["output"]:
                return s["output"]
    return ""


def _one_line(text: Any, limit: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in (text or "").splitlines()) or ">"
