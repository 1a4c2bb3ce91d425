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
from typing import Any

from .core.reading import read_text

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

        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
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
    file PATH" (the file only where it exists, when a keyring works)."""
    backend = _keyring()
    path = keys_file()
    if backend is None:
        return [f"the private file {path}"]
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
    """`text` with every one of `secrets` (the keys actually configured, whatever their shape)
    replaced by [redacted], in the forms a provider may echo it in (see `_secret_pattern`), then
    anything shaped like a credential too (a second guard)."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        if secret in text:  # the common case, and the fast one
            text = text.replace(secret, MASK)
        text = _secret_pattern(secret).sub(MASK, text)
    return redact(text) or ""


_B64 = r"A-Za-z0-9+/_\-"  # both alphabets: standard (+/) and URL-safe (-_)


@functools.lru_cache(maxsize=256)
def _secret_pattern(secret: str) -> re.Pattern[str]:
    """One pattern for the forms of `secret` an echo may take: in any letter case, with any of its
    characters percent-encoded (either hex case; "+" for a space), as hex, and as base64 (standard or
    URL-safe, padded or not, at any of the three byte alignments inside a longer base64 text, as in
    the "user:key" of HTTP basic auth). A base64 text's characters that mix the key's bits with its
    neighbours' are masked where they can be told apart (padding, the token's end), else at most a
    few bits of the key's first and last byte stay."""
    import base64

    def char(ch: str) -> str:
        encoded = "".join(f"%{b:02x}" for b in ch.encode("utf-8"))
        return f"(?:{re.escape(ch)}|{encoded}{'|[+]' if ch == ' ' else ''})"

    raw = secret.encode("utf-8")
    forms = ["".join(char(ch) for ch in secret), re.escape(raw.hex())]
    pattern = "|".join(forms)
    b64_forms = []
    for k in range(3):  # how many bytes precede the key in the encoded text, modulo 3
        full = base64.b64encode(b"\0" * k + raw).decode("ascii")
        first, end = -(-8 * k // 6), (8 * (k + len(raw))) // 6  # the characters made of key bits only
        core = full[first:end]
        for alphabet in (core, core.replace("+", "-").replace("/", "_")):
            lead = f"[{_B64}]?" if k else ""
            b64_forms.append(f"{lead}{re.escape(alphabet)}(?:[{_B64}](?:={{1,2}}|(?![{_B64}=])))?")
    # Letter case matters in base64 (not in the other forms): its part of the pattern turns
    # case-insensitivity off.
    return re.compile(f"(?i:{pattern})|(?-i:{'|'.join(dict.fromkeys(b64_forms))})")


def redact(text: str | None) -> str | None:
    """Mask anything shaped like a credential in a text (the second guard)."""
    if not text:
        return text
    for pattern in _SHAPES:
        text = pattern.sub(lambda m: (m.groupdict().get("keep") or "") + MASK, text)
    return text
