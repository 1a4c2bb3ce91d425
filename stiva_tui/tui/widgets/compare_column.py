"""One column of compare mode: one system's answer, streaming, with its tokens, cost and latency.

The column consumes the events of its run (`await column.handle(event)`). Only the step that
writes its round's answer (`StepStarted.writes_answer`) streams into the Markdown, through a
`MarkdownStream`; a later round's answering step, or a retry of it, starts the text over. At
`RunFinished` the final answer is set once. A reopened session fills the column from a stored
trace instead (`show_trace`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Label, Markdown, Static
from textual.widgets._markdown import MarkdownStream

from ...core import display as fmt
from ...core import events as ev
from ...core.run_state import RunState
from ..text import safe_text, scrub

if TYPE_CHECKING:
    from ...core.trace import Trace


def format_totals(
    prompt_tokens: int, completion_tokens: int, cost_usd: float, latency_s: float | None, estimated: bool = False
) -> str:
    """'120→45 tok · $0.00021 · 1.5s' (a '~' marks estimated counts); short enough for
    a third of the screen, so it stays on one line."""
    approx = "~" if estimated else ""
    parts = [
        f"{approx}{fmt.tokens(prompt_tokens)}→{approx}{fmt.tokens(completion_tokens)} tok",
        approx + fmt.money(cost_usd),
    ]
    if latency_s is not None:
        parts.append(fmt.seconds(latency_s))
    return " · ".join(parts)


def fit_title(text: str, width: int, lines: int = 2) -> str:
    """`text` on at most `lines` lines of `width`: broken after the last "/" that fits (a provider's
    prefix), else after a space or "-", else anywhere; "…" ends what still does not fit."""
    if width <= 1 or len(text) <= width:
        return text
    out: list[str] = []
    rest = text
    while len(rest) > width and len(out) < lines - 1:
        cut = rest.rfind("/", 0, width)
        if cut < width // 3:
            cut = max(rest.rfind(" ", 0, width), rest.rfind("-", 0, width))
        cut = cut + 1 if cut > 0 else width
        out.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if len(rest) > width:
        rest = rest[: width - 1] + "…"
    return "\n".join([*out, rest])


class CompareColumn(Vertical):
    """The answer of one system ("conductor", "moa", a pool model id, ...) to the compared question."""

    DEFAULT_CSS = """
    CompareColumn {
        width: 1fr;
        height: 1fr;
        border: round $panel-lighten-2;
        padding: 0 1;
    }
    CompareColumn.-winner { border: heavy $success; }
    CompareColumn.-tie { border: heavy $warning; }
    CompareColumn.-all-wrong { border: heavy $error; }
    /* The name has the column's whole width, on up to two lines: at four columns and more a
       provider/model id no longer ends in "…" after a few letters (the tooltip has it all). */
    CompareColumn > .column-title { width: 1fr; height: auto; max-height: 2; text-style: bold;
                                    text-wrap: wrap; text-overflow: ellipsis; }
    CompareColumn > .column-meta { height: 1; }
    CompareColumn .column-status { width: auto; max-width: 60%; text-wrap: nowrap; text-overflow: ellipsis; }
    CompareColumn .column-subtitle { width: 1fr; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis;
                                     margin-left: 2; }
    CompareColumn > .column-body { height: 1fr; }
    CompareColumn > .column-footer { height: auto; color: $text-muted; }
    CompareColumn > .column-actions { height: auto; }
    CompareColumn .column-actions Button { min-width: 10; margin-right: 1; }
    /* Too narrow for the buttons side by side (six systems at 120 columns): one under the other,
       each whole. */
    CompareColumn.-narrow > .column-actions { layout: vertical; }
    CompareColumn.-narrow .column-actions Button { width: 1fr; min-width: 0; margin-right: 0; }
    """

    ACTIONS_WIDTH = 22  # the two buttons side by side: min-width 10 and a margin of 1, each

    class VoteRequested(Message):
        """The user marked this column's answer as the better one."""

        def __init__(self, system: str) -> None:
            super().__init__()
            self.system = system

    class TreeRequested(Message):
        """The user asked to see the workflow tree of this column's run."""

        def __init__(self, system: str, run_id: str | None) -> None:
            super().__init__()
            self.system = system
            self.run_id = run_id

    def __init__(
        self,
        system: str,
        number: int,
        *,
        title: str | None = None,
        run_id: str | None = None,
        subtitle: str = "",
        has_tree: bool = False,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """`title`: how the system is named (default: `system`); `subtitle`: one muted line under it
        (what runs it); `has_tree`: the run has a workflow worth showing (a Tree button)."""
        super().__init__(id=id, classes=classes)
        self.system = system
        self.number = number
        self.title = safe_text(title or system)
        self.run_id = run_id
        self.subtitle = safe_text(subtitle)
        self.has_tree = has_tree
        self.status = "waiting"
        self.answer = ""
        self.finished = False
        self._planned = False  # the run has a conductor: show its rounds in the status
        self._answer_step: tuple[int, int] | None = None  # (round, index) of the step streaming the answer
        self._stream: MarkdownStream | None = None
        self._live = RunState()  # the run's events folded: its counts as they stand, marked ~ while streaming
        self._live_shown = ""

    def compose(self) -> ComposeResult:
        title = Label(f"{self.number}  {self.title}", classes="column-title", markup=False)
        title.tooltip = "\n".join(t for t in (f"{self.number}: {safe_text(self.system)}", self.subtitle) if t)
        yield title
        with Horizontal(classes="column-meta"):  # how the run goes, and what runs it
            yield Label(self.status, classes="column-status", markup=False)
            if self.subtitle:
                yield Label(self.subtitle, classes="column-subtitle", markup=False)
        with VerticalScroll(classes="column-body"):
            yield Markdown("", classes="column-answer")
        yield Static("", classes="column-footer", markup=False)
        with Horizontal(classes="column-actions"):
            yield Button(f"Better ({self.number})", classes="column-vote", compact=True)
            if self.has_tree:
                yield Button("Tree", classes="column-tree", compact=True)

    def on_resize(self) -> None:
        """The name broken where it reads well, for the width the column has now; the buttons one
        under the other where they do not fit side by side."""
        width = self.content_size.width
        self.query_one(".column-title", Label).update(fit_title(f"{self.number}  {self.title}", width))
        self.set_class(width < self.ACTIONS_WIDTH if self.has_tree else width < self.ACTIONS_WIDTH // 2, "-narrow")

    # --- what the screen calls --------------------------------------------------------------------

    def set_status(self, text: str) -> None:
        self.status = text
        if self.is_mounted:
            self.query_one(".column-status", Label).update(text)

    def set_subtitle(self, text: str) -> None:
        """What runs this column, once its run says (a conductor column: the planner it got)."""
        self.subtitle = safe_text(text)
        if self.is_mounted:
            for label in self.query(".column-subtitle").results(Label):
                label.update(self.subtitle)

    def set_footer(self, text: str) -> None:
        self.query_one(".column-footer", Static).update(text)

    def mark_winner(self, winner: bool) -> None:
        self.mark_verdict("winner" if winner else None)

    def mark_verdict(self, verdict: str | None) -> None:
        """How the session's vote judged this column: "winner", "tie" (every answer as good),
        "all_wrong" (none was right), or None (not the winner, or no vote). Told by the border's
        colour and by the button's words, so it reads without colour too."""
        self.set_class(verdict == "winner", "-winner")
        self.set_class(verdict == "tie", "-tie")
        self.set_class(verdict == "all_wrong", "-all-wrong")
        words = {"winner": "Winner", "tie": "Tie", "all_wrong": "All wrong"}.get(verdict or "", "Better")
        self.query_one(".column-vote", Button).label = f"{words} ({self.number})"

    async def handle(self, event: ev.Event) -> None:
        """Show one event of this column's run (its text without escape sequences)."""
        event = scrub(event)
        self._live.apply(event)
        if isinstance(event, (ev.StepDelta, ev.StepFinished)) and not self.finished:
            self._show_live()
        if isinstance(event, ev.RunStarted):
            self.run_id = event.run_id
            self._planned = event.mode == "conductor"
            self.set_status("planning" if self._planned else "asking")
        elif isinstance(event, ev.RoundStarted):
            if self._planned:
                self.set_status(f"round {event.round}: planning")
        elif isinstance(event, ev.WorkflowReady):
            if self._planned:
                steps = len(event.workflow.steps)
                self.set_status(f"round {event.round}: {fmt.count(steps, 'step')}")
        elif isinstance(event, ev.StepStarted):
            await self._step_started(event)
        elif isinstance(event, ev.StepDelta):
            if (event.round, event.index) == self._answer_step:
                await self._write(event.text)
        elif isinstance(event, ev.StepFailed):
            then = f", trying {event.fallback}" if event.fallback else ""
            self.set_status(f"step {fmt.step(event.index)} failed on {event.model}{then}")
        elif isinstance(event, ev.RunFinished):
            await self.show_result("finished", event.answer, event.totals)
        elif isinstance(event, ev.RunFailed):
            await self.show_result("failed", None, event.totals, error=event.error)
        elif isinstance(event, ev.RunCancelled):
            await self.show_result("cancelled", None, event.totals)

    def _show_live(self) -> None:
        """The footer's counts as they stand: what ended calls reported, and what streams (~)."""
        prompt, completion, cost, estimated = self._live.live()
        text = format_totals(prompt, completion, cost, None, estimated)
        if text != self._live_shown:
            self._live_shown = text
            self.set_footer(text)

    async def _step_started(self, event: ev.StepStarted) -> None:
        if not event.writes_answer:
            self.set_status(f"step {fmt.step(event.index)}: {event.model}")
            return
        if self.answer or self._stream is not None:  # a retry, or a later round's answer: start over
            await self._restart_answer()
        self._answer_step = (event.round, event.index)
        self.set_status(f"answering ({event.model})")

    async def show_result(
        self, status: str, answer: str | None, totals: ev.Totals, *, error: str | None = None
    ) -> None:
        """End the column: the final answer (or the streamed text so far), totals and status."""
        answer, error = scrub(answer), scrub(error)
        await self._stop_stream()
        if answer is not None:
            self.answer = answer
            await self.query_one(".column-answer", Markdown).update(answer)
        elif error:
            await self.query_one(".column-answer", Markdown).update(
                (self.answer + "\n\n" if self.answer else "") + f"**Error:** {error}"
            )
        self.finished = True
        self.set_status(status)
        self.set_footer(
            format_totals(
                totals.prompt_tokens, totals.completion_tokens, totals.cost_usd, totals.latency_s, totals.estimated
            )
        )

    async def show_error(self, message: str) -> None:
        """The run could not start (e.g. the conductor failed to load)."""
        await self.show_result("failed", None, ev.Totals(), error=message)

    def mark_cancelled(self) -> None:
        """Called from a cancelled worker: keep the partial text, no awaiting."""
        self.finished = True
        self.set_status("cancelled")

    async def show_trace(self, trace: "Trace | None") -> None:
        """Fill the column from a stored run (a reopened compare session)."""
        if trace is None:
            await self.show_result("missing", None, ev.Totals(), error="this run is not in the history")
            return
        self.run_id = trace.run_id
        t = trace.totals
        totals = ev.Totals(t.prompt_tokens, t.completion_tokens, t.cost_usd, t.latency_s, t.estimated)
        await self.show_result(trace.status, trace.partial_answer(), totals, error=trace.error)

    # --- streaming --------------------------------------------------------------------------------

    async def _write(self, text: str) -> None:
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(".column-answer", Markdown))
        self.answer += text
        await self._stream.write(text)

    async def _restart_answer(self) -> None:
        await self._stop_stream()
        self.answer = ""
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
