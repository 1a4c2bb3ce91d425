"""`Table`: Textual's DataTable whose header always lines up with its rows.

DataTable measures new rows on idle (`_update_dimensions`) and widens its columns then, but its
render caches are keyed by an update counter that this step does not advance. A header (or row)
drawn between `add_row` and that idle stays cached at the old widths until something else clears
the caches (a resize, a cursor move), so the header can sit misaligned above its rows: the bench
report showed it under load. Clearing the caches once the widths are known fixes it; the cost is
one redraw of the visible lines per batch of new rows.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.widgets import DataTable
from textual.widgets.data_table import RowKey


class Table(DataTable):
    """A DataTable that redraws its cached lines once new rows have set the column widths."""

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        super()._update_dimensions(new_rows)
        self._clear_caches()  # nothing drawn at the old widths is drawn again
