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
    # issue 50, part 7: base32, reversed, spaced and UTF-16 hex copies
    full = base64.b32encode(raw).decode()
    forms |= {"b32": full, "b32-lower-unpadded": full.lower().rstrip("=")}
    for prefix in (b"x", b"xy", b"xyz", b"wxyz", b"Bearer "):
        forms[f"b32-after-{prefix!r}"] = base64.b32encode(prefix + raw + b" and more").decode()
    forms |= {
        "reversed": key[::-1],
        "reversed-upper": key[::-1].upper(),
        "spaced": " ".join(key),
        "spaced-wide": "  ".join(key.upper()),
        "spaced-lines": "\n".join(key),
        "zero-width": "\u200b".join(key),
        "reversed-spaced": " ".join(key[::-1]),
        "utf16le-hex": key.encode("utf-16-le").hex(),
        "utf16be-hex": key.encode("utf-16-be").hex().upper(),
        "utf16be-hex-spaced": " ".join(f"{b:02x}" for b in key.encode("utf-16-be")),
        "utf16-escapes": "".join(f"\\u{ord(ch):04x}" for ch in key),
        "hex-spaced": " ".join(f"{b:02x}" for b in raw),
        "hex-colons": ":".join(f"{b:02X}" for b in raw),
        "hex-escapes": "".join(f"\\x{b:02x}" for b in raw),
        "hex-0x": ", ".join(f"0x{b:02x}" for b in raw),
    }
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
        assert piece[::-1] not in masked and piece[::-1].upper() not in masked
    assert "0 1 2 3" not in masked and "30 31 32" not in masked and "3000310032" not in masked
    if form.startswith("b32"):
        for token in re.findall(r"[A-Za-z2-7]{8,}", masked):
            for start in range(8):
                piece = token[start:].upper()[: (len(token) - start) // 8 * 8]
                assert b"0123456789" not in base64.b32decode(piece), f"{form}: the key is still in {token!r}"
    if form.startswith("b64"):
        for token in re.findall(r"[A-Za-z0-9+/_-]{8,}", masked):
            token = token.replace("-", "+").replace("_", "/")
            for start in range(4):  # whatever the alignment of what is left
                piece = token[start:][: (len(token) - start) // 4 * 4]
                assert b"0123456789" not in base64.b64decode(piece), f"{form}: the key is still in {token!r}"


def test_mask_leaves_ordinary_text_alone():
    text = "HTTP 401: Incorrect API key provided. See https://example.com/docs%2Fkeys for help."
    assert keys.mask(text, [MASKED_KEY]) == text


def test_mask_of_a_spaced_key_in_a_long_hostile_text_takes_no_time():
    """The separators a spaced copy may hold are never a key's characters, so no text makes the
    pattern backtrack: 64 KiB of near-misses are masked in well under a second."""
    import time

    key = "sk-a-b_c.d-e_f.g-h_i.j"
    text = (" ".join(key[:-1]) + "   ---___...   ") * (2**16 // 60)
    started = time.perf_counter()
    assert keys.mask_known(text, [key]) == text
    assert time.perf_counter() - started < 1.0


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


# --- masking a streamed answer (issue 50, part 7) ------------------------------------------------

OTHER_KEY = "another-secret-value-123"


def _echo_text() -> str:
    forms = _encodings(MASKED_KEY)
    chosen = ["exact", "upper", "b64-after-b'user:'", "b32", "reversed", "spaced", "percent", "utf16-escapes"]
    return "You sent: " + " | ".join(f"{name}={forms[name]}" for name in chosen) + f" and {OTHER_KEY}. Done."


def _streamed(pieces: list[str], secrets: list[str]) -> tuple[str, list[int]]:
    """The text an AnswerMask passes on for `pieces`, and how much it held back after each."""
    answer = keys.AnswerMask(secrets)
    out, held = [], []
    for piece in pieces:
        out.append(answer.feed(piece))
        held.append(sum(len(p) for p in pieces[: len(held) + 1]) - sum(len(o) for o in out))
    return "".join(out) + answer.flush(), held


def test_a_streamed_answer_is_masked_as_the_whole_is_however_it_is_split():
    import random

    text = _echo_text()
    whole = keys.mask_known(text, [MASKED_KEY, OTHER_KEY])
    assert whole.startswith("You sent: exact=[redacted] | upper=[redacted]") and whole.endswith("[redacted]. Done.")
    rng = random.Random(50)
    splits = [[text[i : i + 1] for i in range(len(text))]]  # a character at a time
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, 60)))
        splits.append([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])])
    for pieces in splits:
        streamed, _ = _streamed(pieces, [MASKED_KEY, OTHER_KEY])
        assert streamed == whole


def test_a_key_split_across_two_deltas_is_still_masked():
    text = f"Authorization: Bearer {MASKED_KEY} was received"
    half = text.index(MASKED_KEY) + len(MASKED_KEY) // 2
    streamed, held = _streamed([text[:half], text[half:]], [MASKED_KEY])
    assert streamed == "Authorization: Bearer [redacted] was received"
    assert held[0] == half - len("Authorization: Bearer ")  # the key's first half waited for the rest


@pytest.mark.parametrize(
    "text, most_held",
    [
        # "x " may begin the key reversed and spaced ("x + / f ..."), and "o" before it a base64 form
        ("The quick brown fox jumps over the lazy dog, then naps. " * 20, 3),
        # "0x6c61 " and "6c 61" may begin the key's hex ("6c 61 62 2e": "lab.")
        ("def f(token):\n    return token * 2 + 0x6c61  # 6c 61, %20 and \\u0041\n" * 10, 8),
    ],
)
def test_a_streamed_answer_without_a_key_is_passed_on_unchanged_and_at_once(text, most_held):
    """Ordinary text is held back only while it may begin a form of a key, a few characters,
    never a key's length, and is not changed (a credential's shape, as in `token = ...`, is
    masked in errors only)."""
    pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
    streamed, held = _streamed(pieces, [MASKED_KEY, OTHER_KEY])
    assert streamed == text
    assert max(held) <= most_held


def test_an_answer_mask_without_secrets_passes_pieces_through():
    answer = keys.AnswerMask([None, "", "short"])  # too short to mask: ordinary words
    assert answer.feed("a short piece") == "a short piece" and answer.flush() == ""


@pytest.mark.parametrize("form", ["exact", "spaced", "b64-after-b'user:'", "utf16le-hex", "reversed"])
def test_what_follows_a_whole_key_is_not_held_back(form):
    """A form of a key is held back only until it is whole: the answer after it flows again."""
    text = f"You sent {_encodings(MASKED_KEY)[form]} and then a long tail of ordinary words follows here"
    answer = keys.AnswerMask([MASKED_KEY])
    passed = "".join(answer.feed(text[i : i + 4]) for i in range(0, len(text), 4))
    whole = passed + answer.flush()
    assert whole == keys.mask_known(text, [MASKED_KEY]) and "[redacted]" in whole
    assert len(whole) - len(passed) <= 2  # only the last characters wait for the end
