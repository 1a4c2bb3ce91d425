"""The live view of `stiva ask`: the plan and every step, redrawn as events arrive (rich).

The events are folded by `RunState`, the same model the app's tree reads, so the CLI and the TUI
agree on what a run looks like; this module only draws it.
"""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .core import events as ev
from .core import format as fmt
from .core.run_state import RunState, StepState
from .core.terminal import printable  # cli.py and cli_common.py import it from here too

STATUS_STYLE = {"waiting": "dim", "running": "yellow", "finished": "green", "failed": "red",
                "cancelled": "red dim", "interrupted": "red dim"}
COLUMNS = (("", "left"), ("step", "right"), ("model", "left"), ("subtask", "left"), ("reads", "left"),
           ("status", "left"), ("in", "right"), ("out", "right"), ("cost", "right"), ("time", "right"))


class LiveView:
    """Feed it events with `handle`; use it as a context manager around the run."""

    def __init__(self, console: Console, question: str):
        self.state = RunState(question=question)
        self._live = Live(console=console, refresh_per_second=12, get_renderable=self.render)

    def __enter__(self) -> "LiveView":
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(*exc)

    def handle(self, event: ev.Event) -> None:
        """Fold one event in (the text shown is made printable when drawn)."""
        if self.state.apply(event):
            self._live.refresh()

    def render(self) -> Group:
        state = self.state
        table = Table(box=None, pad_edge=False, header_style="bold")
        for name, justify in COLUMNS:
            table.add_column(name, justify=justify, no_wrap=name != "subtask",
                             max_width={"subtask": 48, "model": 32}.get(name))
        for round_ in state.rounds:
            for step in round_.steps:
                table.add_row(*_row(step))
                for failure in step.failures:
                    moved = f" → {failure.fallback}" if failure.fallback else ""
                    note = printable(f"{failure.model} failed{moved}: {failure.error}")
                    # Under the step, in the wide subtask column, so it never widens the model column.
                    table.add_row("", "", "", Text(note, style="red dim", overflow="ellipsis", no_wrap=True),
                                  *[""] * 6)
        parts: list = [Text(printable(f"❯ {state.question.strip()[:200]}"), style="bold")]
        if state.rounds and (reasoning := state.rounds[-1].conductor_text.strip()):
            prefer = f"(prefer {state.rounds[-1].preference}) " if state.rounds[-1].preference else ""
            parts.append(Text(printable(f"conductor: {prefer}{reasoning.splitlines()[-1][:160]}"), style="dim italic"))
        parts.append(table)
        parts += [Text(printable(f"warning: {warning}"), style="yellow") for warning in state.warnings]
        parts.append(Text(_footer(state), style="bold"))
        return Group(*parts)


def _row(step: StepState) -> tuple:
    done = step.status == "finished"
    elapsed = step.latency_s if step.latency_s is not None else None
    if elapsed is None and step.started_at is not None and step.status == "running":
        elapsed = time.monotonic() - step.started_at
    out = str(step.completion_tokens) if done else (f"~{step.streamed_chars // 4}" if step.streamed_chars else "")
    return (
        f"R{step.round}", fmt.step(step.index), printable(step.model or "?"), printable(step.subtask.replace("\n", " ")),
        fmt.reads(step.index, step.access, step.access_all).removeprefix("← ") or "—",
        Text(step.status + (" (fallback)" if done and step.on_fallback else ""),
             style=STATUS_STYLE.get(step.status, "")),
        str(step.prompt_tokens) if done else "", out,
        fmt.money(step.cost_usd) if done else "",
        fmt.seconds(elapsed),
    )


def _footer(state: RunState) -> str:
    if state.status == "idle" or not state.rounds:
        return "planning"
    if state.totals is None:
        last = state.rounds[-1]
        steps = fmt.count(len(last.steps), "step")
        return f"round {last.round}: " + ("planning" if last.planning else f"{steps} running")
    t = state.totals
    return (f"{state.status} · {t.prompt_tokens:,} in · {t.completion_tokens:,} out · "
            f"{fmt.money(t.cost_usd)} · {fmt.seconds(t.latency_s)}")
