"""The live views on stderr, drawn with rich: `stiva ask`'s plan and steps (`LiveView`),
`stiva train`'s reward curve (`TrainView`), `stiva bench`'s progress (`ProgressView`).

`LiveView` draws what `RunState` folds of a run's events, the model the app's tree reads, so the
CLI and the TUI agree on what a run looks like; this module only draws.
"""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..core import display as fmt
from ..core import events as ev
from ..core.run_state import RunState, StepState
from ..core.terminal import printable  # importable from here too, as it always was

STATUS_STYLE = {
    "waiting": "dim",
    "running": "yellow",
    "finished": "green",
    "failed": "red",
    "cancelled": "red dim",
    "interrupted": "red dim",
}
COLUMNS = (
    ("", "left"),
    ("step", "right"),
    ("model", "left"),
    ("subtask", "left"),
    ("reads", "left"),
    ("status", "left"),
    ("in", "right"),
    ("out", "right"),
    ("cost", "right"),
    ("time", "right"),
)


class LiveView:
    """`stiva ask`'s live view. Feed it events with `handle`; use it as a context manager around the run."""

    def __init__(self, console: Console, question: str):
        self.state = RunState(question=question)
        self._live = Live(console=console, refresh_per_second=12, get_renderable=self.render)

    def __enter__(self) -> LiveView:
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
            table.add_column(
                name, justify=justify, no_wrap=name != "subtask", max_width={"subtask": 48, "model": 32}.get(name)
            )
        for round_ in state.rounds:
            for step in round_.steps:
                table.add_row(*_row(step))
                for failure in step.failures:
                    moved = f" → {failure.fallback}" if failure.fallback else ""
                    note = printable(f"{failure.model} failed{moved}: {failure.error}")
                    # Under the step, in the wide subtask column, so it never widens the model column.
                    table.add_row("", "", "", Text(note, style="red dim", overflow="ellipsis", no_wrap=True), *[""] * 6)
        parts: list = [Text(printable(f"❯ {state.question.strip()[:200]}"), style="bold")]
        if state.rounds and (reasoning := state.rounds[-1].conductor_text.strip()):
            prefer = f"(prefer {state.rounds[-1].preference}) " if state.rounds[-1].preference else ""
            parts.append(Text(printable(f"conductor: {prefer}{reasoning.splitlines()[-1][:160]}"), style="dim italic"))
        parts.append(table)
        parts += [Text(printable(f"budget: {r.budget_note}"), style="yellow") for r in state.rounds if r.budget_note]
        parts += [Text(printable(f"warning: {warning}"), style="yellow") for warning in state.warnings]
        parts.append(Text(_footer(state), style="bold"))
        return Group(*parts)


def _row(step: StepState) -> tuple:
    done = step.status == "finished"
    elapsed = step.latency_s if step.latency_s is not None else None
    if elapsed is None and step.started_at is not None and step.status == "running":
        elapsed = time.monotonic() - step.started_at
    out = str(step.completion_tokens) if done else (f"~{step.live()[1]}" if step.streamed_chars else "")
    if done or step.status == "skipped":
        cost = fmt.money(step.cost_usd)
    elif step.status in ("cancelled", "failed") and step.estimated:
        cost = f"~{fmt.money(step.cost_usd)}"  # what it spent before it stopped
    else:  # the plan's estimate before the call
        cost = f"est {fmt.money(step.expected_cost)}" if step.expected_cost is not None else ""
    return (
        f"R{step.round}",
        fmt.step(step.index),
        printable(step.model or "?"),
        printable(step.subtask.replace("\n", " ")),
        fmt.reads(step.index, step.access, step.access_all).removeprefix("← ") or "—",
        Text(
            printable(step.note)
            if done and step.note
            else step.status + (" (fallback)" if done and step.on_fallback else ""),
            style=STATUS_STYLE.get(step.status, ""),
        ),
        str(step.prompt_tokens) if done else "",
        out,
        cost,
        fmt.seconds(elapsed),
    )


def _footer(state: RunState) -> str:
    if state.status == "idle" or not state.rounds:
        return "planning"
    prompt, completion, cost, estimated = state.live()
    mark = "~" if estimated else ""  # a stream still going, or a count the provider never sent
    spent = f"{mark}{prompt:,} in · {mark}{completion:,} out · {mark}{fmt.money(cost)}"
    if state.totals is None:
        last = state.rounds[-1]
        steps = fmt.count(len(last.steps), "step")
        expected = f" (est. {fmt.money(last.expected_cost)})" if last.expected_cost is not None else ""
        doing = "planning" if last.planning else f"{steps}{expected} running"
        return f"round {last.round}: {doing} · {spent}"
    return f"{state.status} · {spent} · {fmt.seconds(state.totals.latency_s)}"


