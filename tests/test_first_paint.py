"""What `stiva` (the app) does before its first frame: only what that frame needs.

The bare app's start imports no subcommand module (the parser is not built for no arguments)
and, with no config file, neither pydantic nor the config module: the app draws with the
defaults' few settings it needs and builds `Config()` once it shows. A config file is still read
and validated before the screen is taken (a bad one is one line and exit 2: test_config.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from textual.app import App, ComposeResult

from tests.support.cli import ROOT

# (not `ask`: stiva_tui.cli's __init__ imports its PRESET_NAMES, and it imports nothing heavy)
SUBCOMMANDS = [
    "stiva_tui.cli.models",
    "stiva_tui.cli.history",
    "stiva_tui.cli.bench",
    "stiva_tui.cli.bench_import",
    "stiva_tui.cli.train",
    "stiva_tui.cli.votes",
    "stiva_tui.cli.config_cmd",
    "stiva_tui.cli.serve",
]

# `stiva` with no arguments, through the console script's own `entry`, up to the moment the app
# would take the screen: Textual's App.run records what is imported then, and the app's config.
AT_APP_RUN = textwrap.dedent(
    """
    import json, sys
    import textual.app

    def run(self, *args, **kwargs):
        print(json.dumps({
            "modules": sorted(m for m in sys.modules if m.startswith(("stiva_tui", "pydantic"))),
            "config_given": vars(self).get("_config", vars(self).get("config")) is not None,
            "keymap": self.keymap,
            "collecting_garbage": __import__("gc").isenabled(),
        }))
        self.exit(0)

    textual.app.App.run = run
    sys.argv = ["stiva"]
    from stiva_tui.cli import entry
    entry()
    """
)


def at_app_run(home, env_extra: dict | None = None) -> dict:
    env = {"STIVA_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home), "TERM": "dumb"}
    done = subprocess.run(
        [sys.executable, "-c", AT_APP_RUN],
        cwd=ROOT,
        env={**env, **(env_extra or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_bare_app_start_imports_no_command_and_no_pydantic_without_a_config_file(tmp_path):
    seen = at_app_run(tmp_path)
    modules = set(seen["modules"])
    assert "stiva_tui.tui.app" in modules  # it did get as far as the app
    assert not modules & set(SUBCOMMANDS), sorted(modules & set(SUBCOMMANDS))
    assert "pydantic" not in modules and "stiva_tui.config" not in modules
    assert seen["config_given"] is False
    assert seen["keymap"] == {}
    assert seen["collecting_garbage"] is False  # paused until the first frame is drawn


def test_bare_app_start_with_a_config_file_validates_it_before_the_app(tmp_path):
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[keymap]\nnew_chat = "ctrl+b"\n', encoding="utf-8")
    seen = at_app_run(tmp_path)
    modules = set(seen["modules"])
    assert "stiva_tui.config" in modules and "pydantic" in modules
    assert not modules & set(SUBCOMMANDS)
    assert seen["config_given"] is True
    assert seen["keymap"]["new_chat"] == "ctrl+b"


def test_no_arguments_parse_as_the_parser_would(monkeypatch):
    main = sys.modules["stiva_tui.cli.main"] if "stiva_tui.cli.main" in sys.modules else None
    if main is None:
        import stiva_tui.cli  # noqa: F401

        main = sys.modules["stiva_tui.cli.main"]
    fast = main.parse_args([])
    full = main.build_parser().parse_args([])
    for name in ("config", "conductor", "pool", "prefer"):
        setattr(full, name, getattr(full, name, None))
    assert vars(fast) == vars(full)
    from stiva_tui.cli import bench_import

    assert main.BENCH_IMPORT == bench_import.NAME
    assert list(main.COMMANDS) == list(main.COMMAND_MODULES)


def test_the_app_s_default_settings_are_the_config_s_defaults():
    from stiva_tui.config import Config
    from stiva_tui.tui.app import DEFAULT_SETTINGS

    defaults = Config()
    assert {name: getattr(defaults, name) for name in DEFAULT_SETTINGS} == DEFAULT_SETTINGS


def test_an_app_without_a_config_builds_the_defaults_with_the_runtime_s_import():
    from stiva_tui.config import Config
    from stiva_tui.tui.app import StivaApp

    app = StivaApp(None)
    assert app._config is None and app.setting("enter_sends") is False
    runtime_module = app._import_runtime()
    assert runtime_module.__name__ == "stiva_tui.runtime"
    assert app._config == Config() and app.config is app._config


def test_the_chat_screen_s_module_loads_neither_the_run_state_nor_markdown(tmp_path):
    """What the first frame does not show is imported once it has been drawn: the run state
    (whose traces load pydantic), the tree, the step pane and the Markdown parser."""
    later = ["stiva_tui.tui.live_run", "stiva_tui.core.run_state", "stiva_tui.core.trace", "pydantic", "markdown_it"]
    code = (
        "import json, sys; import stiva_tui.tui.app, stiva_tui.tui.screens.chat; "
        f"print(json.dumps([m for m in {later!r} if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


class _OneBar(App):
    def __init__(self, bar) -> None:
        super().__init__()
        self.bar = bar

    def compose(self) -> ComposeResult:
        yield self.bar


async def test_the_status_bar_mounts_its_progress_bar_when_a_load_first_shows():
    from stiva_tui.tui.widgets.status_bar import StatusBar

    bar = StatusBar()
    async with _OneBar(bar).run_test(size=(100, 5)) as pilot:
        await pilot.pause()
        assert not bar.query("#status-progress")  # not in the first frame: nothing loads yet
        bar.load_message, bar.load_fraction, bar.load_shown = "loading weights", 0.5, True
        await pilot.pause()
        progress = bar.query_one("#status-progress")
        assert progress.display and progress.percentage == 0.5
        bar.load_shown = False
        await pilot.pause()
        assert not progress.display and bar.query_one("#status-progress") is progress  # kept, hidden


async def test_the_tree_and_step_pane_are_mounted_before_the_runtime_is_announced(fake):
    """The chat's first frame has an empty workflow column; the tree and the step pane follow
    at once, before the app builds its runtime (whose import in a thread would slow them)."""
    from stiva_tui.tui import messages as msg
    from stiva_tui.tui.app import StivaApp
    from tests.support.tui import make_test_config, wait_for

    app = StivaApp(make_test_config(fake))  # the app builds its own runtime
    seen: list[str] = []

    def hook(message) -> None:
        if isinstance(message, msg.RuntimeReady) and not seen:
            seen.append("tree mounted" if app.chat_screen.live is not None else "no tree yet")

    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        await wait_for(pilot, lambda: bool(seen), what="the runtime")
        chat = app.chat_screen
        assert list(chat.query_one("#workflow-column").children) == [chat.tree, chat.detail]
        assert chat.tree.models == app.runtime.models  # the tree learnt the pool
    assert seen == ["tree mounted"]


async def test_an_unknown_theme_is_said_once_the_app_runs(fake, tmp_path):
    """The theme is chosen before the first stylesheet is built; a config naming an unknown one
    still gets the default theme and a warning, once the app runs."""
    from stiva_tui.tui.app import StivaApp
    from tests.support.tui import make_runtime, make_test_config

    config = make_test_config(fake).model_copy(update={"theme": "no-such-theme"})
    runtime = await make_runtime(config, load_conductor=False)
    try:
        app = StivaApp(config, runtime=runtime)
        assert app.theme == "stiva-dark"
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            notes = [n.message for n in app._notifications]
            assert "Unknown theme 'no-such-theme'; using stiva-dark." in notes
            assert app.has_class("-theme-stiva-dark") and app.has_class("-dark-mode")
    finally:
        await runtime.aclose()


async def test_garbage_collection_paused_for_the_start_resumes_after_the_first_frame(fake):
    import gc

    from stiva_tui.tui.app import StivaApp
    from tests.support.tui import make_runtime, make_test_config, wait_for

    config = make_test_config(fake)
    runtime = await make_runtime(config, load_conductor=False)
    gc.disable()
    try:
        app = StivaApp(config, runtime=runtime, collect_after_first_frame=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, gc.isenabled, what="garbage collection on again")
            assert app.chat_screen.live is not None  # once the whole screen is drawn
    finally:
        gc.enable()
        await runtime.aclose()


def test_the_app_refusing_to_start_leaves_garbage_collection_on(tmp_path):
    """`stiva` pauses collection before the app; an app that does not start (a keymap naming no
    binding: one line, exit 2) turns it back on."""
    import gc

    from tests.support.cli import run_stiva

    config = tmp_path / "config.toml"
    config.write_text('[keymap]\nno_such_binding = "ctrl+b"\n', encoding="utf-8")
    assert gc.isenabled()
    done = run_stiva("--config", str(config), home=tmp_path / "home")
    assert done.returncode == 2 and "no key binding has the id 'no_such_binding'" in done.stderr
    assert gc.isenabled()
