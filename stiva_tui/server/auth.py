"""The server's bearer token, the loopback rule for `--no-auth`, and the ASGI guard that checks the
token and the body size before the app reads anything.

The token is created on first use (`secrets.token_urlsafe`) and kept in the OS keyring (service
"stiva", user "serve-token"); `$STIVA_SERVE_TOKEN` overrides it. Where no keyring backend works it
is saved to the private key file (keys.json, 0600) instead, and the caller is told so. Both stores
are read: a keyring that appears later never hides the token clients have, and a new token is
made only where no store holds one.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets as pysecrets
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..keys import SecretsError, get_key, set_key, store_kind

TOKEN_USER = "serve-token"
TOKEN_ENV = "STIVA_SERVE_TOKEN"
# Served without a token, so a browser or a client can read the API's shape.
PUBLIC_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


@dataclass(frozen=True)
class ServeToken:
    value: str
    where: str  # "$STIVA_SERVE_TOKEN", "keyring" or the file's path
    created: bool  # made just now: the caller prints it once


def token_file() -> Path:
    return paths.config_dir() / "serve-token"


def load_or_create_token() -> ServeToken:
    """The server's token: from the environment, the keyring, the key file or the fallback file,
    else a new one. A new token is made only where none of them holds one: clients keep the one
    they have. A token in the key file, once a keyring works, is copied into the keyring."""
    try:
        value, where = get_key(TOKEN_USER, TOKEN_ENV)  # the keyring first, then keys.json
    except SecretsError:
        return _file_token()
    if value:
        if where == "key file" and store_kind() == "keyring":
            where = _migrated(value)
        return ServeToken(value, where, False)
    if token_file().exists():  # a token made before keys had a file of their own: clients use it
        return _file_token()
    value = pysecrets.token_urlsafe(32)
    try:
        set_key(TOKEN_USER, value)
    except SecretsError:
        return _file_token()
    return ServeToken(value, "keyring" if store_kind() == "keyring" else "the key file", True)


def _migrated(value: str) -> str:
    """Copy the token found in the key file into the keyring that works now (the same token:
    clients keep working); the file keeps its copy, so that a session with no keyring (SSH, after
    a desktop one) reads the same token rather than making a new one. Where it is, in words."""
    try:
        set_key(TOKEN_USER, value, move=False)
    except SecretsError:
        return "the key file (a keyring works now, but the token could not be copied into it)"
    return "keyring, copied there from the key file, which keeps it for sessions with no keyring"


def _file_token() -> ServeToken:
    path = token_file()
    if path.exists():
        value = path.read_text(encoding="utf-8").strip()
        if value:
            return ServeToken(value, str(path), False)
    paths.private_dir(path.parent, tighten=True)  # the config folder: 0700, as the key file's
    value = pysecrets.token_urlsafe(32)
    # Created 0600 from the start: the token is never readable by others, not even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    os.chmod(path, 0o600)
    return ServeToken(value, str(path), True)


def is_loopback_host(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost: the only hosts `--no-auth` may bind to."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(value: str) -> str:
    """The host part of a Host header or an Origin ("http://h:8787" / "h:8787" / "[::1]:8787")."""
    value = value.strip()
    if "://" in value:
        value = value.split("://", 1)[1]
    value = value.split("/", 1)[0]
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """ASGI middleware: bearer token first (401), then body size (413), before any route runs.

    The body is read here up to the limit and replayed to the app, so a route never sees a body
    over `max_body_bytes`, and an unauthenticated client cannot make the server read one.

    Without a token (`--no-auth`), a request must name a loopback host (or one of
    `allowed_hosts`) in its Host header, and a browser's cross-origin request (an Origin that is
    not such a host, or `Sec-Fetch-Site: cross-site`) is refused: a web page that rebinds its DNS
    name to 127.0.0.1 cannot use the API (403).
    """

    def __init__(self, app, *, token: str | None, max_body_bytes: int, allowed_hosts: tuple[str, ...] = ()):
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)

    def _local(self, host: str) -> bool:
        return is_loopback_host(host) or host.lower() in self.allowed_hosts

    def _refused_without_auth(self, headers: dict[str, str]) -> str | None:
        host = _host_of(headers.get("host", ""))
        if not self._local(host):
            return (
                f"the Host {host!r} is not served without authentication (--no-auth): only loopback "
                "names, or those of [serve] allowed_hosts"
            )
        origin = headers.get("origin")
        if (
            (origin is not None and origin != "null" and not self._local(_host_of(origin)))
            or headers.get("sec-fetch-site") == "cross-site"
            or origin == "null"
        ):
            return "cross-origin browser requests are refused without authentication (--no-auth)"
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        if self.token is None:
            refused = self._refused_without_auth(headers)
            if refused is not None:
                await _send_error(send, 403, refused, "host_not_allowed", "permission_error", {})
                return
        if self.token is not None and scope.get("path") not in PUBLIC_PATHS and not self._authorized(headers):
            await _send_error(
                send,
                401,
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' (see `stiva serve --show-token`)",
                "invalid_api_key",
                "authentication_error",
                {"www-authenticate": "Bearer"},
            )
            return
        declared = headers.get("content-length", "")
        # ASCII digits only (isdigit() takes '²', which int() refuses); more than 18 is too large
        if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > self.max_body_bytes):
            await self._too_large(send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: let the app see that
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                await self._too_large(send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                if message["type"] != "http.request":
                    return message
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _authorized(self, headers: dict[str, str]) -> bool:
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(value.strip().encode(), self.token.encode())

    async def _too_large(self, send) -> None:
        await _send_error(
            send,
            413,
            f"the request body is larger than {self.max_body_bytes} bytes (serve.max_body_bytes)",
            "request_too_large",
            "invalid_request_error",
            {"connection": "close"},
        )


async def _send_error(send, status: int, message: str, code: str, type_: str, headers: dict[str, str]) -> None:
    body = json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})
