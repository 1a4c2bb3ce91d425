"""The Stiva terminal app: the chat screen first, everything else a key or a palette command away.

    run_app(config, conductor_override=None) -> exit code      # what `stiva` calls

Start-up paints the chat screen before anything slow happens. Then two workers run: one builds
the `Runtime` (pool discovery, the history), importing the runtime module off the event loop;
the next chooses and loads the conductor, in a thread where it is a local model. They report to
the chat screen with typed messages (`messages.py`): RuntimeReady or StartupFailed, then
ConductorProgress while loading, then ConductorReady or ConductorFailed. The prompt works
meanwhile; a question sent early waits for them.

Other screens are imported when first opened, and get the runtime when they are made.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import App
from textual.binding import Binding

from . import messages as msg
from .bindings import effective_keymap
from .commands import StivaCommands
from .screenshot import preserve_spaces
from .state import load_state, save_state
from .text import TerminalSafe, safe_text
from .themes import DEFAULT_THEME, load_themes

if TYPE_CHECKING:
    from textual.filter import LineFilter
    from textual.notifications import SeverityLevel
    from textual.screen import Screen

    from ..config import Config
    from ..runtime import Runtime
    from ..runtime.model_process import ModelProcess
    from .screens.chat import ChatScreen


# What the app reads of the config before its first frame, as `Config()` has it: the app started
# with no config file (config None) uses these, and builds `Config()` itself once it shows
# (pydantic's import and the models' building take ~0.1 s). tests/test_first_paint.py compares them.
DEFAULT_SETTINGS: dict = {"keymap": {}, "theme": None, "enter_sends": False}


class StivaApp(App):
    CSS_PATH = ["app.tcss", "screens/chat.tcss"]
    TITLE = "Stiva"
    COMMANDS = App.COMMANDS | {StivaCommands}

    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", tooltip="Quit Stiva", priority=True),
        Binding("f1,question_mark", "help", "Help", id="help", tooltip="Every key binding and command"),
        Binding(
            "f3",
            "compare",
            "Compare",
            id="compare",
            tooltip="Run the question on the conductor, single models and MoA side by side",
        ),
        Binding("f4", "pool", "Pool", id="pool", tooltip="The models in the pool and why each is (un)available"),
        Binding("f5", "keys", "Keys", id="keys", tooltip="Add or remove API keys"),
        Binding(
            "f6",
            "leaderboard",
            "Leaderboard",
            id="leaderboard",
            show=False,
            priority=True,
            tooltip="Wins from compare votes",
        ),
        # ctrl+l: macOS and many terminals take F10-F12 for themselves
        Binding(
            "f12,ctrl+l",
            "bench",
            "Benches",
            id="bench",
            show=False,
            tooltip="Reports of `stiva bench`: accuracy, cost, latency and the frontier per system",
        ),
    ]

    def __init__(
        self,
        config: "Config | None",
        runtime: "Runtime | None" = None,
        conductor: str | None = None,
        *,
        frozen: bool | None = None,
        collect_after_first_frame: bool = False,
    ):
        """`config`: None for the defaults (no config file), built after the first frame.
        `runtime`: one built already (tests, benchmarks), else the app builds (and closes) its
        own. `conductor`: the command line's BACKEND[:MODEL] override. `frozen`: no clocks or
        spinners on screen (snapshots; default from STIVA_TUI_FROZEN=1). `collect_after_first_frame`:
        garbage collection was paused for the start (`stiva`'s): turn it back on once the first
        frame is drawn."""
        super().__init__()
        self._config = config
        self.runtime = runtime
        self.conductor_override = conductor
        self._owns_runtime = runtime is None
        self.frozen = os.environ.get("STIVA_TUI_FROZEN") == "1" if frozen is None else frozen
        self.keymap: dict[str, str] = effective_keymap(self.setting("keymap"))  # a remapped send moves compare's too
        self._chat: ChatScreen | None = None
        self._announced: tuple[str, str] | None = None  # the conductor the status bar last named
        self._terminal_safe = TerminalSafe()
        self._collect_after_first_frame = collect_after_first_frame
        for theme in load_themes():
            self.register_theme(theme)
        # Set before the stylesheet is first built (set in on_mount, it was built twice: ~10 ms
        # of the first frame); an unknown theme is said once the app runs.
        self._theme_problem = ""
        # A screen's key pressed while Stiva starts (F12 at 1.5 s): opened once the runtime is
        # there, not dropped (`_can_open`). The action's name; the last one pressed wins.
        self._queued_action: str | None = None
        self._start_failed = False
        self.early_models: "ModelProcess | None" = None  # started beside the first paint (start_up)
        self.theme = self._initial_theme()

    @property
    def config(self) -> "Config":
        """The config; the defaults, built now, when the app was given none."""
        if self._config is None:
            from ..config import Config

            self._config = Config()
        return self._config

    @config.setter
    def config(self, config: "Config") -> None:
        self._config = config

    def setting(self, name: str):
        """One of DEFAULT_SETTINGS as the config has it, without building the defaults for it."""
        return DEFAULT_SETTINGS[name] if self._config is None else getattr(self._config, name)

    # --- what reaches the terminal ----------------------------------------------------------------

    def get_line_filters(self) -> "list[LineFilter]":
        """Textual's filters, then `TerminalSafe`: no line any widget draws carries a control
        character to the terminal (an escape sequence in a model's answer, a provider's error, a
        model id), whatever the screen that shows it did with it."""
        return [*super().get_line_filters(), self._terminal_safe]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: "SeverityLevel" = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification, of every screen, made printable; plain text unless `markup` is asked
        for (Textual's default reads it as markup): errors quote providers and exceptions, whose
        brackets must not style the note or break it."""
        super().notify(safe_text(message), title=safe_text(title), severity=severity, timeout=timeout, markup=markup)

    # --- start-up ------------------------------------------------------------------------------

    def get_default_screen(self) -> "ChatScreen":
        from .screens.chat import ChatScreen

        self._chat = ChatScreen(self.runtime, frozen=self.frozen)
        return self._chat

    @property
    def chat_screen(self) -> "ChatScreen":
        """The chat screen (the default screen: it is always there, under any other)."""
        assert self._chat is not None
        return self._chat

    def on_mount(self) -> None:
        if self._theme_problem:
            self.notify(self._theme_problem, severity="warning")
        self.theme_changed_signal.subscribe(self, lambda theme: save_state(theme=theme.name))
        if self.keymap:
            self.set_keymap(self.keymap)
        # the model process, where Stiva's own model will plan, starts now, beside the first paint
        self._early_child = asyncio.create_task(self._start_model_early()) if self.runtime is None else None
        self.call_after_refresh(self.start_up)  # paint first, then start the slow parts

    def _initial_theme(self) -> str:
        wanted = self.setting("theme") or load_state().get("theme") or DEFAULT_THEME
        if wanted not in self.available_themes:
            self._theme_problem = f"Unknown theme {wanted!r}; using {DEFAULT_THEME}."
            wanted = DEFAULT_THEME
        return wanted

    @work(group="startup", exit_on_error=False)
    async def start_up(self) -> None:
        """Build the runtime (unless given one), then load the conductor; tell the chat screen."""
        # Beside the chat's tree being mounted and drawn: the runtime's import (in a thread) and,
        # where Stiva's own model will plan, its model process, which starts loading the model at
        # once (a second start answered after 18.4 s when all this waited for the tree, the
        # runtime and the conductor's choice in turn; benchmarks/perf/first_answer.py).
        early = asyncio.create_task(self._import_and_preload()) if self.runtime is None else None
        try:
            await self.chat_screen.ensure_workflow()
            await self.chat_screen.wait_for_refresh()
        finally:
            if self._collect_after_first_frame:  # the screen is whole (or failed to be): collect again
                self._collect_after_first_frame = False
                gc.enable()
        if early is not None:
            process = None
            try:
                runtime_module, process = await early
                self.runtime = await runtime_module.Runtime.create(
                    self.config,
                    conductor=self.conductor_override,
                    model_process=process if process is not None else self.config.model_process,
                )
            except Exception as exc:  # a bad config or an unreadable history: say so, stay open
                if process is not None:
                    await process.aclose()
                self.notify(str(exc), title="Stiva cannot start", severity="error", timeout=30)
                self.chat_screen.post_message(msg.StartupFailed(str(exc)))
                self._queued_action, self._start_failed = None, True
                return
        self.chat_screen.post_message(msg.RuntimeReady(self.runtime))
        queued, self._queued_action = self._queued_action, None
        if queued is not None:  # a screen asked for while starting: it opens now, before the model loads
            self.post_message(msg.OpenQueued(queued))
        self._announce_pool_news(self.runtime)  # a local server of another user, left out
        if not self.frozen and not self.runtime.simulated:  # keys and local servers come and go
            self.set_interval(self.POOL_CHECK_S, self._check_pool, name="pool-check")
        await self._load_conductor(self.runtime)

    async def _import_and_preload(self):
        """The runtime's module (imported in a thread: the engine, httpx and the store take ~0.1 s
        to import, which on the event loop would hold up the first keys the user types), and the
        model process started beside the first paint (`_start_model_early`), already loading the
        embedded model; None where none was: the runtime starts its own on first use."""
        runtime_module = await asyncio.to_thread(self._import_runtime)
        early = await self._early_child if self._early_child is not None else None
        if early is None:
            return runtime_module, None
        from ..runtime import model_process as hosting

        process = self.early_models = hosting.shared_process()
        process.adopt(*early)
        return runtime_module, process

    async def _start_model_early(self):
        """(the child, the parent's end of its socket) of the model process, started at once with
        `--preload` (it loads the embedded model before anything asks for it), where the embedded
        model will most likely plan and no warm worker serves its models; else None. Nothing here
        imports the runtime: the child starts while the app paints and imports it."""
        import socket
        import sys

        try:
            log_path = await asyncio.to_thread(self._early_child_wanted)
        except Exception:  # noqa: BLE001 - a guess only: the runtime starts its model as before
            return None
        if log_path is None:
            return None
        parent, child = socket.socketpair()
        log = None
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - handed to the child
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "stiva_tui.runtime.model_process_main",
                str(child.fileno()),
                "--preload",
                pass_fds=(child.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        except OSError:
            parent.close()
            return None
        finally:
            child.close()
            if log is not None:
                log.close()
        return proc, parent

    def _early_child_wanted(self):
        """The model process's log, where the app should start it early (see `own_model_plans`),
        else None: models not in a child (`model_process = false`), no Unix sockets, or a warm
        worker listening whose models the app will use instead (runtime/shared_models.py)."""
        import socket
        import sys

        from .. import paths

        config = self.config
        if not config.model_process or not hasattr(socket, "AF_UNIX") or sys.platform == "win32":
            return None
        if os.environ.get("STIVA_NO_WARM", "") in ("", "0") and paths.warm_socket_path(2).exists():
            return None
        if not own_model_plans(config, self.conductor_override):
            return None
        return paths.data_dir() / "model-process.log"

    def _import_runtime(self):
        """The runtime's module, with the config built first (the defaults, when not yet)."""
        self.config  # noqa: B018 - built here, off the event loop
        return importlib.import_module("stiva_tui.runtime")

    async def _load_conductor(self, runtime: "Runtime") -> None:
        """Choose and load the conductor (again, after the pool changed) and tell the chat; a
        conductor other than the one last announced says so, and why (`runtime.pool_change`)."""
        chat = self.chat_screen

        def progress(fraction: float | None, message: str) -> None:  # from the loading thread too
            chat.post_message(msg.ConductorProgress(fraction, message))

        try:
            conductor = await runtime.ensure_conductor(progress)
        except Exception as exc:  # ConductorError, or a bug in a backend: the app stays usable
            self.notify(str(exc), title="Conductor", severity="error", timeout=30)
            chat.post_message(msg.ConductorFailed(str(exc)))
            self._announced = None
            return
        from ..conductor.choose import loaded_facts

        change = ""
        now, before = (conductor.backend, conductor.model), self._announced
        if before is not None and now != before and runtime.pool_change:
            change = runtime.pool_change
            self.notify(
                f"The conductor is now {conductor.backend} {conductor.model} (was {before[0]} {before[1]}): "
                f"{runtime.pool_change}.",
                title="Conductor",
                timeout=10,
            )
        self._announced = now
        chat.post_message(
            msg.ConductorReady(
                conductor.backend, conductor.model, runtime.conductor_reason, loaded_facts(conductor), change
            )
        )

    # --- the pool changing under the app --------------------------------------------------------

    POOL_CHECK_S = 30.0
    """How often the pool is looked at again (keys in the keyring, local servers), in seconds."""

    def _check_pool(self) -> None:
        if self.runtime is not None:
            self.run_worker(self._refresh_pool(self.runtime), group="pool-check", exclusive=True, exit_on_error=False)

    async def _refresh_pool(self, runtime: "Runtime") -> None:
        """Build the pool again; when what it offers changed, the app hears PoolChanged, as from F5."""
        try:
            change = await runtime.pool_refresh()
        except Exception as exc:  # noqa: BLE001 - the next check tries again; F4 shows the pool as it was
            self.log.warning(f"the pool could not be refreshed: {exc}")
            return
        self._announce_pool_news(runtime)
        if change:
            self.post_message(msg.PoolChanged())

    def _announce_pool_news(self, runtime: "Runtime") -> None:
        """A notice, once, for each local server that came, went, changed its models or was left
        out (another user's): the status bar alone was easy to miss while a server became the
        conductor. A conductor it changes has a notice of its own (`_load_conductor`)."""
        for line in runtime.take_pool_news():
            left_out = line.startswith("Left out")
            self.notify(line, title="Local server", severity="warning" if left_out else "information", timeout=10)

    async def on_unmount(self) -> None:
        if self._owns_runtime and self.runtime is not None:
            await self.runtime.aclose()

    # --- screenshots -----------------------------------------------------------------------------

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        """The screen as SVG, marked to keep its spaces in every viewer (see screenshot.py)."""
        return preserve_spaces(super().export_screenshot(title=title, simplify=simplify))

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """The palette's Screenshot: an SVG in the Downloads folder when there is one, else in
        Stiva's data folder (Textual's own fails where ~/Downloads is missing, as on a server),
        and a note that says where it went."""
        import time
        from pathlib import Path

        folder = Path(path).expanduser() if path else screenshot_folder()
        target = folder / (filename or time.strftime("stiva_%Y-%m-%dT%H_%M_%S.svg"))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            target.write_text(self.export_screenshot(), encoding="utf-8")
        except OSError as exc:
            self.notify(f"Could not save the screenshot in {folder}: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"Screenshot saved to {target}", title="Screenshot", timeout=8)

    # --- other screens -------------------------------------------------------------------------

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def _chat_questions(self) -> tuple[str, list[str]]:
        """The question being typed in the chat (not sent yet), and those asked, oldest first."""
        chat = self._chat
        if chat is None or not chat.is_mounted:
            return "", []
        prompt = chat.prompt
        asked = list(prompt.asked)
        last = getattr(chat.live.state, "question", "") if chat.live is not None else ""
        if last and last not in asked:  # a stored run reopened in the chat
            asked.append(last)
        return prompt.text.strip(), asked

    @on(msg.OpenQueued)
    async def _open_queued(self, message: msg.OpenQueued) -> None:
        await self.run_action(message.action)

    @on(msg.OpenCompare)
    def _open_compare(self, message: msg.OpenCompare) -> None:
        self.action_compare(message.session_id)

    def action_compare(self, session_id: str | None = None) -> None:
        from .screens.compare import CompareScreen

        if self._can_open(CompareScreen, "compare"):
            assert self.runtime is not None
            # the question being typed in the chat; up in compare's box recalls those asked there
            question, asked = ("", []) if session_id is not None else self._chat_questions()
            self.push_screen(CompareScreen(self.runtime, session_id=session_id, question=question, history=asked))

    def action_pool(self) -> None:
        from .screens.pool import PoolScreen

        if self._can_open(PoolScreen, "pool"):
            assert self.runtime is not None
            self._push_aside(PoolScreen(self.runtime))

    def action_keys(self) -> None:
        from .screens.keys import KeysScreen

        if self._can_open(KeysScreen, "keys"):
            assert self.runtime is not None
            self._push_aside(KeysScreen(self.runtime))

    def _push_aside(self, screen: "Screen") -> None:
        """The pool (F4) and the keys (F5) are one detour: either opened from the other takes its
        place, so that esc goes back to where the detour began (the chat, compare mode), never to
        the pool, whose r would take the first letter typed for the chat."""
        from .screens.keys import KeysScreen
        from .screens.pool import PoolScreen

        if isinstance(self.screen, (PoolScreen, KeysScreen)) and len(self.screen_stack) > 1:
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def action_leaderboard(self) -> None:
        from .screens.leaderboard import LeaderboardScreen

        if self._can_open(LeaderboardScreen, "leaderboard"):
            assert self.runtime is not None
            self.push_screen(LeaderboardScreen(self.runtime))

    def action_bench(self) -> None:
        """The bench screen: made once, then kept, so that coming back finds the same report."""
        from .screens.bench import BenchScreen

        if not self._can_open(BenchScreen, "bench"):
            return
        assert self.runtime is not None
        if not self.is_screen_installed("bench"):
            hosted = any(m.kind != "embedded" for m in self.runtime.models)
            self.install_screen(BenchScreen(self.runtime.store, hosted=hosted), "bench")
        bench = self.get_screen("bench")
        if bench in self.screen_stack:  # under a screen opened from it: go back down to it
            while self.screen is not bench:
                self.pop_screen()
        else:
            self.push_screen(bench)

    @on(msg.OpenRun)
    def _open_run(self, message: msg.OpenRun) -> None:
        """The run on a screen of its own, over the one that asked (esc goes back to it): the chat
        underneath stays as it was, even while a question runs there."""
        from .screens.run import RunScreen

        self.push_screen(RunScreen(self.runtime.store if self.runtime is not None else None, message.run_id))

    @on(msg.PoolChanged)
    def _pool_changed(self, message: msg.PoolChanged) -> None:
        """A key was added or removed (F5, the keyring), a local server came or went: the chat's
        tree learns the new pool's prices, and a conductor chosen from the old pool is chosen
        again (the status bar says so while it is, and then which, and why)."""
        if self._chat is not None and self._chat.runtime is not None:
            self._chat.know_pool()
        runtime = self.runtime
        if runtime is not None:  # F5 refreshed the pool: a local server may have come meanwhile
            self._announce_pool_news(runtime)
        starting = any(w.group == "startup" and w.is_running for w in self.workers)  # it chooses then
        if runtime is not None and runtime.conductor is None and not starting:
            if self._chat is not None:
                self._chat.status_bar.message = f"conductor: choosing again — {runtime.pool_change}"
            self.run_worker(self._load_conductor(runtime), group="conductor", exit_on_error=False)

    def _can_open(self, screen: "type[Screen]", action: str | None = None) -> bool:
        """Whether a new `screen` may open: Stiva has started and it is not the one shown. While
        it starts, `action` (the key's action) is queued and runs once the runtime is there."""
        if self.runtime is None:
            if action is not None and not self._start_failed:
                self._queued_action = action
                self.notify("Opening as soon as Stiva has started…", timeout=3)
            else:
                self.notify("Stiva is still starting; try again in a moment.", severity="warning")
            return False
        return not isinstance(self.screen, screen)


def own_model_plans(config: "Config", override: str | None) -> bool:
    """Whether the conductor will most likely be the embedded model, which the app then starts
    loading beside its first paint: `backend = "embedded"`, or `auto` on a machine with no NVIDIA
    GPU (where a local model would plan), no model or provider of the config's own (one may plan)
    and no key for a catalog provider (a hosted model would plan). Reads keys: run in a thread."""
    from pathlib import Path

    from ..config import ConfigError, with_conductor_override

    try:
        backend = with_conductor_override(config.conductor, override).backend
    except ConfigError:
        return False
    if backend == "embedded":
        return True
    if backend != "auto" or config.models or config.providers or config.sim is not None:
        return False
    if Path("/dev/nvidiactl").exists():
        return False
    if not config.catalog:
        return True
    from .. import keys
    from ..catalog import load_catalog

    try:
        return not any(keys.get_key(p.name, p.api_key_env)[0] for p in load_catalog().providers)
    except Exception:  # noqa: BLE001 - a keyring that cannot be read: the runtime says so, not this guess
        return False


def screenshot_folder():
    """The user's Downloads folder when it exists, else `<data dir>/screenshots`."""
    from pathlib import Path

    import platformdirs

    from .. import paths

    downloads = Path(platformdirs.user_downloads_dir())
    return downloads if downloads.is_dir() else paths.data_dir() / "screenshots"


def run_app(config: "Config | None", conductor_override: str | None = None) -> int:
    """Run the app until the user quits; the process exit code. `config` None: no config file,
    the defaults (built once the app shows). Garbage collection paused when it is called (as
    `stiva` pauses it for the start) is turned back on once the app's first frame is drawn."""
    from .bindings import check_keymap

    problem = check_keymap(config.keymap) if config is not None else None
    if problem:  # before the screen is taken: a typo'd id is one line, as any unknown config key
        import sys

        print(f"stiva: config: {problem}", file=sys.stderr)
        return 2
    app = StivaApp(config, conductor=conductor_override, collect_after_first_frame=not gc.isenabled())
    app.run()
    return app.return_code or 0
