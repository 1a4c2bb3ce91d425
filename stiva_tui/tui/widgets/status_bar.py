"""One line under the chat: the run's totals, the conductor (and why it was chosen), load progress.

The bar is reactive state: its owner sets `figures`, `conductor`, `message`, `load_message`,
`load_fraction` and `load_shown`, and the bar draws itself from them. Nothing calls into its parts.
(Not `loading`: that is Textual's own `Widget.loading`, which would cover the whole bar, the
stage text and the progress, with a pulsing indicator for the minutes of a first load.)

Where the bar is too narrow for all of it, it keeps its most important words and drops the least
important first: the run's figures stay whole (then lose their time, then their label); then the
pool's kind (a simulated or recorded pool), the preference, the conductor's backend and model;
the conductor's reason goes first, then its facts, then what changed, each cut with "…" where a
part of it still fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from ...core import display as fmt

BACKEND_WORDS = {
    "local": "local GPU 4-bit",
    "embedded": "embedded CPU",
    "remote": "remote",
}


@dataclass(frozen=True)
class RunFigures:
    """Tokens in→out, cost and time of the run on screen, and a word for its state."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float | None = None  # None: no clock (frozen mode, or nothing ran)
    label: str = ""  # "running", "failed", "cancelled", "new chat"; "" once finished
    estimated: bool = False  # the counts include an estimate (a stream still going, or no usage sent)

    def text(self, width: int = 0) -> str:
        """`label · tokens · cost · time`; within `width` cells where given: the time goes first,
        then the label; the tokens and the cost stay."""
        whole = self._text(True, True)
        if not width or len(whole) <= width:
            return whole
        without_time = self._text(True, False)
        return without_time if len(without_time) <= width else self._text(False, False)

    def _text(self, label: bool, seconds: bool) -> str:
        mark = "~" if self.estimated else ""
        parts = [
            f"{mark}{fmt.tokens(self.prompt_tokens)}→{fmt.tokens(self.completion_tokens)} tok",
            f"{mark}{fmt.money(self.cost_usd)}",
        ]
        if self.seconds is not None and seconds:
            parts.append(fmt.seconds(self.seconds))
        if self.label and label:
            parts.insert(0, self.label)
        return " · ".join(parts)


@dataclass(frozen=True)
class ConductorLine:
    """Which conductor plans: its backend and model, why it was chosen, and what it runs on."""

    backend: str | None
    model: str | None
    reason: str = ""
    facts: str = ""
    change: str = ""  # chosen again when the pool changed, and another than before: why, said first

    def content(self, width: int = 0) -> Content:
        """The line, within `width` cells where given (0: whole): the reason is cut or dropped
        first, then the facts, then the change; the backend and the model stay longest."""
        words = BACKEND_WORDS.get(self.backend or "", self.backend or "?")
        # Spaces close a styled run instead of opening the next one (see tui/screenshot.py).
        head: list[str | tuple[str, str]] = ["conductor: ", (f"{words} ", "bold"), self.model or ""]
        if width and Content.assemble(*head).cell_length > width:
            return Content(_cut(f"{words} {self.model or ''}", width)) if width >= 8 else Content("")
        parts = list(head)
        left = width - Content.assemble(*parts).cell_length if width else 0
        for text, style in self._extras():
            piece = f" {text}"
            if width and len(piece) > left:
                if left >= 12:  # some of it still says something
                    parts += [" ", (_cut(text, left - 1), style)]
                break
            parts += [" ", (text, style)]
            left -= len(piece)
        return Content.assemble(*parts)

    def _extras(self) -> list[tuple[str, str]]:
        """What follows the model, most important first: the change, the facts, the reason."""
        extras: list[tuple[str, str]] = []
        if self.change:
            extras.append((f"— {self.change}", "bold"))
        dash = "·" if self.change else "—"
        for text in (self.facts, self.reason):
            if text:
                extras.append((f"{dash} {text}", "dim"))
                dash = "·"
        return extras


def _cut(text: str, width: int) -> str:
    """`text` within `width` cells, cut at a word where one ends near, with "…"."""
    if len(text) <= width:
        return text
    cut = text[: max(1, width - 1)]
    space = cut.rfind(" ")
    if space >= width * 2 // 3:
        cut = cut[:space]
    return cut.rstrip(" ·—,") + "…"


