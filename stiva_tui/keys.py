"""API keys: from the environment first, then the OS keyring (service "stiva", user = provider),
then a private file: `keys.json` in the config folder, mode 0600, written whole and renamed into
place. A key is saved in the keyring, or in the file where no keyring works (SSH, containers, WSL,
headless Linux). Both are read, keyring first: a keyring that appears later (`pipx inject
stiva-tui keyrings.alt`, a desktop session after SSH) hides none of the keys saved in the file,
and a key saved again goes to the keyring and leaves the file, so each key lives in one place. The
app's keys screen, the command line and the server's token all use these stores, and say which.

Keys are returned to the caller and nowhere else: this module never logs, prints or formats a key
into a message. Every keyring problem becomes a `SecretsError` whose message says what to do
instead (usually: set the provider's environment variable).

The keyring backend is chosen once (by the `keyring` package: `PYTHON_KEYRING_BACKEND`, its config
file, or the best installed backend) and remembered; `reset_backend()` forgets it (tests use it
after changing the environment).
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .core.reading import read_text
from .core.terminal import PrintableStream, printable

SERVICE = "stiva"

_lock = threading.Lock()
_backend: Any = None  # keyring.backend.KeyringBackend once chosen
_backend_error: str | None = None


class SecretsError(Exception):
    """The keyring could not be used; the message says why and what to do instead."""


def reset_backend() -> None:
    """Forget the chosen keyring backend, so the next call detects it again."""
    global _backend, _backend_error
    with _lock:
        _backend = None
        _backend_error = None


def _backend_name(backend: Any) -> str:
    if isinstance(backend, FileKeys):
        return backend.describe()
    cls = type(backend)
    return f"{cls.__module__}.{cls.__qualname__}"


def _unusable_reason(backend: Any) -> str | None:
    """Why the backend cannot store keys (None when it can)."""
    from keyring.backends import chainer, fail, null

    if isinstance(backend, fail.Keyring):
        return "no recommended keyring backend is installed"
    if isinstance(backend, null.Keyring):
        return "the keyring is disabled (null backend)"
    if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
        return "no keyring backend is available"
    return None


def keys_file():
    """The private file that holds keys where no keyring works."""
    from . import paths

    return paths.config_dir() / "keys.json"


class FileKeys:
    """A keyring-shaped store in one JSON file readable by its owner only (0600, in a folder made
    0700). Each write makes a new file and renames it over the old one, so a crash never leaves
    half a file, and the file is never readable by others, not even briefly."""

    def __init__(self, path, reason: str):
        self.path = path
        self.reason = reason  # why there is no keyring

    def _read(self) -> dict[str, str]:
        import json

        try:
            data = json.loads(read_text(self.path, 16 << 20))  # past it: a ValueError, as a damaged file
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise SecretsError(
                f"the key file {self.path} cannot be read ({type(exc).__name__}); fix or remove it"
            ) from None
        return (
            {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
            if isinstance(data, dict)
            else {}
        )

    def _write(self, data: dict[str, str]) -> None:
        import json
        import tempfile

        from . import paths

        # 0700, even where the folder was made open before (by `stiva config`, an older Stiva)
        paths.private_dir(self.path.parent, tighten=True)
        fd, scratch = tempfile.mkstemp(dir=self.path.parent, prefix=".keys-")  # mkstemp makes it 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
            os.replace(scratch, self.path)
        except BaseException:
            try:
                os.unlink(scratch)
            except OSError:
                pass
            raise

    def get_password(self, service: str, user: str) -> str | None:
        return self._read().get(f"{service}/{user}")

    def set_password(self, service: str, user: str, value: str) -> None:
        data = self._read()
        data[f"{service}/{user}"] = value
        self._write(data)

    def delete_password(self, service: str, user: str) -> None:
        from keyring.errors import PasswordDeleteError

        data = self._read()
        if data.pop(f"{service}/{user}", None) is None:
            raise PasswordDeleteError(user)
        self._write(data)

    def describe(self) -> str:
        return f"the private file {self.path} (only you can read it: {self.reason})"


def _keyring() -> Any:
    """The usable keyring backend, or None where none works (`_backend_error` says why)."""
    global _backend, _backend_error
    with _lock:
        if _backend is None and _backend_error is None:
            try:
                import keyring.core

                keyring.core.init_backend()
                _backend = keyring.core.get_keyring()
            except Exception as exc:  # a bad PYTHON_KEYRING_BACKEND, a broken config file, ...
                _backend_error = f"cannot load a keyring backend ({type(exc).__name__}: {exc})"
            else:
                _backend_error = _unusable_reason(_backend)
        return None if _backend_error is not None else _backend


def _get_backend() -> Any:
    """Where a key is saved: the keyring backend, or the private key file where no keyring is usable."""
    backend = _keyring()
    return backend if backend is not None else FileKeys(keys_file(), f"no keyring works here: {_backend_error}")


def _stores() -> list[Any]:
    """Every store keys are read from, in order: the keyring (when one works), then the key file."""
    backend = _keyring()
    file_keys = FileKeys(keys_file(), "keys saved while no keyring worked")
    return [file_keys] if backend is None else [backend, file_keys]


def _where(backend: Any) -> str:
    return "key file" if isinstance(backend, FileKeys) else "keyring"


def _hint(provider: str, env_var: str | None) -> str:
    if env_var:
        return f"set ${env_var} instead"
    return f"give provider {provider!r} an api_key_env in the config instead"


def _check_provider(provider: str) -> None:
    if not provider or not provider.strip():
        raise SecretsError("a provider name is needed to store or look up a key")


def keyring_status() -> tuple[bool, str]:
    """(whether keys can be stored, where: the keyring backend's name, or the private file and
    why no keyring works)."""
    return True, _backend_name(_get_backend())


def store_kind() -> str:
    """ "keyring" or "file": where `set_key` puts a key."""
    return "file" if isinstance(_get_backend(), FileKeys) else "keyring"


def key_stores() -> list[str]:
    """Where keys are read from, in order, in words: "the OS keyring (NAME)", then "the private
    file PATH". The file only where it exists: a file not yet written holds no key to read (with no
    keyring, the list is then empty: no key is stored anywhere yet)."""
    backend = _keyring()
    path = keys_file()
    if backend is None:
        return [f"the private file {path}"] if path.exists() else []
    stores = [f"the OS keyring ({_backend_name(backend)})"]
    if path.exists():
        stores.append(f"the private file {path} (keys saved while no keyring worked)")
    return stores


def get_key(provider: str, env_var: str | None) -> tuple[str | None, str]:
    """The key for `provider` and where it came from: ("...", "$VAR"), ("...", "keyring"),
    ("...", "key file") or (None, "none"); the keyring is read before the key file. Raises
    SecretsError when the environment has no key and no store could be read."""
    if env_var:
        value = os.environ.get(env_var, "").strip()
        if value:
            return value, f"${env_var}"
    _check_provider(provider)
    failure: SecretsError | None = None
    for backend in _stores():
        try:
            value = backend.get_password(SERVICE, provider)
        except SecretsError as exc:  # a damaged key file says so itself
            failure = failure or exc
            continue
        except Exception as exc:
            failure = failure or SecretsError(
                f"keyring {_backend_name(backend)} failed to read the key for {provider!r} "
                f"({type(exc).__name__}): {_hint(provider, env_var)}"
            )
            continue
        if value and value.strip():
            return value.strip(), _where(backend)
    if failure is not None:
        raise failure
    return None, "none"


def stored_keys(provider: str) -> list[tuple[str, str]]:
    """(where, key) for each store that holds a key for `provider`, in the order they are read:
    the first is the one used (unless the environment has one). A store that cannot be read is
    left out."""
    _check_provider(provider)
    found = []
    for backend in _stores():
        try:
            value = backend.get_password(SERVICE, provider)
        except Exception:  # noqa: BLE001 - get_key says why; here, only where keys are
            continue
        if value and value.strip():
            found.append((_where(backend), value.strip()))
    return found


def set_key(provider: str, key: str, env_var: str | None = None, *, move: bool = True) -> None:
    """Store `key` for `provider` in the keyring, or in the key file where no keyring works
    (never anywhere else). Saved in the keyring, it leaves the key file, unless `move` is False
    (the copy in the file then stays, for sessions with no keyring)."""
    _check_provider(provider)
    key = (key or "").strip()
    if not key:
        raise SecretsError("the key is empty")
    if any(ch in key for ch in "\r\n\x00"):
        raise SecretsError("the key contains a line break or NUL character")
    try:
        backend = _get_backend()
    except SecretsError as exc:
        raise SecretsError(f"no keyring backend ({exc}): {_hint(provider, env_var)}") from None
    try:
        backend.set_password(SERVICE, provider, key)
    except Exception as exc:
        raise SecretsError(
            f"keyring {_backend_name(backend)} failed to store the key for {provider!r} "
            f"({type(exc).__name__}): {_hint(provider, env_var)}"
        ) from None
    if move and not isinstance(backend, FileKeys):  # saved in the keyring: an older copy leaves the file
        try:
            FileKeys(keys_file(), "").delete_password(SERVICE, provider)
        except Exception:  # noqa: BLE001 - none there (the usual case), or a damaged file: the keyring's wins
            pass


def delete_key(provider: str) -> bool:
    """Remove the stored key of `provider` from every store that holds one (the keyring and the
    key file: a copy left in one would come back); False when there was none."""
    _check_provider(provider)
    from keyring.errors import PasswordDeleteError

    removed = False
    for backend in _stores():
        try:
            if backend.get_password(SERVICE, provider) is None:
                continue
            backend.delete_password(SERVICE, provider)
        except PasswordDeleteError:
            continue
        except SecretsError:
            raise
        except Exception as exc:
            raise SecretsError(
                f"keyring {_backend_name(backend)} failed to delete the key for {provider!r} ({type(exc).__name__})"
            ) from None
        removed = True
    return removed


# --- masking ---------------------------------------------------------------------------------------

_SHAPES = [
    re.compile(r"(?i)(?P<keep>bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(
        r"(?i)(?P<keep>(?:api[_-]?key|x-api-key|x-goog-api-key|authorization|token)[\"']?\s*[:=]\s*[\"']?)"
        r"[A-Za-z0-9._~+/\-]{8,}"
    ),
    re.compile(r"(?i)\b(?:sk|pk|rk|gsk|xai)-[A-Za-z0-9_\-]{12,}"),  # any case: SK-... is the key upper-cased
    re.compile(r"(?i)\bAIza[0-9A-Za-z_\-]{20,}"),
]
MASK = "[redacted]"
MIN_SECRET_CHARS = 6  # shorter values (a test's "x") would mask ordinary words


def mask(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` made printable, then with every one of `secrets` (the keys actually configured,
    whatever their shape) replaced by [redacted], in the forms a provider may echo it in (see
    `_secret_source`), then anything shaped like a credential too (a second guard). How an error
    text is masked."""
    return redact(mask_known(text, secrets)) or ""