# --- stiva train ---------------------------------------------------------------------------------

SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values, width: int = 60) -> str:
    values = list(values)[-width:]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(SPARKS[min(len(SPARKS) - 1, int((v - lo) / span * (len(SPARKS) - 1) + 0.5))] for v in values)


class TrainView:
    """`stiva train`'s live view: stage, reward curve, the last step's plans, the spend."""

    def __init__(self, console, steps: int):
        self.console = console
        self.steps = steps
        self.live = Live(console=console, refresh_per_second=4)
        self.rewards: list[float] = []
        self.last = None
        self.message = "starting"

    def __enter__(self):
        self.live.__enter__()
        self.live.update(self.render())
        return self

    def __exit__(self, *exc):
        return self.live.__exit__(*exc)

    def stage(self, message: str) -> None:
        self.message = message
        self.live.update(self.render())

    def step(self, report) -> None:
        self.rewards.append(report.reward_mean)
        self.last = report
        self.message = "training"
        self.live.update(self.render())

    def render(self):
        lines = [Text(f"stiva train · {self.message}", style="bold")]
        report = self.last
        if report is not None:
            lines.append(
                Text(
                    f"step {report.step}/{self.steps} · reward {report.reward_mean:.3f} ± "
                    f"{report.reward_std:.3f} · loss {report.loss:.4f} · valid plans "
                    f"{report.valid_plan_rate:.0%} · steps/plan {report.mean_plan_steps:.2f}"
                )
            )
            lines.append(
                Text(f"reward  {sparkline(self.rewards)}  (first {self.rewards[0]:.3f}, best {max(self.rewards):.3f})")
            )
            lines.append(
                Text(
                    f"spent {fmt.money(report.spent_usd)} · this step {report.tokens:,} tokens "
                    f"{fmt.money(report.cost_usd)}"
                    + (f" · {fmt.count(report.reused, 'answer')} reused" if report.reused else "")
                    + f" · generate {fmt.seconds(report.generate_s)} rollouts "
                    f"{fmt.seconds(report.rollout_s)} update {fmt.seconds(report.update_s)}"
                )
            )
            if report.picks:
                total = sum(report.picks.values())
                lines.append(
                    Text(
                        "models  "
                        + "  ".join(
                            f"{m} {n / total:.0%}" for m, n in sorted(report.picks.items(), key=lambda kv: -kv[1])
                        )
                    )
                )
            lines += [Text("  " + sample, overflow="ellipsis", no_wrap=True) for sample in report.samples]
        return Group(*lines)


# --- stiva bench ---------------------------------------------------------------------------------


class ProgressView:
    """`stiva bench`'s live view: items done per system, running accuracy, tokens, cost, ETA."""

    def __init__(self, console):
        self.console = console
        self.last = None
        # Drawn anew at every refresh, not only when an item finishes: the clock and the ETA
        # keep ticking while slow items run, so the bench never looks hung.
        self.live = Live(
            console=console,
            refresh_per_second=4,
            transient=False,
            get_renderable=lambda: self.render(self.last) if self.last is not None else Text(""),
        )

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
        return self.live.__exit__(*exc)

    def update(self, progress) -> None:
        self.last = progress
        self.live.refresh()

    @staticmethod
    def render(progress):
        eta = progress.eta_s
        elapsed = time.monotonic() - progress.started
        caption = (
            f"{progress.done}/{progress.total} items · {fmt.seconds(elapsed)} · "
            f"ETA {'—' if eta is None else fmt.seconds(eta)} · spent {fmt.money(progress.spent_usd)}"
        )
        if progress.resumed:
            caption += f" · {progress.resumed} resumed"
        if progress.throttled:
            caption += " · 429s: " + ", ".join(f"{k} {v}" for k, v in progress.throttled.items())
        if progress.stopped:
            caption += f" · stopped: {progress.stopped}"
        table = Table(title=f"bench {progress.bench_id} · {progress.suite}", title_justify="left")
        for column in ("system", "done", "accuracy", "errors", "tokens", "cost"):
            table.add_column(column, justify="left" if column == "system" else "right")
        for s in progress.systems.values():
            accuracy = "—" if s.accuracy is None else f"{s.accuracy:.1%}"
            table.add_row(
                s.system,
                f"{s.done}/{s.total}",
                accuracy,
                str(s.errors),
                f"{s.tokens:,}",
                fmt.money(s.cost_usd + s.judge_cost_usd),
            )
        # below the table, not as its caption: a caption wraps at the table's width
        lines = [table, Text(caption, style="dim")]
        if progress.stage:
            lines.append(Text(progress.stage, style="yellow"))
        return Group(*lines)
