"""One column of compare mode: one system's answer, streaming, with its tokens, cost and latency.

The column consumes the engine's events for its run (`await column.handle(event)`). Only the last
step of the current round is the answer, so only that step's deltas are streamed into the
Markdown (through a `MarkdownStream`); at `RunFinished` the final answer is set once. A reopened
session fills the column from a stored trace instead (`show_trace`).
"""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Label, Markdown, Static

from ...engine import events as ev

CONDUCTOR = "conductor"


def format_money(cost: float) -> str:
    if cost <= 0:
        return "$0"
    if cost < 0.01:
        return f"${cost:.5f}"
    return f"${cost:.4f}"


def format_totals(prompt_tokens: int, completion_tokens: int, cost_usd: float, latency_s: float | None,
                  estimated: bool = False) -> str:
    """'120 in · 45 out tokens · $0.00021 · 1.50 s' (a '~' marks estimated token counts)."""
    approx = "~" if estimated else ""
    parts = [f"{approx}{prompt_tokens} in · {approx}{completion_tokens} out tokens", format_money(cost_usd)]
    if latency_s is not None:
        parts.append(f"{latency_s:.2f} s")
    return " · ".join(parts)


class CompareColumn(Vertical):
    """The answer of one system (`"conductor"` or a pool model id) to the compared question."""

    DEFAULT_CSS = """
    CompareColumn {
        width: 1fr;
        height: 1fr;
        border: round $panel-lighten-2;
        padding: 0 1;
    }
    CompareColumn.-winner { border: heavy $success; }
    CompareColumn > .column-header { height: 1; }
    CompareColumn .column-title { width: 1fr; text-style: bold; }
    CompareColumn .column-status { width: auto; color: $text-muted; }
    CompareColumn > .column-body { height: 1fr; }
    CompareColumn > .column-footer { height: auto; color: $text-muted; }
    CompareColumn > .column-actions { height: auto; }
    CompareColumn .column-actions Button { min-width: 10; margin-right: 1; }
    """

    class VoteRequested(Message):
        """The user marked this column's answer as the better one."""

        def __init__(self, system: str) -> None:
            super().__init__()
            self.system = system

    class TreeRequested(Message):
        """The user asked to see the conductor's workflow tree for this column's run."""

        def __init__(self, system: str, run_id: str | None) -> None:
            super().__init__()
            self.system = system
            self.run_id = run_id

    def __init__(self, system: str, number: int, *, run_id: str | None = None, subtitle: str = "",
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.system = system
        self.number = number
        self.run_id = run_id
        self.subtitle = subtitle
        self.status = "waiting"
        self.answer = ""
        self.finished = False
        self._final_step: tuple[int, int] | None = None  # (round, index) of the answering step
        self._streamed = False
        self._stream: Any = None  # MarkdownStream while the answer streams
        self._live_tokens = (0, 0)
        self._live_cost = 0.0

    def compose(self) -> ComposeResult:
        title = f"{self.number}  {self.system}" + (f"  ({self.subtitle})" if self.subtitle else "")
        with Horizontal(classes="column-header"):
            yield Label(title, classes="column-title", markup=False)
            yield Label(self.status, classes="column-status", markup=False)
        with VerticalScroll(classes="column-body"):
            yield Markdown("", classes="column-answer")
        yield Static("", classes="column-footer", markup=False)
        with Horizontal(classes="column-actions"):
            yield Button(f"Better ({self.number})", classes="column-vote", compact=True)
            if self.system == CONDUCTOR:
                yield Button("Tree", classes="column-tree", compact=True)

    # --- what the screen calls --------------------------------------------------------------------

    def set_status(self, text: str) -> None:
        self.status = text
        if self.is_mounted:
            self.query_one(".column-status", Label).update(text)

    def set_footer(self, text: str) -> None:
        self.query_one(".column-footer", Static).update(text)

    def mark_winner(self, winner: bool) -> None:
        self.set_class(winner, "-winner")
        self.query_one(".column-vote", Button).label = (
            f"Winner ({self.number})" if winner else f"Better ({self.number})")

    async def handle(self, event: ev.Event) -> None:
        """Show one engine event of this column's run."""
        if isinstance(event, ev.RunStarted):
            self.run_id = event.run_id
            self.set_status("planning" if event.mode == "conductor" else "asking")
        elif isinstance(event, ev.RoundStarted):
            if self.system == CONDUCTOR:
                self.set_status(f"round {event.round}: planning")
        elif isinstance(event, ev.WorkflowReady):
            if not event.keep_previous:
                self._final_step = (event.round, len(event.workflow.steps) - 1)
            if self.system == CONDUCTOR:
                steps = len(event.workflow.steps)
                self.set_status(f"round {event.round}: {steps} step{'s' if steps != 1 else ''}")
        elif isinstance(event, ev.StepStarted):
            if (event.round, event.index) == self._final_step:
                if self._streamed:  # a retry or fallback of the answering step starts over
                    await self._restart_answer()
                self.set_status(f"answering ({event.model})")
            else:
                self.set_status(f"step {event.index}: {event.model}")
        elif isinstance(event, ev.StepDelta):
            if (event.round, event.index) == self._final_step:
                await self._write(event.text)
        elif isinstance(event, ev.StepFinished):
            p, c = self._live_tokens
            self._live_tokens = (p + event.usage.prompt_tokens, c + event.usage.completion_tokens)
            self._live_cost += event.cost_usd
            self.set_footer(format_totals(*self._live_tokens, self._live_cost, None, event.usage.estimated))
        elif isinstance(event, ev.StepFailed):
            then = f", trying {event.fallback}" if event.fallback else ""
            self.set_status(f"step {event.index} failed on {event.model}{then}")
        elif isinstance(event, ev.RunFinished):
            await self.show_result("finished", event.answer, event.totals)
        elif isinstance(event, ev.RunFailed):
            await self.show_result("failed", None, event.totals, error=event.error)
        elif isinstance(event, ev.RunCancelled):
            await self.show_result("cancelled", None, event.totals)

    async def show_result(self, status: str, answer: str | None, totals: ev.Totals, *,
                          error: str | None = None) -> None:
        """End the column: the final answer (or the streamed text so far), totals and status."""
        await self._stop_stream()
        if answer is not None:
            self.answer = answer
            await self.query_one(".column-answer", Markdown).update(answer)
        elif error:
            await self.query_one(".column-answer", Markdown).update(
                (self.answer + "\n\n" if self.answer else "") + f"**Error:** {error}")
        self.finished = True
        self.set_status(status)
        self.set_footer(format_totals(totals.prompt_tokens, totals.completion_tokens, totals.cost_usd,
                                      totals.latency_s, totals.estimated))

    async def show_error(self, message: str) -> None:
        """The run could not start (e.g. the conductor failed to load)."""
        await self.show_result("failed", None, ev.Totals(), error=message)

    def mark_cancelled(self) -> None:
        """Called from a cancelled worker: keep the partial text, no awaiting."""
        self.finished = True
        self.set_status("cancelled")

    async def show_trace(self, trace: dict | None) -> None:
        """Fill the column from a stored run trace (a reopened compare session)."""
        if trace is None:
            await self.show_result("missing", None, ev.Totals(), error="this run is not in the history")
            return
        self.run_id = trace.get("run_id") or self.run_id
        totals = ev.Totals(**{k: trace["totals"][k] for k in
                              ("prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "estimated")})
        answer = trace.get("answer")
        if answer is None:
            answer = _partial_answer(trace)
        await self.show_result(trace.get("status") or "finished", answer, totals, error=trace.get("error"))

    # --- streaming --------------------------------------------------------------------------------

    async def _write(self, text: str) -> None:
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(".column-answer", Markdown))
        self._streamed = True
        self.answer += text
        await self._stream.write(text)

    async def _restart_answer(self) -> None:
        await self._stop_stream()
        self.answer = ""
        self._streamed = False
        await self.query_one(".column-answer", Markdown).update("")

    async def _stop_stream(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()

    async def on_unmount(self) -> None:
        await self._stop_stream()

    # --- buttons ----------------------------------------------------------------------------------

    @on(Button.Pressed, ".column-vote")
    def _vote(self, event: Button.Pressed) -> None:
        event.stop()
        self.post_message(self.VoteRequested(self.system))

    @on(Button.Pressed, ".column-tree")
    def _tree(self, event: Button.Pressed) -> None:
        event.stop()
        self.post_message(self.TreeRequested(self.system, self.run_id))


def _partial_answer(trace: dict) -> str:
    """The last step's output of the last round that ran (what a cancelled run had streamed)."""
    for round_ in reversed(trace.get("rounds") or []):
        steps = round_.get("steps") or []
        if steps:
            return steps[-1].get("output") or ""
    return ""
