"""The app's key bindings as data: every binding id there is, and the keys one is bound to now.

`[keymap]` in the config remaps bindings by id (Textual's keymap). `check_keymap` refuses an id no
binding has, as every other unknown config key is refused; `keys_for` gives the live keys of a
binding (the keymap's, else its default) for every hint on screen, so a remapped `send` is shown
as what it is, in the prompt's placeholder and the compare screen's hint alike.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from textual.binding import Binding

# Every module that defines a screen or widget with bindings.
MODULES = (
    "stiva_tui.tui.app",
    "stiva_tui.tui.screens.chat",
    "stiva_tui.tui.screens.compare",
    "stiva_tui.tui.screens.bench",
    "stiva_tui.tui.screens.keys",
    "stiva_tui.tui.screens.pool",
    "stiva_tui.tui.screens.leaderboard",
    "stiva_tui.tui.screens.help",
    "stiva_tui.tui.screens.run_tree",
    "stiva_tui.tui.dialogs",
    "stiva_tui.tui.screens.run",
    "stiva_tui.tui.widgets.prompt_input",
    "stiva_tui.tui.widgets.workflow_tree",
    "stiva_tui.tui.widgets.bench_report",
    "stiva_tui.tui.widgets.history",
    "stiva_tui.tui.widgets.compare_column",
    "stiva_tui.tui.widgets.conversation",
)


def _bindings_of(owner: type) -> Iterator[Binding]:
    for binding in getattr(owner, "BINDINGS", []) or []:
        yield from (Binding.make_bindings([binding]) if not isinstance(binding, Binding) else [binding])


def all_bindings() -> dict[str, Binding]:
    """Binding id -> binding, over every screen and widget of the app."""
    found: dict[str, Binding] = {}
    for name in MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name:
                for binding in _bindings_of(value):
                    if binding.id:
                        found.setdefault(binding.id, binding)
    return found


def check_keymap(keymap: Mapping[str, str]) -> str | None:
    """Why `keymap` cannot be used (one line), or None."""
    known = all_bindings()
    unknown = sorted(set(keymap) - set(known))
    if unknown:
        return (
            f"[keymap]: no key binding has the id {', '.join(repr(u) for u in unknown)} "
            f"(ids: {', '.join(sorted(known))}; F1 lists them with their keys)"
        )
    return None


def keys_for(app, binding_id: str, default: str) -> str:
    """The keys `binding_id` is bound to now, for a hint: "ctrl+j or alt+enter"."""
    keymap = getattr(app, "keymap", None) or {}
    keys = keymap.get(binding_id, default)
    return " or ".join(k.strip() for k in keys.split(",") if k.strip())
