"""The workflow tree of one stored run, over the screen that opened it (compare mode's Tree)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen

from ...core.run_state import RunState
from ..text import scrub
from ..widgets.workflow_tree import WorkflowTree

if TYPE_CHECKING:
    from ...core.trace import Trace


class RunTreeScreen(ModalScreen[None]):
    """A stored run drawn by the chat screen's `WorkflowTree`, from `RunState.from_trace`."""

    DEFAULT_CSS = """
    RunTreeScreen { align: center middle; }
    RunTreeScreen > #tree-frame {
        width: 90%; height: 85%; border: round $accent; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape", "dismiss", "Close", id="compare.tree_close", tooltip="Close the tree")]

    def __init__(self, trace: "Trace") -> None:
        super().__init__()
        self.trace = trace

    def compose(self) -> ComposeResult:
        with Vertical(id="tree-frame"):
            yield WorkflowTree(RunState.from_trace(scrub(self.trace)), id="run-tree")
