"""One stored run on a screen of its own: a bench item's, opened from the bench screen (F12).

Its question and answer on the left, its workflow tree and the step pane on the right, as the chat
screen draws a run; esc goes back to the screen it was opened from, and the chat underneath is
left as it was. The run is read in a thread and arrives as `RunScreen.Loaded` (or `LoadFailed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Static, Tree

from ...core.run_state import RunState
from ..text import scrub
from ..widgets.conversation import ConversationView
from ..widgets.footer import StivaFooter
from ..widgets.step_detail import StepDetail
from ..widgets.workflow_tree import WorkflowTree

if TYPE_CHECKING:
    from ...core.trace import Trace
    from ...store import Store


class RunScreen(Screen):
    """A stored run (question, answer, tree, step pane) over the screen that opened it."""

    CSS_PATH = "run.tcss"
    BINDINGS = [
        Binding("escape", "back", "Back", id="run.back", tooltip="Back to the screen this run was opened from"),
    ]

    state: reactive[RunState | None] = reactive(None, init=False)  # the run, once read

    @dataclass
    class Loaded(Message):
        trace: "Trace"

    @dataclass
    class LoadFailed(Message):
        error: str

    def __init__(self, store: "Store | None", run_id: str) -> None:
        super().__init__()
        self.store = store
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        yield Static(f"Run {self.run_id}", id="run-title", markup=False)
        with Horizontal(id="run-main"):
            yield ConversationView(id="run-conversation")
            with Vertical(id="run-workflow"):
                yield WorkflowTree(id="run-tree")
                yield StepDetail(id="run-detail")
        yield StivaFooter()

    def on_mount(self) -> None:
        self._load()

    def action_back(self) -> None:
        self.dismiss()

    @work(thread=True, exclusive=True, group="run-load", exit_on_error=False)
    def _load(self) -> None:
        from ...store import NotFoundError

        if self.store is None:
            self.post_message(self.LoadFailed("there is no history to read the run from"))
            return
        try:
            self.post_message(self.Loaded(self.store.get_trace(self.run_id)))
        except NotFoundError:
            self.post_message(self.LoadFailed(f"run {self.run_id} is no longer in the history"))
        except Exception as exc:  # an unreadable history: say so, stay open
            self.post_message(self.LoadFailed(str(exc)))

    @on(Loaded)
    async def _loaded(self, message: Loaded) -> None:
        trace = scrub(message.trace)  # what models and providers wrote, without escape sequences
        self.query_one("#run-title", Static).update(
            f"Run {trace.run_id} · {trace.system} · {trace.status} · {trace.created_at[:16].replace('T', ' ')} UTC"
        )
        await self.query_one(ConversationView).show_run(trace)
        self.state = RunState.from_trace(trace)

    @on(LoadFailed)
    def _load_failed(self, message: LoadFailed) -> None:
        self.query_one("#run-title", Static).update(f"Cannot show the run: {message.error}")

    async def watch_state(self, state: RunState | None) -> None:
        if state is None:
            return
        tree = self.query_one(WorkflowTree)
        tree.show(state)
        await self.query_one(StepDetail).show(state, None)
        tree.focus()

    @on(Tree.NodeHighlighted, "#run-tree")
    @on(Tree.NodeSelected, "#run-tree")
    async def _node_chosen(self, message: Tree.NodeHighlighted) -> None:
        key = message.node.data
        if self.state is not None and key and key[0] in ("step", "plan"):
            await self.query_one(StepDetail).show(self.state, key)
