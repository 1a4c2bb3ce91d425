"""The compare screen's list of systems to run: a `SelectionList` whose boxes read ● (chosen) and
○ (not chosen), so the choice shows on a monochrome terminal too, not only by the box's colour
(Textual draws the same "X" in both)."""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip
from textual.widgets import SelectionList
from textual.widgets._toggle_button import ToggleButton
from textual.widgets.option_list import OptionDoesNotExist

CHOSEN = "●"
NOT_CHOSEN = "○"


class SystemPicker(SelectionList[str]):
    """A SelectionList of system names with a marker that says, in its shape, whether each is chosen."""

    def render_line(self, y: int) -> Strip:
        line = super().render_line(y)
        try:
            selection = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return line
        segments = list(line)
        # SelectionList draws [left edge, inner mark, right edge, " ", prompt...]: swap the mark.
        if len(segments) > 1 and segments[1].text == ToggleButton.BUTTON_INNER:
            marker = CHOSEN if selection.value in self.selected else NOT_CHOSEN
            segments[1] = Segment(marker, segments[1].style)
        return Strip(segments, line.cell_length)