class StatusBar(Horizontal):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    StatusBar > #status-totals { width: auto; margin-right: 2; color: $text; }
    StatusBar > #status-prefer { width: auto; margin-right: 2; color: $accent; text-style: bold; }
    StatusBar > #status-pool { width: auto; margin-right: 2; color: $warning; text-style: bold; }
    StatusBar > #status-conductor { width: 1fr; }
    StatusBar > #status-load { width: auto; margin-right: 1; }
    StatusBar > ProgressBar { width: 30; }
    StatusBar > .-hidden { display: none; }
    """

    figures: reactive[RunFigures | None] = reactive(None)
    """The run on screen; None before the first question."""
    conductor: reactive[ConductorLine | None] = reactive(None)
    """The conductor once chosen."""
    message: reactive[str] = reactive("conductor: starting…")
    """Shown in place of the conductor line while set (starting, errors)."""
    load_message: reactive[str] = reactive("")
    load_fraction: reactive[float | None] = reactive(None)
    """Load progress in [0, 1]; None: the loader cannot tell (the bar pulses)."""
    load_shown: reactive[bool] = reactive(False)
    """Whether the load message and the progress bar (with its percent and ETA) show."""
    prefer: reactive[str] = reactive("")
    """The next question's cost and latency preference ("cheap"); "" for none (not shown)."""
    pool_label: reactive[str] = reactive("")
    """"simulated pool" or "recorded pool (bench ID)" when the pool is not real models; "" for none."""

    def compose(self) -> ComposeResult:
        yield Static("no run yet", id="status-totals", markup=False)
        yield Static("", id="status-prefer", classes="-hidden", markup=False)
        yield Static("", id="status-pool", classes="-hidden", markup=False)
        yield Static("", id="status-conductor")
        yield Static("", id="status-load", classes="-hidden", markup=False)
        # The progress bar (four widgets) is mounted when a load first shows (`_draw_load`): the
        # app's first frame, which has none, shows sooner.

    def on_mount(self) -> None:
        self._draw_all()

    def on_resize(self) -> None:
        self._draw_all()

    def _width(self) -> int:
        """The cells inside the bar; 0 before the first layout (everything drawn whole)."""
        return max(0, self.size.width - 2) if self.size.width else 0

    def _figures_text(self) -> str:
        figures = self.figures
        return figures.text(self._width()) if figures else "no run yet"

    def _conductor_room(self) -> int:
        """What the conductor's line has: the bar less the figures, the pool's kind and the
        preference (each with its margin); 0 for no limit (no width known yet), -1 for none."""
        width = self._width()
        if not width:
            return 0
        used = len(self._figures_text()) + 2
        if self.pool_label:
            used += len(self.pool_label) + 2
        if self.prefer:
            used += len(f"prefer {self.prefer}") + 2
        return width - used if width > used else -1

    # The owner may set these before the bar's parts exist (its own mount runs later): each
    # watcher then does nothing, and on_mount draws everything once they do.

    def watch_figures(self, old: RunFigures | None, new: RunFigures | None) -> None:
        if self.is_mounted:
            self._draw_figures()
            if old is None or new is None or len(old.text()) != len(new.text()):
                self._draw_conductor()  # the figures' width moved: the conductor's room with it

    def watch_conductor(self) -> None:
        if self.is_mounted:
            self._draw_conductor()

    def watch_message(self) -> None:
        if self.is_mounted:
            self._draw_conductor()

    def watch_load_message(self) -> None:
        if self.is_mounted:
            self._draw_load()

    def watch_load_fraction(self) -> None:
        if self.is_mounted:
            self._draw_load()

    def watch_load_shown(self) -> None:
        if self.is_mounted:
            self._draw_load()

    def watch_prefer(self) -> None:
        if self.is_mounted:
            self._draw_prefer()
            self._draw_conductor()

    def watch_pool_label(self) -> None:
        if self.is_mounted:
            self._draw_pool()
            self._draw_conductor()

    def _draw_pool(self) -> None:
        label = self.query_one("#status-pool", Static)
        from ...sim.labels import loud

        label.update(loud(self.pool_label))  # "RECORDED POOL (bench ID)": the kind in capitals
        label.set_class(not self.pool_label, "-hidden")

    def _draw_prefer(self) -> None:
        label = self.query_one("#status-prefer", Static)
        label.update(f"prefer {self.prefer}")
        label.set_class(not self.prefer, "-hidden")

    def _draw_all(self) -> None:
        self._draw_figures()
        self._draw_conductor()
        self._draw_load()
        self._draw_prefer()
        self._draw_pool()

    def _draw_figures(self) -> None:
        self.query_one("#status-totals", Static).update(self._figures_text())

    def _draw_conductor(self) -> None:
        line = self.query_one("#status-conductor", Static)
        room = self._conductor_room()
        if room < 0:
            line.update(Content(""))
        elif self.message or self.conductor is None:
            line.update(Content(_cut(self.message, room) if room else self.message))
        else:
            line.update(self.conductor.content(room))

    def _draw_load(self) -> None:
        from textual.widgets import ProgressBar

        label = self.query_one("#status-load", Static)
        label.update(self.load_message)
        label.set_class(not self.load_shown, "-hidden")
        bars = self.query("#status-progress").results(ProgressBar)
        bar = next(bars, None)
        if bar is None and self.load_shown:
            bar = ProgressBar(total=1.0, show_eta=True, show_percentage=True, id="status-progress")
            self.mount(bar)
        if bar is not None:
            fraction = self.load_fraction
            bar.update(total=None if fraction is None else 1.0, progress=fraction or 0.0)
            bar.set_class(not self.load_shown, "-hidden")
        # While a load shows, its message says what the conductor is waiting for; at 80 columns the
        # load and its bar leave the conductor's line a cell or two ("c"), so it steps aside.
        self.query_one("#status-conductor", Static).set_class(self.load_shown, "-hidden")
