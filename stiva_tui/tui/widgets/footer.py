"""The footer of every screen: Textual's, with help first, so that F1 stays in sight at 80 columns,
and no key cut in half.

Textual lists the focused widget's keys first and the app's last; a chat screen at 80 columns
showed nine keys before help and cut it off. Help comes first here, whatever is focused; the
rest keeps Textual's order. Where not every key fits, none is cut ("f4 Poo" at 120 columns):
the exports are left out first (F1 and the palette list them), then the keys at the end.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

FIRST_ACTIONS = ("help", "app.help")
LAST_ACTIONS = ("export('md')", "export('json')")
PALETTE_EXTRA = 2  # the palette key's border and right padding


def key_width(key: FooterKey, compact: bool) -> int:
    """The cells `key` takes: " key " then "description ", or compact "key description"."""
    width = cell_len(key.key_display) + (0 if compact else 2)
    return width + cell_len(key.description) + 1 if key.description else width


class StivaFooter(Footer):
    """A `Footer` that shows the help key first, and only keys that fit whole."""

    def compose(self) -> ComposeResult:
        # Stiva's bindings have no groups: Footer.compose then yields only plain keys, which can be
        # reordered (a KeyGroup's keys are yielded inside its `with` and would come loose).
        keys = list(super().compose())
        first = [k for k in keys if isinstance(k, FooterKey) and k.action in FIRST_ACTIONS]
        palette = [k for k in keys if k.has_class("-command-palette")]
        shown = first + [k for k in keys if k not in first and k not in palette]
        yield from self._fit(shown, palette) + palette

    def _fit(self, keys: list, palette: list) -> list:
        """The keys that fit whole beside the palette's, in order; the exports go first."""
        room = self.size.width
        if not room:  # before the first layout: everything, fitted on the first resize
            return keys
        # the palette's key is compact, whatever the footer is (Textual binds only the others')
        room -= sum(key_width(k, True) + PALETTE_EXTRA for k in palette if isinstance(k, FooterKey))
        widths = [key_width(k, self.compact) if isinstance(k, FooterKey) else 0 for k in keys]
        if sum(widths) <= room:
            return keys
        kept = [(k, w) for k, w in zip(keys, widths) if getattr(k, "action", None) not in LAST_ACTIONS]
        fitted = []
        for key, width in kept:
            if width > room:
                break
            room -= width
            fitted.append(key)
        return fitted

    def on_resize(self) -> None:
        if self._bindings_ready:
            self.call_after_refresh(self.recompose)
