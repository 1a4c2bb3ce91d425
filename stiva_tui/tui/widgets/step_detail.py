"""The pane under the tree: the selected step's full subtask and output (or the plan's reasoning).

    await detail.show(state, key)          # show ("step", r, i) or ("plan", r) of a RunState
    await detail.refresh_live(changed)     # each frame: stream what `changed` added

The pane only draws the state it is given. While the step runs its output streams in through a
`MarkdownStream` (only the new text is written each frame); when it ends the Markdown is set
once to the full output.
"""

from __future__ import annotations

import asyncio

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static

from ...core import display as fmt
from ...core.run_state import Key, RunState
from ...engine.fork import KEPT_NOTE
from ..text import markup_text, one_line

LONG_MODEL = 24  # a model id longer than this has the header's second line to itself
PLACEHOLDER = "_Select a step in the tree to read its subtask and output._"


class StepDetail(VerticalScroll):
    """Shows one node of a RunState: a step or a round's plan."""

    DEFAULT_CSS = """
    StepDetail { height: 1fr; }
    StepDetail > #detail-header { padding: 0 1; color: $text-muted; }
    StepDetail > Markdown { margin: 0; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.key: Key | None = None
        self.state: RunState | None = None
        self._stream = None
        self._shown = 0  # characters of the output already in the Markdown
        self._shown_status = ""  # the status of the node when its text was last drawn in full
        # show() and refresh_live() await inside; one at a time keeps one stream per pane.
        self._lock = asyncio.Lock()

    def compose(self) -> ComposeResult:
        yield Static("", id="detail-header")
        yield Markdown(PLACEHOLDER, id="detail-body")

    @property
    def text(self) -> str:
        """The full text shown (what 'copy step output' copies)."""
        if self.state is None or self.key is None:
            return ""
        return _body_text(self.state, self.key)

    async def show(self, state: RunState, key: Key | None) -> None:
        """Show `key` of `state` (a ("step", r, i) or ("plan", r) key)."""
        async with self._lock:
            await self._show(state, key)

    async def _show(self, state: RunState, key: Key | None) -> None:
        await self._stop_stream()
        self.state, self.key = state, key
        body = self.query_one("#detail-body", Markdown)
        if key is None or key[0] not in ("step", "plan"):
            self.query_one("#detail-header", Static).update("")
            await body.update(PLACEHOLDER)
            return
        self._update_header()
        text = _body_text(state, key)
        self._shown_status = _status(state, key)
        await body.update(text or _empty_text(state, key))
        self._shown = len(text)
        if self._is_live():
            self._stream = Markdown.get_stream(body)

    async def refresh_live(self, changed: set[Key] | None = None) -> None:
        """Called every frame while a run goes: stream the new text, or finish when it ended."""
        async with self._lock:
            await self._refresh_live(changed)

    async def _refresh_live(self, changed: set[Key] | None) -> None:
        if self.state is None or self.key is None or (changed is not None and self.key not in changed):
            return
        self._update_header()
        if self._stream is None:
            # A waiting step just started; or the step ended while its pane was being drawn (a
            # fast one): the text drawn is not the one it has now.
            if self._is_live() or _status(self.state, self.key) != self._shown_status:
                await self._show(self.state, self.key)
            return
        text = _body_text(self.state, self.key)
        if not self._is_live():
            await self._stop_stream()
            await self.query_one("#detail-body", Markdown).update(text or _empty_text(self.state, self.key))
            self._shown = len(text)
            return
        if len(text) < self._shown:  # a retry started over
            await self._show(self.state, self.key)
            return
        if len(text) > self._shown:
            if self._shown == 0:
                await self.query_one("#detail-body", Markdown).update("")
            following = self.is_vertical_scroll_end
            await self._stream.write(text[self._shown :])
            self._shown = len(text)
            if following:
                self.call_after_refresh(self.scroll_end, animate=False)

    async def _stop_stream(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()

    def _is_live(self) -> bool:
        assert self.state is not None and self.key is not None
        if self.key[0] == "plan":
            return self.state.round(self.key[1]).planning and self.state.status == "running"
        return self.state.step(self.key[1], self.key[2]).status == "running"

    def _update_header(self) -> None:
        assert self.state is not None and self.key is not None
        self.query_one("#detail-header", Static).update(_header(self.state, self.key))


def _header(state: RunState, key: Key) -> str:
    """Console markup; everything that came from a model, a provider or the user is made printable
    and escaped (`markup_text`: a lone "[" in a provider's error must not break the header)."""
    if key[0] == "plan":
        r = state.round(key[1])
        who = markup_text(f"{state.conductor_model or 'conductor'} ({state.conductor_backend or '?'})")
        status = "planning…" if r.planning else fmt.count(len(r.steps), "step")
        lines = [f"[b]Plan, round {r.round} [/b]· {who} · {status}"]
        if not r.planning and (r.prompt_tokens or r.completion_tokens):
            mark = "~" if r.estimated else ""
            seconds = f" · {fmt.seconds(r.latency_s)}" if r.latency_s else ""
            lines.append(f"{mark}{r.prompt_tokens}→{r.completion_tokens} tok{seconds}")
        if r.expected_cost is not None:
            lines.append(f"expected cost of its steps, before any call: {fmt.money(r.expected_cost)}")
        if r.budget_note:
            lines.append(f"[$warning]budget: {markup_text(r.budget_note)}[/]")
        return "\n".join(lines)
    s = state.step(key[1], key[2])
    reads = fmt.reads(s.index, s.access, s.access_all) or "← the question only"
    # A space closes a styled run rather than opening the next (see tui/screenshot.py). A long
    # model id has a line of its own: it wraps there, not through the status.
    model = markup_text(s.model or "…")
    if len(s.model) > LONG_MODEL:
        lines = [f"[b]Step {fmt.step(s.index)} [/b]· {s.status} · {reads}", model]
    else:
        lines = [f"[b]Step {fmt.step(s.index)} [/b]· {model} · {s.status} · {reads}"]
    if s.status == "finished" and s.note == KEPT_NOTE:  # a branch's step not run again (engine/fork.py)
        lines.append("kept from the run: not called or paid again")
    elif figures := _figures(s):
        lines.append(figures)
    for f in s.failures:
        to = f" → {markup_text(f.fallback)}" if f.fallback else ""
        error = markup_text(one_line(f.error, 120))
        lines.append(f"[$error]✗ {markup_text(f.model)} attempt {f.attempt}: [/]{error}{to}")
    lines.append(f"[i]Subtask: [/i]{markup_text(s.subtask)}")
    return "\n".join(lines)


def _figures(s) -> str:
    """The step's tokens, cost and time as they stand, and the plan's estimate beside them; "~"
    marks an estimate (a stream still going, a call stopped before its count came)."""
    expected = (
        f"est {fmt.money(s.expected_cost)} ({s.expected_prompt}→{s.expected_completion} tok)"
        if s.expected_cost is not None and s.status != "skipped"
        else ""
    )
    if s.status == "running":
        prompt, completion, cost = s.live()
        spent = f"~{prompt}→{completion} tok · ~{fmt.money(cost)}" if prompt or completion else ""
    elif s.status == "finished" or (s.estimated and s.completion_tokens):
        mark = "~" if s.estimated else ""
        spent = f"{mark}{s.prompt_tokens}→{s.completion_tokens} tok · {mark}{fmt.money(s.cost_usd)}"
        if s.latency_s is not None:
            spent += f" · {fmt.seconds(s.latency_s)}"
    else:
        spent = ""
    return " · ".join(part for part in (spent, expected) if part)


def _status(state: RunState, key: Key) -> str:
    if key[0] == "plan":
        return "planning" if state.round(key[1]).planning else "planned"
    return state.step(key[1], key[2]).status


def _body_text(state: RunState, key: Key) -> str:
    if key[0] == "plan":
        return state.round(key[1]).conductor_text
    return state.step(key[1], key[2]).output


def _empty_text(state: RunState, key: Key) -> str:
    if key[0] == "plan":
        return "_The conductor is writing its plan…_" if state.round(key[1]).planning else "_(no reasoning)_"
    s = state.step(key[1], key[2])
    if s.status == "waiting":
        reads = fmt.reads(s.index, s.access, s.access_all).removeprefix("← ")
        return f"_Waiting for step(s) {reads}…_" if reads else "_Waiting to start…_"
    if s.status == "running":
        return "_Waiting for the first tokens…_"
    return "_(no output)_"
