"""The keys screen: add, replace or remove a provider's API key in the OS keyring.

Keys are only ever shown masked (at most their last four characters). Where no keyring backend
is usable the screen says so and names the environment variable to set instead. Keyring calls
may block (D-Bus), so they run in a thread.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Label, Static

from ... import keys
from .. import messages as msg
from ..widgets.footer import StivaFooter
from ..widgets.table import Table

if TYPE_CHECKING:
    from ...config import Config
    from ...runtime import Runtime

KEY_COLUMNS = ("Provider", "Environment variable", "Key")


@dataclass(frozen=True)
class ProviderEntry:
    name: str
    env_var: str | None
    label: str = ""


def mask_key(key: str) -> str:
    """'sk-…1234': a conventional prefix and at most the last 4 characters; short keys show none."""
    key = key.strip()
    prefix_match = re.match(r"^[A-Za-z]{2,4}-", key)
    prefix = prefix_match.group(0) if prefix_match and len(key) >= 16 else ""
    tail = key[-4:] if len(key) >= 12 else ""
    return f"{prefix}…{tail}" if tail else "…(short key)"


def key_providers(config: "Config") -> list[ProviderEntry]:
    """The config's providers, then the catalog's (a config provider keeps the catalog's variable)."""
    try:
        from ...catalog import load_catalog

        catalog = list(load_catalog().providers)
    except Exception:  # a broken catalog must not hide the config's providers
        catalog = []
    catalog_env = {p.name: p.api_key_env for p in catalog}
    entries = [ProviderEntry(p.name, p.api_key_env or catalog_env.get(p.name), "config") for p in config.providers]
    taken = {e.name for e in entries}
    entries += [ProviderEntry(p.name, p.api_key_env, p.label or p.name) for p in catalog if p.name not in taken]
    return entries


# Where a stored key lives, in the words the keys screen uses (`keys.get_key`'s "where").
STORE_WORDS = {"keyring": "keyring", "key file": "keys.json"}


def key_status(entry: ProviderEntry, keyring_ok: bool) -> str:
    """Where the provider's key comes from (the keyring, keys.json or its variable), masked;
    never the key itself. A second stored copy that is not used says so."""
    env_set = bool(entry.env_var and os.environ.get(entry.env_var, "").strip())
    if not keyring_ok:
        if env_set:
            return f"key from ${entry.env_var}"
        return f"no key: set ${entry.env_var}" if entry.env_var else "no key: give it an api_key_env"
    try:
        keys.get_key(entry.name, None)  # a store that cannot be read says so here
        stored = keys.stored_keys(entry.name)
    except keys.SecretsError as exc:
        stored = []
        if not env_set:
            return f"keyring error: {exc}"
    held = [f"{STORE_WORDS.get(where, where)} key {mask_key(value)}" for where, value in stored]
    if env_set:
        unused = f" ({', '.join(held)} unused)" if held else ""
        return f"key from ${entry.env_var}{unused}"
    if stored:
        where, value = stored[0]
        unused = f" ({held[1]} unused)" if len(held) > 1 else ""
        return f"key in {STORE_WORDS.get(where, where)}: {mask_key(value)}{unused}"
    return "no key"


class KeysScreen(Screen):
    """Manage providers' API keys in the OS keyring."""

    CSS_PATH = "keys.tcss"
    # The key box first: a key pasted at once lands in it (up and down choose the provider).
    AUTO_FOCUS = "#keys-input"
    BINDINGS = [
        Binding("escape", "back", "Back", id="keys.back", tooltip="Leave the keys screen"),
        Binding("ctrl+s", "save", "Save key", id="keys.save", tooltip="Store the entered key in the keyring"),
        # Priority: in the key box, ctrl+d would delete a character instead (delete still does).
        Binding(
            "ctrl+d",
            "ask_remove",
            "Remove key",
            id="keys.remove",
            priority=True,
            tooltip="Remove the selected provider's key from the keyring (asks first)",
        ),
        # From the key box, the provider's row moves (the table's own keys, when it has the focus).
        Binding("down", "provider(1)", show=False),
        Binding("up", "provider(-1)", show=False),
    ]

    def __init__(
        self, runtime: "Runtime", *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.runtime = runtime
        self.providers = key_providers(runtime.config)
        self.keyring_ok = False
        self.keyring_info = ""
        self.statuses: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text("API keys", style="bold"), id="keys-title")
        yield Static("Looking for a keyring…", id="keys-backend", markup=False)
        yield Table(id="keys-table", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="keys-edit"):
            yield Label("Key:", id="keys-target", markup=False)
            yield Input(password=True, placeholder="paste the API key", id="keys-input")
            yield Button("Save", id="keys-save", variant="primary", compact=True)
            yield Button("Remove", id="keys-remove", variant="error", compact=True)
        yield StivaFooter()

    def on_mount(self) -> None:
        table = self.query_one("#keys-table", DataTable)
        for label in KEY_COLUMNS:
            table.add_column(label, key=label)
        for entry in self.providers:
            table.add_row(entry.name, f"${entry.env_var}" if entry.env_var else "–", "…", key=entry.name)
        self.reload()

    # --- reading ------------------------------------------------------------------------------

    @property
    def selected(self) -> ProviderEntry | None:
        table = self.query_one("#keys-table", DataTable)
        if not self.providers or table.cursor_row is None:
            return None
        return self.providers[min(table.cursor_row, len(self.providers) - 1)]

    def select_provider(self, name: str) -> None:
        """Move the cursor to provider `name`."""
        table = self.query_one("#keys-table", DataTable)
        table.move_cursor(row=table.get_row_index(name))

    @work(exclusive=True, group="keys-read", exit_on_error=False)
    async def reload(self) -> None:
        """Read the keyring state and every provider's key status (in a thread)."""
        ok, info = await asyncio.to_thread(keys.keyring_status)
        self.in_file = await asyncio.to_thread(keys.store_kind) == "file"
        self.read_also = (await asyncio.to_thread(keys.key_stores))[1:]  # keys.json beside a keyring
        statuses = await asyncio.to_thread(lambda: {e.name: key_status(e, ok) for e in self.providers})
        self.keyring_ok, self.keyring_info, self.statuses = ok, info, statuses
        self._show()

    def _show(self) -> None:
        backend = self.query_one("#keys-backend", Static)
        if self.keyring_ok and getattr(self, "in_file", False):
            # said plainly: where the key goes, and why not in a keyring
            backend.update(f"Keys are stored in {self.keyring_info}. An environment variable, when set, wins over it.")
            backend.add_class("-warning")
        elif self.keyring_ok:
            also = "".join(f" Keys in {store} are read too." for store in getattr(self, "read_also", ()))
            backend.update(
                f"Keys are stored in the OS keyring ({self.keyring_info}); "
                f"an environment variable, when set, wins over it.{also}"
            )
            backend.remove_class("-warning")
        else:
            backend.update(
                f"No usable keyring: {self.keyring_info}. Keys cannot be stored here: set the "
                "provider's environment variable (shown below) instead, e.g. "
                "export OPENAI_API_KEY=… in your shell."
            )
            backend.add_class("-warning")
        table = self.query_one("#keys-table", DataTable)
        for entry in self.providers:
            status = self.statuses.get(entry.name, "")
            style = "green" if status.startswith("key ") else ("red" if "error" in status else "")
            table.update_cell(entry.name, "Key", Text(status, style=style), update_width=True)
        for widget_id in ("#keys-input", "#keys-save", "#keys-remove"):
            self.query_one(widget_id).disabled = not self.keyring_ok
        self._show_target()

    @on(DataTable.RowHighlighted, "#keys-table")
    def _show_target(self) -> None:
        entry = self.selected
        label = self.query_one("#keys-target", Label)
        if entry is None:
            label.update("Key:")
        elif self.keyring_ok:
            label.update(f"Key for {entry.name}:")
        else:
            label.update(f"Set ${entry.env_var}" if entry.env_var else f"No keyring for {entry.name}")

    # --- changing -----------------------------------------------------------------------------

    @on(Input.Submitted, "#keys-input")
    @on(Button.Pressed, "#keys-save")
    def action_save(self) -> None:
        entry = self.selected
        field = self.query_one("#keys-input", Input)
        key = field.value.strip()
        if entry is None or not self.keyring_ok:
            return
        if not key:
            self.notify(f"Paste the key for {entry.name} first", severity="warning")
            return
        field.value = ""  # the key leaves the screen at once
        had_key = self.statuses.get(entry.name, "").startswith("key in ")
        self._change(entry, key, "replaced" if had_key else "saved")

    def on_paste(self, event: events.Paste) -> None:
        """A key pasted while the table (or a button) has the focus goes into the key box."""
        field = self.query_one("#keys-input", Input)
        if event.text.strip() and not field.disabled and not field.has_focus:
            event.stop()
            field.value = event.text.strip().splitlines()[0]
            field.focus()

    def action_provider(self, step: int) -> None:
        """Move the provider's row by `step` (from the key box, which has no use for up and down)."""
        table = self.query_one("#keys-table", DataTable)
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + step)))

    def action_ask_remove(self) -> None:
        """ctrl+d: remove the selected provider's key after a yes (a key is not typed back in a
        moment, and ctrl+d is a text box's delete and a shell's end of input)."""
        from ..dialogs import ConfirmDialog

        entry = self.selected
        if entry is None or not self.keyring_ok:
            return
        if self.statuses.get(entry.name, "no key").startswith("no key"):
            self.notify(f"No key for {entry.name} is stored here", severity="warning")
            return
        question = f"Remove the stored key for {entry.name}? Stiva cannot use {entry.name}'s models without a key."
        self.app.push_screen(ConfirmDialog(question), lambda yes: self._change(entry, None, "removed") if yes else None)

    @on(Button.Pressed, "#keys-remove")
    def action_remove(self) -> None:
        """The Remove button: pressed on purpose, it removes at once (ctrl+d asks first)."""
        entry = self.selected
        if entry is None or not self.keyring_ok:
            return
        self._change(entry, None, "removed")

    @work(group="keys-write", exit_on_error=False)
    async def _change(self, entry: ProviderEntry, key: str | None, verb: str) -> None:
        try:
            if key is None:
                existed = await asyncio.to_thread(keys.delete_key, entry.name)
                if not existed:
                    self.notify(f"No key for {entry.name} in the keyring", severity="warning")
                    return
            else:
                await asyncio.to_thread(keys.set_key, entry.name, key, entry.env_var)
        except keys.SecretsError as exc:
            self.notify(str(exc), severity="error")
            return
        await self.reload().wait()
        applied = await self._refresh_pool()
        tail = "; the pool is updated" if applied else "; restart Stiva to apply it to the pool"
        self.notify(f"Key for {entry.name} {verb}{tail}")

    async def _refresh_pool(self) -> bool:
        """Rebuild the pool's availability; False (and a notice) when that failed."""
        try:
            await self.runtime.pool_refresh()
        except Exception as exc:
            self.notify(f"The pool could not be refreshed: {exc}", severity="error")
            return False
        self.post_message(msg.PoolChanged())  # the chat's tree prices its "≈ instead" line with it
        return True

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
