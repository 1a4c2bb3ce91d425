"""The footer of every screen: Textual's, with help first, so that F1 stays in sight at 80 columns.

Textual lists the focused widget's keys first and the app's last; a chat screen at 80 columns
showed nine keys before help and cut it off. Help comes first here, whatever is focused; the
rest keeps Textual's order.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

FIRST_ACTIONS = ("help", "app.help")


class StivaFooter(Footer):
    """A `Footer` that shows the help key first."""

    def compose(self) -> ComposeResult:
        # Stiva's bindings have no groups: Footer.compose then yields only plain keys, which can be
        # reordered (a KeyGroup's keys are yielded inside its `with` and would come loose).
        keys = list(super().compose())
        first = [k for k in keys if isinstance(k, FooterKey) and k.action in FIRST_ACTIONS]
        yield from first + [k for k in keys if k not in first]
