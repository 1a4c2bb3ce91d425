"""The Stiva terminal app: the chat screen first, everything else a key or a palette command away.

    run_app(config, conductor_override=None) -> exit code      # what `stiva` calls

Start-up paints the chat screen before anything slow happens: the Runtime (pool discovery, the
store) is built in a worker after mount, and the conductor loads in a thread with its progress in
the status bar. The prompt works meanwhile; a question sent early waits for the load.
Other screens are imported when first opened.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.binding import Binding

from .commands import StivaCommands
from .state import load_state, save_state
from .themes import DEFAULT_THEME, load_themes

if TYPE_CHECKING:
    from ..config import Config
    from ..runtime import Runtime
    from .screens.chat import ChatScreen

FIRST_RUN_NOTICE = ("No API keys found — running offline on the embedded Gemma 270M. "
                    "Add models in {config} or press F5 for keys.")


class StivaApp(App):
    CSS_PATH = ["app.tcss", "screens/chat.tcss"]
    TITLE = "Stiva"
    COMMANDS = App.COMMANDS | {StivaCommands}

    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", tooltip="Quit Stiva", priority=True),
        Binding("f1,question_mark", "help", "Help", id="help", tooltip="Every key binding and command"),
        Binding("f3", "compare", "Compare", id="compare",
                tooltip="Run the question on the conductor, single models and MoA side by side"),
        Binding("f4", "pool", "Pool", id="pool", tooltip="The models in the pool and why each is (un)available"),
        Binding("f5", "keys", "Keys", id="keys", tooltip="Add or remove API keys"),
        Binding("f6", "leaderboard", "Leaderboard", id="leaderboard", show=False, priority=True,
                tooltip="Wins from compare votes"),
    ]

    def __init__(self, config: "Config", runtime: "Runtime | None" = None, conductor: str | None = None,
                 *, frozen: bool | None = None):
        super().__init__()
        self.config = config
        self.runtime = runtime
        self.conductor_override = conductor
        self._owns_runtime = runtime is None
        # Frozen: no clocks or spinners on screen (snapshot tests and screenshots).
        self.frozen = os.environ.get("STIVA_TUI_FROZEN") == "1" if frozen is None else frozen
        self.keymap: dict[str, str] = dict(config.keymap)
        self.startup_error: str | None = None
        self._runtime_ready = asyncio.Event()
        self._chat: ChatScreen | None = None
        for theme in load_themes():
            self.register_theme(theme)

    # --- start-up ------------------------------------------------------------------------------

    def get_default_screen(self) -> "ChatScreen":
        from .screens.chat import ChatScreen

        self._chat = ChatScreen()
        return self._chat

    @property
    def chat_screen(self) -> "ChatScreen":
        assert self._chat is not None
        return self._chat

    def on_mount(self) -> None:
        self.theme = self._initial_theme()
        self.theme_changed_signal.subscribe(self, lambda theme: save_state(theme=theme.name))
        if self.keymap:
            self.set_keymap(self.keymap)

    def chat_ready(self) -> None:
        """Called by the chat screen once mounted: now build the runtime and load the conductor."""
        self.run_worker(self._start(), name="startup", group="startup", exit_on_error=False)

    def _initial_theme(self) -> str:
        wanted = self.config.theme or load_state().get("theme") or DEFAULT_THEME
        if wanted not in self.available_themes:
            self.notify(f"Unknown theme {wanted!r}; using {DEFAULT_THEME}.", severity="warning")
            wanted = DEFAULT_THEME
        return wanted

    async def _start(self) -> None:
        status = self.chat_screen.status_bar
        try:
            if self.runtime is None:
                status.set_message("starting: building the pool…")
                # Imported in a thread: the engine, httpx and the store take ~0.1 s to import, which
                # on the event loop would hold up the first keys the user types.
                runtime_module = await asyncio.to_thread(importlib.import_module, "stiva_tui.runtime")
                self.runtime = await runtime_module.Runtime.create(self.config, conductor=self.conductor_override)
        except Exception as exc:
            self.startup_error = str(exc)
            status.set_message(f"cannot start: {exc}")
            self.notify(str(exc), title="Stiva cannot start", severity="error", timeout=30)
            self._runtime_ready.set()
            return
        self._runtime_ready.set()
        if all(m.kind == "embedded" for m in self.runtime.models):
            from .. import paths

            self.chat_screen.set_notice(FIRST_RUN_NOTICE.format(config=paths.config_file()))
        await self._load_conductor()

    async def _load_conductor(self) -> None:
        status = self.chat_screen.status_bar
        if self.runtime.conductor is None:
            status.set_message("conductor: loading…")
        try:
            conductor = await self._ready_conductor(self.runtime)
        except Exception as exc:
            status.loading_done()
            status.set_message(f"conductor failed to load: {exc}")
            self.notify(str(exc), title="Conductor", severity="error", timeout=30)
            return
        status.loading_done()
        status.set_conductor(conductor.backend, conductor.model, self.runtime.conductor_reason)

    def _progress(self, fraction: float | None, message: str) -> None:
        """Load progress; called from the loading thread (or this loop)."""
        update = lambda: self.chat_screen.status_bar.set_loading(fraction, message)  # noqa: E731
        if self._thread_id == _thread_ident():
            update()
        else:
            self.call_from_thread(update)

    async def _ready_conductor(self, runtime: "Runtime"):
        """Choose the conductor, then load its weights (local backends) in a thread, once."""
        conductor = await runtime.ensure_conductor(self._progress)
        load = getattr(conductor, "load", None)
        if load is not None and not getattr(conductor, "loaded", True):
            await load(self._progress)
        return conductor

    @property
    def conductor_ready(self) -> bool:
        conductor = self.runtime.conductor if self.runtime is not None else None
        return conductor is not None and getattr(conductor, "loaded", True)

    @property
    def conductor_reason(self) -> str:
        return self.runtime.conductor_reason if self.runtime else ""

    async def wait_runtime(self) -> "Runtime":
        await self._runtime_ready.wait()
        if self.runtime is None:
            raise RuntimeError(self.startup_error or "Stiva did not start")
        return self.runtime

    async def wait_conductor(self) -> "Runtime":
        """The runtime once its conductor is loaded (waits for a load in progress; raises on failure)."""
        runtime = await self.wait_runtime()
        await self._ready_conductor(runtime)
        return runtime

    async def on_unmount(self) -> None:
        if self._owns_runtime and self.runtime is not None:
            await self.runtime.aclose()

    # --- actions -------------------------------------------------------------------------------

    def copy_text(self, text: str) -> str:
        from .clipboard import copy_text

        return copy_text(self, text)

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_compare(self, session_id: str | None = None) -> None:
        screen = self._other_screen("compare", "CompareScreen", lambda cls, rt: cls(rt, session_id=session_id))
        if screen is not None:
            self.push_screen(screen)

    def action_pool(self) -> None:
        screen = self._other_screen("pool", "PoolScreen", lambda cls, rt: cls(rt))
        if screen is not None:
            self.push_screen(screen)

    def action_keys(self) -> None:
        screen = self._other_screen("keys", "KeysScreen", lambda cls, rt: cls(rt))
        if screen is not None:
            self.push_screen(screen)

    def action_leaderboard(self) -> None:
        screen = self._other_screen("leaderboard", "LeaderboardScreen", lambda cls, rt: cls(rt.store))
        if screen is not None:
            self.push_screen(screen)

    def _other_screen(self, module: str, name: str, build: Any):
        """Import a screen only when it is first opened; None (with a notice) if it cannot open yet."""
        import importlib

        if self.runtime is None:
            self.notify("Stiva is still starting; try again in a moment.", severity="warning")
            return None
        if type(self.screen).__name__ == name:
            return None
        try:
            cls = getattr(importlib.import_module(f".screens.{module}", __package__), name)
        except (ImportError, AttributeError):
            self.notify(f"The {module} screen is not available in this build.", severity="warning")
            return None
        return build(cls, self.runtime)


def _thread_ident() -> int:
    import threading

    return threading.get_ident()


def run_app(config: "Config", conductor_override: str | None = None) -> int:
    """Run the app until the user quits; the process exit code."""
    app = StivaApp(config, conductor=conductor_override)
    app.run()
    return app.return_code or 0
