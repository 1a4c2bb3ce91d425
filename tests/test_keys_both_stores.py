"""A keyring that appears later (`pipx inject stiva-tui keyrings.alt`, a desktop session after SSH)
hides nothing: keys saved in keys.json while no keyring worked are still read, every screen says
where each key lives, and `stiva serve --show-token` keeps the token clients have (issue 43)."""

from __future__ import annotations

import json
import os

import pytest

from stiva_tui import keys
from tests.support.cli import run_stiva

FILE_KEY = "sk-file-0000000000000000AAAA"
RING_KEY = "sk-ring-1111111111111111BBBB"
NO_KEYRING = "keyring.backends.fail.Keyring"
FILE_KEYRING = "keyrings.alt.file.PlaintextKeyring"  # a real keyring backend (conftest's)


def _use(monkeypatch, backend: str) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", backend)
    keys.reset_backend()


def _file_data() -> dict:
    return json.loads(keys.keys_file().read_text())


def test_a_keyring_that_appears_later_reads_keys_json_too(monkeypatch):
    _use(monkeypatch, NO_KEYRING)
    keys.set_key("openai", FILE_KEY)
    assert keys.store_kind() == "file"

    _use(monkeypatch, FILE_KEYRING)  # a keyring now works: keys.json is still read
    assert keys.store_kind() == "keyring"
    assert keys.get_key("openai", "OPENAI_API_KEY") == (FILE_KEY, "key file")
    assert [where for where, _ in keys.stored_keys("openai")] == ["key file"]
    # the keys screen's words say which store, and name the file
    assert str(keys.keys_file()) in " ".join(keys.key_stores())

    # a key saved now goes to the keyring, and the old copy in keys.json goes: one place per key
    keys.set_key("openai", RING_KEY)
    assert keys.get_key("openai", None) == (RING_KEY, "keyring")
    assert "stiva/openai" not in _file_data()
    assert keys.delete_key("openai") and keys.get_key("openai", None) == (None, "none")


def test_a_key_in_both_stores_is_read_from_the_keyring_and_removed_from_both(monkeypatch):
    _use(monkeypatch, NO_KEYRING)
    keys.set_key("groq", FILE_KEY)
    _use(monkeypatch, FILE_KEYRING)
    from keyrings.alt.file import PlaintextKeyring

    PlaintextKeyring().set_password("stiva", "groq", RING_KEY)  # saved by another tool, straight to the keyring
    assert keys.get_key("groq", None) == (RING_KEY, "keyring")
    assert [where for where, _ in keys.stored_keys("groq")] == ["keyring", "key file"]
    assert keys.delete_key("groq") is True
    assert keys.get_key("groq", None) == (None, "none")  # the file's copy does not come back
    assert keys.stored_keys("groq") == []


def test_keys_screen_says_the_file_key_is_in_keys_json(monkeypatch):
    from stiva_tui.tui.screens.keys import ProviderEntry, key_status

    _use(monkeypatch, NO_KEYRING)
    keys.set_key("openai", FILE_KEY)
    _use(monkeypatch, FILE_KEYRING)
    from keyrings.alt.file import PlaintextKeyring

    PlaintextKeyring().set_password("stiva", "anthropic", RING_KEY)
    assert key_status(ProviderEntry("openai", "OPENAI_API_KEY"), True) == "key in keys.json: sk-…AAAA"
    assert key_status(ProviderEntry("anthropic", "ANTHROPIC_API_KEY"), True) == "key in keyring: sk-…BBBB"


def test_stiva_models_says_where_each_key_lives(stiva_home, monkeypatch):
    _use(monkeypatch, NO_KEYRING)
    keys.set_key("openai", FILE_KEY)
    config = stiva_home / "config.toml"
    config.write_text("[discovery]\nenabled = false\n")
    with_keyring = {**os.environ, "PYTHON_KEYRING_BACKEND": FILE_KEYRING}
    result = run_stiva("models", "--json", "--config", str(config), env=with_keyring)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    gpt5 = next(m for m in data["models"] if m["id"] == "openai/gpt-5")
    assert gpt5["available"] and gpt5["reason"] == "key from key file"
    read_from = data["keys"]["read_from"]
    assert read_from[0].startswith("the OS keyring") and str(keys.keys_file()) in read_from[1]
    text = run_stiva("models", "--config", str(config), env={**with_keyring, "COLUMNS": "200"})
    assert "key from key file" in text.stdout
    assert "keys: read from the OS keyring" in text.stdout and str(keys.keys_file()) in text.stdout


# --- the server's token ---------------------------------------------------------------------------


def test_serve_show_token_keeps_the_token_a_later_keyring_would_hide(stiva_home, monkeypatch):
    """The token made while no keyring worked lives in keys.json; once a keyring appears,
    `stiva serve --show-token` shows that same token (clients keep working) and copies it into
    the keyring, instead of making a new one."""
    first = run_stiva("serve", "--show-token", env={**os.environ, "PYTHON_KEYRING_BACKEND": NO_KEYRING})
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip().splitlines()[-1].strip()
    assert "stiva/serve-token" in _file_data()

    later = run_stiva("serve", "--show-token", env={**os.environ, "PYTHON_KEYRING_BACKEND": FILE_KEYRING})
    assert later.returncode == 0, later.stderr
    assert later.stdout.strip().splitlines()[-1].strip() == token
    assert "copied there from the key file" in later.stdout and "created" not in later.stdout
    _use(monkeypatch, FILE_KEYRING)
    assert keys.stored_keys("serve-token") == [("keyring", token), ("key file", token)]  # migrated, and kept
    again = run_stiva("serve", "--show-token", env={**os.environ, "PYTHON_KEYRING_BACKEND": FILE_KEYRING})
    assert again.stdout.strip().splitlines()[-1].strip() == token and "copied" not in again.stdout
    # a session with no keyring again (SSH after a desktop one) reads the same token
    ssh = run_stiva("serve", "--show-token", env={**os.environ, "PYTHON_KEYRING_BACKEND": NO_KEYRING})
    assert ssh.stdout.strip().splitlines()[-1].strip() == token


@pytest.mark.parametrize("store", ["keyring", "file"])
def test_a_token_in_either_store_is_never_replaced(monkeypatch, store):
    from stiva_tui.server.auth import load_or_create_token

    _use(monkeypatch, FILE_KEYRING if store == "keyring" else NO_KEYRING)
    made = load_or_create_token()
    assert made.created
    for backend in (FILE_KEYRING, NO_KEYRING, FILE_KEYRING):
        _use(monkeypatch, backend)
        if backend == NO_KEYRING and store == "keyring":
            continue  # a keyring that went away cannot be read: nothing to keep (nor to see)
        again = load_or_create_token()
        assert again.value == made.value and not again.created
