"""Keys: environment first, then a real file keyring (keyrings.alt) inside a temporary home."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from stiva_tui import keys
from stiva_tui.keys import SecretsError, delete_key, get_key, keyring_status, set_key

KEY = "sk-test-7f3a9c1e5b2d4086"
OTHER = "sk-env-0d9e8f7a6b5c4d3e"


@pytest.fixture
def keyring_home(stiva_home):
    """conftest's STIVA_HOME, whose PlaintextKeyring file lands under it (never the real keyring)."""
    return stiva_home


@pytest.fixture
def failing_keyring(keyring_home, monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    keys.reset_backend()
    return keyring_home


def test_status_names_the_file_backend(keyring_home):
    ok, name = keyring_status()
    assert ok is True
    assert name == "keyrings.alt.file.PlaintextKeyring"


def test_round_trip_in_temporary_home(keyring_home):
    assert get_key("openai", "OPENAI_API_KEY") == (None, "none")
    set_key("openai", KEY)
    assert get_key("openai", "OPENAI_API_KEY") == (KEY, "keyring")
    assert get_key("openai", None) == (KEY, "keyring")
    # The keyring file is inside the temporary home and holds the key under service "stiva",
    # username = provider name.
    files = list(Path(keyring_home).rglob("keyring_pass.cfg"))
    assert len(files) == 1
    text = files[0].read_text()
    assert "[stiva]" in text and "openai =" in text
    # Another provider is separate.
    assert get_key("anthropic", "ANTHROPIC_API_KEY") == (None, "none")


def test_overwrite_and_strip(keyring_home):
    set_key("openai", KEY)
    set_key("openai", f"  {OTHER}\n")
    assert get_key("openai", None) == (OTHER, "keyring")


def test_survives_backend_reset(keyring_home):
    set_key("openai", KEY)
    keys.reset_backend()
    assert get_key("openai", None) == (KEY, "keyring")


def test_environment_beats_keyring(keyring_home, monkeypatch):
    set_key("openai", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OTHER)
    assert get_key("openai", "OPENAI_API_KEY") == (OTHER, "$OPENAI_API_KEY")
    # An empty variable does not count.
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    assert get_key("openai", "OPENAI_API_KEY") == (KEY, "keyring")


def test_delete(keyring_home):
    set_key("openai", KEY)
    assert delete_key("openai") is True
    assert get_key("openai", None) == (None, "none")
    assert delete_key("openai") is False


@pytest.mark.parametrize("bad", ["", "   ", "abc\ndef"])
def test_set_rejects_bad_keys(keyring_home, bad):
    with pytest.raises(SecretsError):
        set_key("openai", bad)
    assert get_key("openai", None) == (None, "none")


def test_without_a_keyring_keys_go_to_a_private_file_said_plainly(failing_keyring):
    import stat

    ok, where = keyring_status()
    assert ok is True and str(keys.keys_file()) in where and "no recommended keyring backend" in where
    assert keys.store_kind() == "file"
    assert get_key("openai", "OPENAI_API_KEY") == (None, "none")
    set_key("openai", KEY, env_var="OPENAI_API_KEY")
    assert get_key("openai", "OPENAI_API_KEY") == (KEY, "key file")
    path = keys.keys_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # only its owner reads it
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".keys-")]  # no scratch file left
    keys.reset_backend()
    assert get_key("openai", None) == (KEY, "key file")  # it survives, and is the one store
    assert delete_key("openai") and not delete_key("openai")
    assert get_key("openai", None) == (None, "none")


def test_a_damaged_key_file_is_one_clear_error(failing_keyring):
    keys.keys_file().parent.mkdir(parents=True, exist_ok=True)
    keys.keys_file().write_text("{not json")
    with pytest.raises(SecretsError, match="keys.json"):
        get_key("openai", "OPENAI_API_KEY")


def test_environment_works_without_keyring(failing_keyring, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OTHER)
    assert get_key("openai", "OPENAI_API_KEY") == (OTHER, "$OPENAI_API_KEY")


def test_unloadable_backend(keyring_home, monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "no.such.module.Keyring")
    keys.reset_backend()
    ok, why = keyring_status()
    assert ok is True and "cannot load a keyring backend" in why and "keys.json" in why


def test_null_backend_is_not_usable(keyring_home, monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    keys.reset_backend()
    ok, why = keyring_status()
    assert ok is True and "disabled" in why and keys.store_kind() == "file"


def test_no_key_in_logs(keyring_home, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    set_key("openai", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", OTHER)
    get_key("openai", "OPENAI_API_KEY")
    get_key("anthropic", "ANTHROPIC_API_KEY")
    assert KEY not in caplog.text and OTHER not in caplog.text


def test_empty_provider_name(keyring_home):
    with pytest.raises(SecretsError):
        set_key("", KEY)


# --- masking every common encoding of a known key (issue 40, part 9) ------------------------------

MASKED_KEY = "lab.Token_0123456789abcdef/+x"  # no sk- shape, and characters that URL encoding changes


def _encodings(key: str) -> dict[str, str]:
    import base64
    from urllib.parse import quote, quote_plus

    raw = key.encode()
    forms = {
        "exact": key,
        "upper": key.upper(),
        "lower": key.lower(),
        "swapped": key.swapcase(),
        "percent": quote(key, safe=""),
        "percent-lower": quote(key, safe="").lower(),
        "percent-plus": quote_plus(key),
        "percent-every-char": "".join(f"%{b:02X}" for b in raw),
        "percent-upper": quote(key.upper(), safe=""),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
    }
    for name, encode in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
        full = encode(raw).decode()
        forms[name] = full
        forms[name + "-unpadded"] = full.rstrip("=")
        for prefix in (b"x", b"xy", b"xyz", b"user:", b"Authorization: Bearer "):
            forms[f"{name}-after-{prefix!r}"] = encode(prefix + raw + b" and more text").decode()
    return forms


@pytest.mark.parametrize("form", sorted(_encodings(MASKED_KEY)))
def test_mask_hides_every_common_encoding_of_a_known_key(form):
    import base64
    import re

    encoded = _encodings(MASKED_KEY)[form]
    text = f"provider said: {encoded} (refused)"
    masked = keys.mask(text, [MASKED_KEY])
    assert "[redacted]" in masked and "provider said:" in masked and "(refused)" in masked
    assert encoded not in masked
    # Nothing long enough to be the key's (or its base64's) middle is left.
    for piece in (MASKED_KEY[4:-4], MASKED_KEY[4:-4].upper(), MASKED_KEY[4:-4].lower()):
        assert piece not in masked
    if form.startswith("b64"):
        for token in re.findall(r"[A-Za-z0-9+/_-]{8,}", masked):
            token = token.replace("-", "+").replace("_", "/")
            for start in range(4):  # whatever the alignment of what is left
                piece = token[start:][: (len(token) - start) // 4 * 4]
                assert b"0123456789" not in base64.b64decode(piece), f"{form}: the key is still in {token!r}"


def test_mask_leaves_ordinary_text_alone():
    text = "HTTP 401: Incorrect API key provided. See https://example.com/docs%2Fkeys for help."
    assert keys.mask(text, [MASKED_KEY]) == text


@pytest.mark.parametrize(
    "key",
    [
        "sk-proj-ABCDEFGHIJKLMNOP1234",
        "SK-PROJ-ABCDEFGHIJKLMNOP1234",
        "Sk-proj-abcdefghijklmnop1234",
        "AIZASYABCDEFGHIJKLMNOPQRSTUV",
    ],
)
def test_key_shapes_are_masked_in_any_case(key):
    assert keys.redact(f"echo: {key}.") == "echo: [redacted]."
