"""The app's key bindings as data: every binding id there is, and the keys one is bound to now.

`[keymap]` in the config remaps bindings by id (Textual's keymap). `check_keymap` refuses an id no
binding has, as every other unknown config key is refused, and a key that another binding active
at the same time already has (`send = "ctrl+q"` would never send: quit takes ctrl+q first).
`effective_keymap` is what the app applies: `send` remapped moves compare mode's send along with
it, unless `compare.send` is remapped on its own. `keys_for` gives the live keys of a binding
(the keymap's, else its default) for every hint on screen, so a remapped `send` is shown as what
it is, in the prompt's placeholder and the compare screen's hint alike; `key_label` writes a key
as the user presses it ("?" for Textual's "question_mark").
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


# Which binding owners (classes) are active at the same time: the app's on every screen, and on
# each screen its own and its widgets'. A key may mean one thing on one screen and another
# elsewhere (escape, r, enter); two bindings of one group on one key is a conflict.
TOGETHER = (
    ("ChatScreen", "PromptInput", "WorkflowTree", "HistorySidebar", "ConversationView"),
    ("CompareScreen", "PromptInput", "CompareColumn"),
    ("RunScreen", "WorkflowTree"),
    ("RunTreeScreen", "WorkflowTree"),
    ("BenchScreen", "BenchReportView"),
)
# Widgets of one screen that never hold the focus together and do not contain one another: a key
# of one is live only while that one has the focus, so it may mean something else in the other
# (r forks a step in the tree and renames a chat in the history sidebar).
APART = (("WorkflowTree", "HistorySidebar"),)
APP_OWNER = "StivaApp"
# Keys Textual itself takes on every screen, by what they do.
RESERVED = {"ctrl+p": "the command palette"}
# A remapped `send` moves these along with it (compare mode sends the same question), unless the
# keymap remaps them too.
FOLLOWS = {"compare.send": "send"}


def _owned_bindings() -> list[tuple[str, Binding]]:
    """(owner class name, binding) for every binding with an id, over the app."""
    found: list[tuple[str, Binding]] = []
    for name in MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name:
                found.extend((value.__name__, b) for b in _bindings_of(value) if b.id)
    return found


def all_bindings() -> dict[str, Binding]:
    """Binding id -> binding, over every screen and widget of the app."""
    found: dict[str, Binding] = {}
    for _owner, binding in _owned_bindings():
        found.setdefault(binding.id, binding)
    return found


def effective_keymap(keymap: Mapping[str, str]) -> dict[str, str]:
    """`keymap` as the app applies it: with `send` remapped, compare mode's send follows."""
    effective = dict(keymap)
    for follower, leader in FOLLOWS.items():
        if leader in keymap and follower not in keymap:
            effective[follower] = keymap[leader]
    return effective


def _split(keys: str) -> list[str]:
    return [k.strip().lower() for k in keys.split(",") if k.strip()]


def _together(a: str, b: str) -> bool:
    if a != b and any(a in group and b in group for group in APART):
        return False
    return a == b or APP_OWNER in (a, b) or any(a in group and b in group for group in TOGETHER)


def check_keymap(keymap: Mapping[str, str]) -> str | None:
    """Why `keymap` cannot be used (one line), or None. An empty keymap (the default) has nothing
    to check: the app's own bindings do not clash (a test keeps them so), and reading them all
    imports every screen, which the first paint would wait for."""
    if not keymap:
        return None
    bindings = _owned_bindings()
    known = {b.id for _o, b in bindings}
    unknown = sorted(set(keymap) - known)
    if unknown:
        return (
            f"[keymap]: no key binding has the id {', '.join(repr(u) for u in unknown)} "
            f"(ids: {', '.join(sorted(known))}; F1 lists them with their keys)"
        )
    effective = effective_keymap(keymap)
    live = [(owner, b, _split(effective.get(b.id, b.key))) for owner, b in bindings]
    for binding_id in keymap:  # in the config's order: the first conflict is named
        for owner, binding, keys in live:
            if binding.id != binding_id:
                continue
            for key in keys:
                if key in RESERVED:
                    return f'[keymap]: {binding_id} = "{keymap[binding_id]}": {key} is taken by {RESERVED[key]}'
                for other_owner, other, other_keys in live:
                    if (
                        other.id != binding_id
                        and other.action != binding.action  # compare mode's send and the prompt's
                        and key in other_keys
                        and _together(owner, other_owner)
                    ):
                        what = other.description or other.action
                        if other.id in effective:
                            what += ", remapped"
                        return (
                            f'[keymap]: {binding_id} = "{keymap[binding_id]}": {key} is already the key of '
                            f"{other.id} ({what}); choose another key, or remap {other.id} too"
                        )
    return None


def key_label(key: str) -> str:
    """A key as the user presses it: "?" for "question_mark", "ctrl+j" as it is."""
    from textual.keys import key_to_character

    key = key.strip()
    char = key_to_character(key) if len(key) > 1 else None
    return char if char and char.isprintable() and not char.isspace() else key


def keys_for(app, binding_id: str, default: str) -> str:
    """The keys `binding_id` is bound to now, for a hint: "ctrl+j or alt+enter"."""
    keymap = getattr(app, "keymap", None) or {}
    keys = keymap.get(binding_id, default)
    return " or ".join(key_label(k) for k in keys.split(",") if k.strip())