def mask_known(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` made printable (core/terminal.py: escape sequences, control and invisible characters
    gone), then with every one of `secrets` replaced by [redacted] in the forms of
    `_secret_source`, and nothing else: how an answer is masked. Printable first: a key with an
    escape sequence or a zero-width character between each of its characters is no form of it,
    and stripping them afterwards would put it back together. The credential shapes of `redact`
    are left out, as they would also mask ordinary text an answer may hold (`token =
    sys.stdin.readline()`). Only the secrets a form of which may be in the text (`_present`) have
    their whole patterns compiled and run: those take tens of milliseconds a key to compile."""
    text = printable(text)
    usable = _usable(secrets)
    if not usable or not text:
        return text
    present = _present(text, _form_checks(tuple(usable)))
    return _mask_in_order(text, [secret for secret in usable if secret in present])


def _mask_in_order(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = _secret_pattern(secret).sub(MASK, text)
    return text


def _usable(secrets: Iterable[str | None]) -> list[str]:
    """The secrets long enough to mask, longest first (a key that holds another is masked whole)."""
    return sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def _candidates(checks: tuple[_Checks, _Checks], ch: str) -> tuple[_Check, ...]:
    """The forms that may begin with `ch`."""
    any_case, cased = checks
    return (*any_case.get(ch.casefold(), ()), *cased.get(ch, ()))


def _present(text: str, checks: tuple[_Checks, _Checks]) -> set[str]:
    """The secrets a form of which may be in `text`: none of the others' is."""
    present: set[str] = set()
    for index, ch in enumerate(text):
        for check in _candidates(checks, ch):
            if check.whole_at(text, index):
                present.update(check.secrets)
    return present


class AnswerMask:
    """Masks `secrets` in a text that arrives in pieces (a streamed answer) as `mask_known` masks
    the whole: `feed(piece)` returns what may be shown now, printable and masked; `flush()` the
    rest, at the end. Each piece is made printable first (`PrintableStream`, which holds back at
    most the start of an escape sequence), so a key woven with escapes or invisible characters,
    across pieces too, is masked; with no secrets the pieces are still made printable.

    Held back is only the end of the text that could still become one of the secrets' forms: from
    the first character from which the rest of the text begins a form (or is a whole one: it may
    grow), and the last character when it could be the first of a base64 or base32 form. So
    ordinary text is held back by a character or two until the next piece comes, never by a key's
    length, and a streamed answer stays as prompt as it was. The test costs a dictionary look-up
    per character, and a match only where a character can begin a form."""

    def __init__(self, secrets: Iterable[str | None]):
        self.secrets = _usable(secrets)
        self._checks = _form_checks(tuple(self.secrets)) if self.secrets else None
        self._held = ""
        self._printable = PrintableStream()

    def feed(self, piece: str) -> str:
        piece = self._printable.feed(piece)
        if self._checks is None:
            return piece
        text = self._held + piece
        cut, present = self._safe_end(text)
        if not present:  # no form of a secret is anywhere before the cut: nothing to mask
            self._held = text[cut:]
            return text[:cut]
        shown, self._held = self._mask_before(text, cut, [s for s in self.secrets if s in present])
        return shown

    def flush(self) -> str:
        text, self._held = self._held + self._printable.flush(), ""
        if self._checks is None or not text:
            return text
        present = _present(text, self._checks)
        return _mask_in_order(text, [s for s in self.secrets if s in present])

    def _safe_end(self, text: str) -> tuple[int, set[str]]:
        """Where the part of `text` that no later piece can make into a secret's form ends, and
        the secrets a form of which may begin before it (the others' need no masking)."""
        assert self._checks is not None
        cut, present = len(text), set()
        for index, ch in enumerate(text):
            for check in _candidates(self._checks, ch):
                if check.begins_at(text, index):
                    cut = index
                    break
                if check.whole_at(text, index):
                    present.update(check.secrets)
            if cut == index:
                break
        if cut and text[cut - 1] in _ENCODED_CHARS:
            cut -= 1  # it may be the character of an encoded form that mixes in the bits before it
        return cut, present

    @staticmethod
    def _mask_before(text: str, cut: int, secrets: list[str]) -> tuple[str, str]:
        """`text` up to `cut` masked as `mask_known` masks it inside the whole text (a form's
        pattern sees the characters after the cut), and the rest, which waits for the next piece;
        a whole form that the cut would split waits with it."""
        for secret in secrets:
            parts, done, shift = [], 0, 0
            for match in _secret_pattern(secret).finditer(text):
                if match.start() >= cut:
                    break
                if match.end() > cut:
                    cut = match.start()
                    break
                parts += [text[done : match.start()], MASK]
                done, shift = match.end(), shift + len(MASK) - (match.end() - match.start())
            if parts:
                text, cut = "".join(parts) + text[done:], cut + shift
        return text[:cut], text[cut:]


class _Check:
    """One form of a secret, as `AnswerMask` tests it: its patterns compiled when first needed
    (most never are: a form is tested only where a character it may begin with comes), and an
    encoded form's characters compared without a pattern."""

    __slots__ = ("_begins", "_begins_closely", "_ending", "_whole", "form", "secrets")

    def __init__(self, form: _Form):
        self.form = form
        self.secrets: list[str] = []  # whose form it is
        self._begins: re.Pattern[str] | None = None
        self._begins_closely: re.Pattern[str] | None = None
        self._whole: re.Pattern[str] | None = None
        self._ending: re.Pattern[str] | None = None

    def begins_at(self, text: str, index: int) -> bool:
        """Whether `text` from `index` to its end begins the form, or is the whole of it. The
        pattern that follows a few units is tried first; only where it matches (where a key's
        form has come, or most of its beginning) the one that follows many more."""
        form = self.form
        if not form.literal:
            if self._begins is None:
                self._begins = re.compile(form.flagged(form.beginning(_UNITS_FOLLOWED)))
            if self._begins.match(text, index) is None:
                return False
            if len(form.units) <= _UNITS_FOLLOWED:
                return True
            if self._begins_closely is None:
                self._begins_closely = re.compile(form.flagged(form.beginning(_UNITS_FOLLOWED_CLOSELY)))
            return self._begins_closely.match(text, index) is not None
        literal = form.literal
        if len(text) - index > len(literal) + 8:  # past the end and its padding: no beginning
            return False
        tail = text[index:].upper() if form.any_case else text[index:]
        if len(tail) <= len(literal):
            return literal.startswith(tail)
        if self._ending is None:
            self._ending = re.compile(form.flagged(f"{form.end_begun}\\Z"))
        return tail.startswith(literal) and self._ending.match(tail, len(literal)) is not None

    def whole_at(self, text: str, index: int) -> bool:
        """Whether the form, but its lead, may be in `text` at `index` (its first units are), so
        that the text is to be masked."""
        form = self.form
        if not form.literal:
            if self._whole is None:
                first = form.units[:_UNITS_FOLLOWED]
                pattern = "".join(p for p, _ in first) + (form.end if first == form.units else "")
                self._whole = re.compile(form.flagged(pattern))
            return self._whole.match(text, index) is not None
        piece = text[index : index + len(form.literal)]
        return (piece.upper() if form.any_case else piece) == form.literal


_Checks = dict[str, tuple[_Check, ...]]


@functools.lru_cache(maxsize=64)
def _form_checks(secrets: tuple[str, ...]) -> tuple[_Checks, _Checks]:
    """For `AnswerMask`: the forms of `secrets` by the character they may begin with (their lead
    aside), casefolded for the forms of any letter case (the first table) and as they are."""
    checks: dict[_Form, _Check] = {}
    tables: tuple[dict[str, list[_Check]], dict[str, list[_Check]]] = ({}, {})
    for secret in secrets:
        forms = _forms(secret)
        for table, group in zip(tables, (forms.case_free, forms.cased)):
            for form in group:
                check = checks.setdefault(form, _Check(form))
                if secret not in check.secrets:
                    check.secrets.append(secret)
                for ch in form.starts:
                    if check not in table.setdefault(ch, []):
                        table[ch].append(check)
    return {ch: tuple(c) for ch, c in tables[0].items()}, {ch: tuple(c) for ch, c in tables[1].items()}


_B64 = r"A-Za-z0-9+/_\-"  # both alphabets: standard (+/) and URL-safe (-_)
_B32 = "A-Z2-7"  # RFC 4648's alphabet; matched in either letter case
_ENCODED_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
# What may stand between a key's characters in a "spaced" copy: up to three spaces, line ends or
# zero-width characters (U+200B-U+200D, U+2060; never a key's characters, so the pattern cannot
# backtrack). U+FEFF is left out: a class that holds it is ten times slower to compile.
_SPACED = "[\\s\u200b-\u200d\u2060]{0,3}"
# ... and before each byte of a hex copy: "6c 61", "6c:61", "\x6c\x61", "0x6c, 0x61".
_HEX_LEAD = r"(?:\\x|0x)?"
_HEX_SEP = r"[\s:,.\-]{0,2}" + _HEX_LEAD
_HEX_SEP_BEGUN = r"[\s:,.\-]{0,2}(?:\\x?|0x?)?"  # a separator cut off anywhere
# How many units of a form `AnswerMask`'s patterns follow exactly (their size, so the time to
# compile them, grows with it, and Python's parser recurses once for each): past them, the test
# for a form's beginning takes any text up to the most the rest of the form can take, and the
# test for a whole one passes. Both only hold back or mask more, never less, and only where that
# many of a key's characters have come in some form. The first patterns are compiled for every
# form that a character of an answer may begin; the close ones only once such a pattern matched.
_UNITS_FOLLOWED = 8
_UNITS_FOLLOWED_CLOSELY = 96


@dataclass(frozen=True)
class _Form:
    """One way a secret may be written, as a sequence of units: each unit's pattern and the
    pattern of its proper beginnings ("" for one character). `lead` is a character that may come
    first and mix in other bits (an encoded form's); `end` follows the last unit in the whole form,
    and `end_begun` is what of it may have come at the end of a text. `starts`: the characters
    the form may begin with, `lead` aside (casefolded in a form of any letter case). `literal`: an
    encoded form's characters of key bits only (upper-case where any case goes), which `AnswerMask`
    tests without a pattern: compiling one for every form would cost more than all the tests."""

    units: tuple[tuple[str, str], ...]
    starts: frozenset[str]
    widest: tuple[int, ...]  # the most characters each unit can take
    any_case: bool = True
    lead: str = ""
    end: str = ""
    end_begun: str = ""
    literal: str = ""

    def whole(self) -> str:
        return (f"{self.lead}?" if self.lead else "") + self.core()

    def core(self) -> str:
        """The form without its lead."""
        return "".join(pattern for pattern, _ in self.units) + self.end

    def beginning(self, followed: int) -> str:
        """The text from here to its end begins this form (the lead aside), or is the whole of it,
        the first `followed` units followed exactly."""
        units = self.units[:followed]
        rest = f"{self.end_begun}\\Z"
        if units != self.units:
            rest = f"(?s:.{{0,{sum(self.widest[followed:])}}})\\Z"
        for index in range(len(units) - 1, -1, -1):
            pattern, begun = units[index]
            cut = f"|{begun}\\Z" if begun else ""
            end_here = "" if index == 0 else "\\Z|"  # the text may end after any unit but none
            rest = f"(?:{end_here}{pattern}{rest}{cut})"
        return rest

    def flagged(self, pattern: str) -> str:
        """`pattern` compared in any letter case, or in this one, as the form is."""
        return f"(?{'i' if self.any_case else '-i'}:{pattern})"


@dataclass(frozen=True)
class _Forms:
    case_free: tuple[_Form, ...]  # compared in any letter case
    cased: tuple[_Form, ...]  # base64, whose letter case is part of the value

    def whole(self) -> str:
        case_free = "|".join(dict.fromkeys(form.whole() for form in self.case_free))
        return f"(?i:{case_free})|(?-i:{'|'.join(dict.fromkeys(form.whole() for form in self.cased))})"


@functools.lru_cache(maxsize=256)
def _secret_pattern(secret: str) -> re.Pattern[str]:
    return re.compile(_secret_source(secret))


def _secret_source(secret: str) -> str:
    """One pattern for the forms of `secret` an echo may take: in any letter case, forwards or
    reversed, with up to three spaces or zero-width characters between its characters, any of them
    percent-encoded (either hex case; "+" for a space) or written as a \\u escape; as hex (of its
    UTF-8, UTF-16LE or UTF-16BE bytes, the bytes maybe apart or written \\x6c or 0x6c); as base32
    (either letter case) and as base64 (standard or URL-safe), padded or not, at any byte alignment
    inside a longer encoded text, as in the "user:key" of HTTP basic auth. An encoded text's
    characters that mix the key's bits with its neighbours' are masked where they can be told apart
    (padding, the token's end), else at most a few bits of the key's first and last byte stay.
    What no pattern here catches: docs/security.md."""
    return _forms(secret).whole()


@functools.lru_cache(maxsize=256)
def _forms(secret: str) -> _Forms:
    import base64

    raw = secret.encode("utf-8")
    case_free = [_spelled(secret), _spelled(secret[::-1])]
    case_free += [_hexed(data) for data in (raw, secret.encode("utf-16-le"), secret.encode("utf-16-be"))]
    case_free += _encoded(base64.b32encode, raw, 5, 5, _B32, "=+", any_case=True)
    cased = _encoded(base64.b64encode, raw, 3, 6, _B64, "={1,2}", any_case=False)
    return _Forms(tuple(case_free), tuple(cased))


def _spelled(chars: str) -> _Form:
    """`chars` as text, each maybe percent-encoded or \\u-escaped, spaced or not."""
    between = "" if any(ch.isspace() for ch in chars) else _SPACED
    units, widest = [], []
    for index, ch in enumerate(chars):
        spellings = [ch, "".join(f"%{b:02x}" for b in ch.encode("utf-8"))]
        if ord(ch) < 0x10000:
            spellings.append(f"\\u{ord(ch):04x}")
        pattern = "|".join(re.escape(s) for s in spellings) + ("|[+]" if ch == " " else "")
        begun = "|".join(b for b in (_begun(s) for s in spellings) if b)
        sep = between if index else ""
        units.append((f"{sep}(?:{pattern})", f"{sep}(?:{begun})?" if sep else f"(?:{begun})"))
        widest.append((3 if sep else 0) + max(len(s) for s in spellings))
    starts = {chars[0].casefold(), "%", "\\"} | ({"+"} if chars[0] == " " else set())
    return _Form(tuple(units), frozenset(starts), tuple(widest))


def _hexed(data: bytes) -> _Form:
    units = []
    for index, byte in enumerate(data):
        digits = f"{byte:02x}"
        sep, sep_begun = (_HEX_SEP, _HEX_SEP_BEGUN) if index else (_HEX_LEAD, r"(?:\\x?|0x?)?")
        units.append((f"{sep}{digits}", f"{sep_begun}(?:{digits[0]})?"))
    widest = (4,) + (6,) * (len(data) - 1)  # "0x6c", then two separators too
    return _Form(tuple(units), frozenset({"\\", "0", f"{data[0]:02x}"[0]}), widest)


def _encoded(
    encode: Any, raw: bytes, group: int, bits: int, chars: str, padding: str, *, any_case: bool
) -> list[_Form]:
    """`raw` inside a longer base64 or base32 text, whose characters (of the class `chars`) hold
    `bits` bits each, `group` bytes making whole characters, at every byte alignment: the
    characters made of its bits alone, and the neighbouring ones that mix in other bits where
    they can be told apart (padding, the token's end). Base64 in both its alphabets."""
    forms = []
    for k in range(group):  # how many bytes precede the key in the encoded text, modulo `group`
        full = encode(b"\0" * k + raw).decode("ascii")
        first, end = -(-8 * k // bits), (8 * (k + len(raw))) // bits  # the characters of key bits only
        core = full[first:end]
        for text in dict.fromkeys((core, core.replace("+", "-").replace("/", "_"))):
            forms.append(
                _Form(
                    tuple((re.escape(ch), "") for ch in text),
                    frozenset({text[0].casefold() if any_case else text[0]}),
                    (1,) * len(text),
                    any_case=any_case,
                    lead=f"[{chars}]" if k else "",
                    end=f"(?:[{chars}](?:{padding}|(?![{chars}=])))?",
                    end_begun=f"(?:[{chars}]=*)?",
                    literal=text.upper() if any_case else text,
                )
            )
    return forms


def _begun(literal: str) -> str:
    """A pattern for the proper, non-empty beginnings of `literal` ("" when it has none)."""
    if len(literal) < 2:
        return ""
    pattern = ""
    for ch in reversed(literal[1:-1]):
        pattern = f"(?:{re.escape(ch)}{pattern})?"
    return re.escape(literal[0]) + pattern


def redact(text: str | None) -> str | None:
    """Mask anything shaped like a credential in a text (the second guard)."""
    if not text:
        return text
    for pattern in _SHAPES:
        text = pattern.sub(lambda m: (m.groupdict().get("keep") or "") + MASK, text)
    return text
