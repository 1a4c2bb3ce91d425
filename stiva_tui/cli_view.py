"""The live view of `stiva ask`: the plan and every step, redrawn as events arrive (rich)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .engine import events as ev

STATUS_STYLE = {"waiting": "dim", "running": "yellow", "done": "green", "failed": "red", "retrying": "magenta"}


@dataclass
class _Row:
    round: int
    index: int
    model: str = "?"
    subtask: str = ""
    access: tuple[int, ...] = ()
    status: str = "waiting"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    started: float | None = None
    latency: float | None = None
    chars: int = 0
    note: str = ""
    models: list[str] = field(default_factory=list)


class LiveView:
    """Feed it events with `handle`; use it as a context manager around the run."""

    def __init__(self, console: Console, question: str):
        self.console = console
        self.question = question
        self.rows: dict[tuple[int, int], _Row] = {}
        self.reasoning = ""
        self.status = "planning"
        self.totals: ev.Totals | None = None
        self._live = Live(self.render(), console=console, refresh_per_second=12, transient=False,
                          get_renderable=self.render)

    def __enter__(self) -> "LiveView":
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(*exc)

    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.RoundStarted):
            self.status = f"round {event.round}: planning"
            self.reasoning = ""
        elif isinstance(event, ev.ConductorDelta):
            self.reasoning += event.text
        elif isinstance(event, ev.WorkflowReady):
            self.status = f"round {event.round}: " + ("keeping the previous answer" if event.keep_previous
                                                      else f"{event.workflow.shape()} of {len(event.workflow)}")
            for i, step in enumerate(event.workflow.steps):
                self.rows[(event.round, i)] = _Row(event.round, i, subtask=step.subtask, access=step.access)
        elif isinstance(event, ev.StepStarted):
            row = self.rows.setdefault((event.round, event.index), _Row(event.round, event.index))
            row.model, row.subtask, row.access = event.model, event.subtask, event.access
            row.status = "running" if event.attempt == 1 else "retrying"
            row.started = row.started or time.monotonic()
            row.chars = 0
        elif isinstance(event, ev.StepDelta):
            row = self.rows.get((event.round, event.index))
            if row:
                row.chars += len(event.text)
        elif isinstance(event, ev.StepFinished):
            row = self.rows[(event.round, event.index)]
            row.status, row.model = "done", event.model
            row.prompt_tokens, row.completion_tokens = event.usage.prompt_tokens, event.usage.completion_tokens
            row.cost, row.latency = event.cost_usd, event.latency_s
        elif isinstance(event, ev.StepFailed):
            row = self.rows[(event.round, event.index)]
            row.note = f"{event.model} failed: {event.error[:60]}" + (f" → {event.fallback}" if event.fallback else "")
            if event.fallback is None:
                row.status = "failed"
        elif isinstance(event, (ev.RunFinished, ev.RunFailed, ev.RunCancelled)):
            self.totals = event.totals
            self.status = {ev.RunFinished: "finished", ev.RunFailed: "failed", ev.RunCancelled: "cancelled"}[
                type(event)]
        self._live.refresh()

    def render(self) -> Group:
        table = Table(box=None, pad_edge=False, expand=False, header_style="bold")
        for name, justify in (("", "left"), ("step", "right"), ("model", "left"), ("subtask", "left"),
                              ("reads", "left"), ("status", "left"), ("in", "right"), ("out", "right"),
                              ("cost", "right"), ("time", "right")):
            table.add_column(name, justify=justify, no_wrap=name != "subtask", max_width=48 if name == "subtask" else None)
        now = time.monotonic()
        for (round_, index), row in sorted(self.rows.items()):
            elapsed = row.latency if row.latency is not None else (now - row.started if row.started else None)
            out = str(row.completion_tokens) if row.status == "done" else (f"~{row.chars // 4}" if row.chars else "")
            table.add_row(
                f"R{round_}", str(index), row.model, row.subtask.replace("\n", " "),
                ",".join(map(str, row.access)) or "—",
                Text(row.status, style=STATUS_STYLE.get(row.status, "")),
                str(row.prompt_tokens) if row.status == "done" else "", out,
                f"${row.cost:.4f}" if row.status == "done" else "",
                f"{elapsed:.1f}s" if elapsed is not None else "",
            )
            if row.note:
                table.add_row("", "", Text(row.note, style="red dim"), "", "", "", "", "", "", "")
        parts: list = [Text(f"❯ {self.question.strip()[:200]}", style="bold")]
        if self.reasoning.strip():
            last = self.reasoning.strip().splitlines()[-1][:160]
            parts.append(Text(f"conductor: {last}", style="dim italic"))
        parts.append(table)
        footer = self.status
        if self.totals is not None:
            t = self.totals
            footer += f" · {t.prompt_tokens:,} in · {t.completion_tokens:,} out · ${t.cost_usd:.4f} · {t.latency_s:.1f}s"
        parts.append(Text(footer, style="bold"))
        return Group(*parts)
