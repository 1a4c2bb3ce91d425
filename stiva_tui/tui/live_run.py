"""The run on the chat screen: its `RunState` and the one frame timer that draws it.

    live = LiveRun(tree, detail, status, frozen=False)
    live.attach(screen)                  # the frame timer runs on the screen (paused when idle)
    await live.begin(question, models)   # a new, empty run
    live.handle(event)                   # every engine event, on the UI's event loop
    await live.flush()                   # draw everything still pending (at the end of a run)
    await live.show(state)               # a stored run (RunState.from_trace)

Every event and every stored state is scrubbed on the way in (tui/text.py): an answer, a step's
output, a model id or a provider's error never brings an escape sequence onto the screen, into the
step pane's text or onto the clipboard.

`LiveRun` is the only owner of the state and the only clock: the tree, the step pane and the
status bar draw what it gives them. Structural events (a plan, a step starting or ending) are
drawn at once; a step's text deltas only mark the step dirty, and each frame (20 fps) redraws
the dirty tree labels, streams the new text of the step on show, and updates the totals, so a
flood of tokens costs one redraw per step per frame.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.message_pump import MessagePump
from textual.timer import Timer

from ..core import events as ev
from ..core.run_state import Key, RunState
from .text import scrub
from .widgets.status_bar import RunFigures, StatusBar
from .widgets.step_detail import StepDetail
from .widgets.workflow_tree import WorkflowTree

FRAME_S = 1 / 20
SPINNER_FRAMES = 2  # the spinners turn every other frame (10 fps)
STATUS_WORD = {"running": "running", "failed": "failed", "cancelled": "cancelled", "interrupted": "interrupted"}


class LiveRun:
    """Owns the `RunState` on screen and draws it into a tree, a step pane and a status bar."""

    def __init__(self, tree: WorkflowTree, detail: StepDetail, status: StatusBar, *, frozen: bool = False):
        self.tree = tree
        self.detail = detail
        self.status = status
        self.frozen = frozen  # no clock and no spinning (snapshots)
        self.state = RunState()
        self.frames = 0
        self._dirty: set[Key] = set()
        self._timer: Timer | None = None
        self._host: MessagePump | None = None

    def attach(self, host: MessagePump) -> None:
        """Start the (paused) frame timer on `host`; it runs only while a run streams."""
        self._host = host
        self._timer = host.set_interval(FRAME_S, self.tick, pause=True, name="frame")

    # --- what is shown ---------------------------------------------------------------------------

    async def begin(self, question: str, model_names: Sequence[str] = ()) -> None:
        """Show a new run of `question` that has not started yet."""
        await self.show(RunState(question=question, model_names=list(model_names)))

    async def show(self, state: RunState) -> None:
        """Show `state` in full (a new run, or a stored one) with no step selected; what a model or a
        provider wrote in it is shown without its escape sequences."""
        self.state = state = scrub(state)
        self._dirty.clear()
        self.tree.show(state)
        await self.detail.show(state, None)
        self._draw_figures()

    async def select(self, key: Key) -> None:
        """Show step or plan `key` in the step pane."""
        if key != self.detail.key:
            await self.detail.show(self.state, key)

    def set_model_names(self, names: Sequence[str]) -> None:
        """The pool's model ids in the conductor's numbering: names planned steps before they start."""
        self.state.model_names = list(names)

    # --- events ----------------------------------------------------------------------------------

    def handle(self, event: ev.Event) -> list[Key]:
        """Fold one engine event in (its text without escape sequences); returns the keys that
        changed."""
        keys = self.state.apply(scrub(event))
        self._dirty.update(keys)
        if isinstance(event, (ev.StepDelta, ev.ConductorDelta)):
            return keys  # drawn on the next frame
        self.tree.redraw(keys)
        if isinstance(event, ev.RunStarted) and self._timer is not None:
            self._timer.resume()
        elif isinstance(event, ev.WorkflowReady) and self.detail.key is None and event.workflow.steps:
            self._follow(("step", event.round, 0))
        elif isinstance(event, ev.TERMINAL_EVENTS) and self._timer is not None:
            self._timer.pause()
        return keys

    def _follow(self, key: Key) -> None:
        """Show the first step of a fresh plan, and put the tree's cursor on it."""
        assert self._host is not None
        self._host.call_next(self.select, key)
        self._host.call_after_refresh(self._move_cursor, key)

    def _move_cursor(self, key: Key) -> None:
        node = self.tree.node_for(key)
        if node is not None:
            self.tree.move_cursor(node)

    # --- frames ----------------------------------------------------------------------------------

    async def tick(self) -> None:
        """One frame: redraw dirty labels (and the spinners), stream new text, update the totals."""
        self.frames += 1
        dirty, self._dirty = self._dirty, set()
        labels = set(dirty)
        if not self.frozen and self.frames % SPINNER_FRAMES == 0:
            self.tree.frame = self.frames // SPINNER_FRAMES
            labels.update(self._spinning())
        self.tree.redraw(key for key in labels if key[0] in ("plan", "step"))
        await self.detail.refresh_live(dirty)
        self._draw_figures()

    async def flush(self) -> None:
        """Draw everything pending now, the step pane in full (the run ended)."""
        self._dirty, dirty = set(), self._dirty
        self.tree.redraw(dirty)
        await self.detail.refresh_live(None)
        self._draw_figures()

    def _spinning(self) -> set[Key]:
        keys: set[Key] = set()
        for r in self.state.rounds:
            if r.planning:
                keys.add(("plan", r.round))
            keys.update(("step", s.round, s.index) for s in r.steps if s.status == "running")
        return keys

    def _draw_figures(self) -> None:
        state = self.state
        if state.status == "idle":
            return
        clock = state.totals is not None or not self.frozen
        seconds = round(state.elapsed(), 1) if clock else None
        prompt, completion, cost, estimated = state.live()  # what streams counts too, marked ~
        self.status.figures = RunFigures(
            prompt, completion, cost, seconds, STATUS_WORD.get(state.status, ""), estimated=estimated
        )
