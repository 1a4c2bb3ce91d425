"""Discovery of local OpenAI-compatible servers on their default loopback ports.

Every known server is probed concurrently with one `httpx.AsyncClient`, each probe under a hard
deadline of `timeout_s` (so a port that accepts and never answers costs at most that long), and a
port with nothing listening fails at once (connection refused). A reply counts only when it has
the shape of a model list, so an unrelated web app on port 8000 or 8080 is not taken for vLLM.

A server that answers is trusted with questions only when the process listening on its port runs
as this user, root or a system account (a uid below UID_MIN of /etc/login.defs, as Ollama's
`ollama` user): `listener_uids` reads that from /proc/net/tcp and tcp6. A server of another login
user on a shared machine is left out (`LeftOut`, one line in `stiva models`), as a port says nothing
of who holds it; the config's [[providers]] can still name it on purpose. Where the owner cannot
be read (no /proc: macOS, Windows) the server is trusted, as docs/security.md says. Nor is a
trusted server trusted with the terminal or the pool's size: a model id must be printable text of at
most `MAX_MODEL_ID_CHARS` characters (no escape sequence, control or bidi character), or it is
skipped with a logged line while the server's other models are kept; a reply is read up to
`MAX_LIST_BYTES`, and at most `MAX_MODELS_PER_SERVER` models are taken from one server.
`[discovery] enabled = false` turns all of it off: then only the servers the config names are used;
`[discovery] ports` moves where a kind of server is looked for (0: not looked for).

`unreachable(urls)` checks the loopback endpoints the config names (an Ollama or LM Studio URL)
with one TCP connect each, under the same kind of deadline: the pool shows a dead one as
unreachable instead of available.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import re
import socket
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from .types import PoolModel

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
MAX_MODEL_ID_CHARS = 200  # longer than any real model name (a Hugging Face repo id is at most 96)
MAX_MODELS_PER_SERVER = 256
MAX_LIST_BYTES = 1 << 20  # a model list is a few kB; a bigger reply is not one
PROC_NET = Path("/proc/net")  # tcp, tcp6: every socket of this network namespace, with its uid
LOGIN_DEFS = Path("/etc/login.defs")
DEFAULT_UID_MIN = 1000  # login.defs' own default: uids below it are system accounts


@dataclass(frozen=True)
class LocalServerKind:
    """A kind of local server: where it listens by default and where it lists its models."""

    name: str  # provider name in the pool: "ollama"
    label: str  # "Ollama"
    port: int
    api_path: str = "/v1"  # the OpenAI-compatible API root
    models_paths: tuple[str, ...] = ("/v1/models",)  # tried in order


KNOWN_SERVERS: tuple[LocalServerKind, ...] = (
    LocalServerKind("ollama", "Ollama", 11434, models_paths=("/v1/models", "/api/tags")),
    LocalServerKind("vllm", "vLLM", 8000),
    LocalServerKind("llamacpp", "llama.cpp server", 8080),
    LocalServerKind("lmstudio", "LM Studio", 1234),
)

DEFAULT_PORTS: dict[str, int] = {kind.name: kind.port for kind in KNOWN_SERVERS}


@dataclass(frozen=True)
class DiscoveredServer:
    name: str  # "ollama"
    label: str
    base_url: str  # "http://127.0.0.1:11434/v1"
    models: tuple[str, ...] = field(default=())  # the server's own model names
    port: int = 0

    def pool_models(self) -> list[PoolModel]:
        seen: set[str] = set()
        out: list[PoolModel] = []
        for name in self.models:
            model_id = f"{self.name}/{short_model_name(name)}"
            if model_id in seen:
                model_id = f"{self.name}/{name}"
                if model_id in seen:
                    continue
            seen.add(model_id)
            out.append(
                PoolModel(
                    id=model_id,
                    provider=self.name,
                    model=name,
                    base_url=self.base_url,
                    price_in=0.0,
                    price_out=0.0,
                    description=f"local model served by {self.label} on this machine",
                    kind="openai",
                    available=True,
                    reason=f"discovered at {self.base_url}",
                    source="discovered",
                )
            )
        return out


def short_model_name(name: str) -> str:
    """A readable id part: "llama3.2:latest" -> "llama3.2", "/models/qwen-7b.Q4.gguf" ->
    "qwen-7b.Q4"."""
    name = name.strip()
    if name.endswith(":latest"):
        name = name[: -len(":latest")]
    if name.lower().endswith(".gguf") or name.startswith(("/", "./", "~")) or "\\" in name:
        name = re.split(r"[\\/]", name)[-1]
        if name.lower().endswith(".gguf"):
            name = name[: -len(".gguf")]
    return name or "model"


def _model_names(path: str, payload: object) -> list[str] | None:
    """The model names in a /v1/models or /api/tags reply, or None when it is not one."""
    if not isinstance(payload, dict):
        return None
    if path.endswith("/api/tags"):
        items, key = payload.get("models"), "name"
    else:
        items, key = payload.get("data"), "id"
    if not isinstance(items, list):
        return None
    names = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get(key), str) and item[key].strip():
            names.append(item[key].strip())
    return names


async def _probe(client: httpx.AsyncClient, kind: LocalServerKind, host: str, port: int) -> DiscoveredServer | None:
    root = f"http://{host}:{port}"
    for path in kind.models_paths:
        try:
            async with client.stream("GET", root + path) as response:
                body = await _read_list(response) if response.status_code == 200 else None
        except httpx.ConnectError:
            return None  # nothing listens: no other path will help
        except httpx.HTTPError as exc:
            log.debug("discovery: %s on port %s: %s", kind.name, port, type(exc).__name__)
            return None
        if body is None:
            continue
        try:
            names = _model_names(path, json.loads(body))
        except ValueError:
            names = None
        if names is None:
            continue
        return DiscoveredServer(
            kind.name, kind.label, root + kind.api_path, tuple(_acceptable(names, f"{kind.label} at {root}")), port
        )
    return None


async def _read_list(response: httpx.Response) -> bytes | None:
    """The reply's body, or None when it is longer than any model list (`MAX_LIST_BYTES`)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_LIST_BYTES:
            log.debug("discovery: %s sent more than %d bytes: not a model list", response.url, MAX_LIST_BYTES)
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def acceptable_model_id(name: str) -> bool:
    """Whether a local server's model name may join the pool: printable text (no escape sequence,
    control, bidi or zero-width character: `str.isprintable`), at most `MAX_MODEL_ID_CHARS` long."""
    return 0 < len(name) <= MAX_MODEL_ID_CHARS and name.isprintable()


def _acceptable(names: list[str], where: str) -> list[str]:
    """`names` without those `acceptable_model_id` refuses (one logged line each), and at most
    `MAX_MODELS_PER_SERVER` of them."""
    kept = []
    for name in names:
        if acceptable_model_id(name):
            kept.append(name)
        else:  # ascii(): the line shows the id's escapes rather than acting on them
            log.warning(
                "discovery: %s lists a model id that is not printable text of at most %d characters; skipped: %s",
                where,
                MAX_MODEL_ID_CHARS,
                ascii(name[:80]) + ("…" if len(name) > 80 else ""),
            )
    if len(kept) > MAX_MODELS_PER_SERVER:
        log.warning(
            "discovery: %s lists %d models; only the first %d are used", where, len(kept), MAX_MODELS_PER_SERVER
        )
        kept = kept[:MAX_MODELS_PER_SERVER]
    return kept


@dataclass(frozen=True)
class LeftOut:
    """A local server that answered with a model list but listens as another login user: it is
    not in the pool (a port says nothing of who holds it)."""

    name: str  # "ollama"
    label: str
    base_url: str
    uid: int

    def line(self) -> str:
        """One line for `stiva models` and the app: what was left out, and how to use it on purpose."""
        return (
            f"left out: {self.label} at {self.base_url} runs as another user ({user_name(self.uid)}); "
            f"to use it, name it under [[providers]] in the config"
        )


@dataclass(frozen=True)
class Discovery:
    """What `discover` found: the servers trusted with questions, and those left out."""

    servers: tuple[DiscoveredServer, ...] = ()
    left_out: tuple[LeftOut, ...] = ()

    def models(self) -> list[PoolModel]:
        return [model for server in self.servers for model in server.pool_models()]


async def discover(
    *,
    ports: Mapping[str, int | None] | None = None,
    timeout_s: float = 0.3,
    host: str = DEFAULT_HOST,
    kinds: Iterable[LocalServerKind] = KNOWN_SERVERS,
    proc_net: Path = PROC_NET,
) -> Discovery:
    """Probe the known local servers concurrently; keep those that answered with a model list and
    listen as this user, root or a system account (`trusted_owner`), and name the others.

    `ports` overrides where to look, by server name ({"vllm": 54321}); when it is given, only the
    servers it names are probed (a None port skips that server). Each probe is cut off after
    `timeout_s`, so the whole call takes about `timeout_s` at most.
    """
    kinds = tuple(kinds)
    if ports is None:
        targets = [(kind, kind.port) for kind in kinds]
    else:
        by_name = {kind.name: kind for kind in kinds}
        unknown = set(ports) - set(by_name)
        if unknown:
            raise ValueError(f"unknown local server kinds: {', '.join(sorted(unknown))}")
        targets = [(by_name[name], port) for name, port in ports.items() if port is not None]
    if not targets:
        return Discovery()

    timeout = httpx.Timeout(timeout_s)
    # trust_env=False: never route loopback probes through a proxy from the environment.
    async with httpx.AsyncClient(timeout=timeout, trust_env=False, follow_redirects=False) as client:

        async def bounded(kind: LocalServerKind, port: int) -> DiscoveredServer | None:
            try:
                return await asyncio.wait_for(_probe(client, kind, host, port), timeout_s)
            except TimeoutError:
                log.debug("discovery: %s on port %s did not answer in %.2fs", kind.name, port, timeout_s)
                return None

        results = await asyncio.gather(*(bounded(kind, port) for kind, port in targets))
    found = [server for server in results if server is not None]
    if not found:
        return Discovery()
    # Read after the servers answered: the owner of the socket that just answered.
    sockets = await asyncio.to_thread(listening_sockets, proc_net)
    kept: list[DiscoveredServer] = []
    left_out: list[LeftOut] = []
    for server in found:
        strangers = sorted(uid for uid in listener_uids(sockets, server.port, host) if not trusted_owner(uid))
        if strangers:
            left_out.append(LeftOut(server.name, server.label, server.base_url, strangers[0]))
            log.info("discovery: %s", left_out[-1].line())
        else:
            kept.append(server)
    return Discovery(tuple(kept), tuple(left_out))


async def discover_servers(
    *,
    ports: Mapping[str, int | None] | None = None,
    timeout_s: float = 0.3,
    host: str = DEFAULT_HOST,
    kinds: Iterable[LocalServerKind] = KNOWN_SERVERS,
) -> list[DiscoveredServer]:
    """The servers `discover` trusts."""
    return list((await discover(ports=ports, timeout_s=timeout_s, host=host, kinds=kinds)).servers)


async def discover_models(
    *,
    ports: Mapping[str, int | None] | None = None,
    timeout_s: float = 0.3,
    host: str = DEFAULT_HOST,
) -> list[PoolModel]:
    """The models of every trusted local server, as pool models (price 0)."""
    return (await discover(ports=ports, timeout_s=timeout_s, host=host)).models()


# --- who listens on a port ----------------------------------------------------------------------

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def listening_sockets(proc_net: Path = PROC_NET) -> list[tuple[Address, int, int]] | None:
    """Every listening TCP socket of this network namespace as (address, port, owner's uid), from
    /proc/net/tcp and tcp6; None where neither can be read (not Linux)."""
    sockets: list[tuple[Address, int, int]] = []
    read = False
    for name, size in (("tcp", 4), ("tcp6", 16)):
        try:
            lines = (proc_net / name).read_text(encoding="ascii", errors="replace").splitlines()[1:]
        except OSError:
            continue
        read = True
        for line in lines:
            fields = line.split()  # sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
            if len(fields) < 8 or fields[3] != _LISTEN:
                continue
            address_hex, _, port_hex = fields[1].partition(":")
            try:
                sockets.append((_kernel_address(address_hex, size), int(port_hex, 16), int(fields[7])))
            except ValueError:
                continue
    return sockets if read else None


def _kernel_address(text: str, size: int) -> Address:
    """An address as /proc/net/tcp writes it: 32-bit words in hex, each in the machine's order."""
    if len(text) != size * 2:
        raise ValueError(text)
    raw = b"".join(struct.pack("=I", int(text[i : i + 8], 16)) for i in range(0, len(text), 8))
    return ipaddress.ip_address(raw)


def listener_uids(sockets: list[tuple[Address, int, int]] | None, port: int, host: str = DEFAULT_HOST) -> set[int]:
    """The owners of the listening `sockets` on `port` that a connection to `host` can reach: on
    that address or on every address (0.0.0.0, ::), also as an IPv4-mapped one. Empty where the
    sockets are not known (None) or none matches: the owner cannot be read."""
    if not sockets:
        return set()
    try:
        ip: Address = ipaddress.ip_address(host)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(host))
        except OSError:
            return set()
    reach: set[Address] = {ip, ipaddress.IPv6Address("::")}
    if isinstance(ip, ipaddress.IPv4Address):
        reach |= {ipaddress.IPv4Address("0.0.0.0"), ipaddress.IPv6Address(f"::ffff:{ip}")}
        reach.add(ipaddress.IPv6Address("::ffff:0.0.0.0"))
    return {uid for address, listen_port, uid in sockets if listen_port == port and address in reach}


def trusted_owner(uid: int, login_defs: Path = LOGIN_DEFS) -> bool:
    """Whether a server listening as `uid` may have questions: this user, root, or a system
    account (a uid below UID_MIN: Ollama's Linux installer runs it as the `ollama` system user)."""
    return uid in (0, os.getuid(), os.geteuid()) or uid < login_uid_min(login_defs)


def login_uid_min(login_defs: Path = LOGIN_DEFS) -> int:
    """UID_MIN of /etc/login.defs, the first uid of a login user (1000 where it says none)."""
    try:
        text = login_defs.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return DEFAULT_UID_MIN
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "UID_MIN" and fields[1].isdigit():
            return int(fields[1])
    return DEFAULT_UID_MIN


def user_name(uid: int) -> str:
    """ "bob, uid 1500", or "uid 1500" where the name is not known."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except (ImportError, KeyError):
        return f"uid {uid}"


async def unreachable(urls: Iterable[str], *, timeout_s: float = 0.3) -> dict[str, str]:
    """Of `urls` (local endpoints), each that nothing answers at, with why ("connection refused",
    "no answer in 0.3 s"). One TCP connect per distinct host and port, all at once, each cut off
    after `timeout_s`."""
    urls = list(dict.fromkeys(urls))

    async def why(url: str) -> str | None:
        parts = urlsplit(url)
        host = parts.hostname or DEFAULT_HOST
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return "no port in its URL"
        try:
            _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        except TimeoutError:
            return f"no answer in {timeout_s:g} s"
        except ConnectionRefusedError:
            return "connection refused"
        except OSError as exc:
            return exc.strerror or type(exc).__name__
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
        return None

    reasons = await asyncio.gather(*(why(url) for url in urls))
    return {url: reason for url, reason in zip(urls, reasons) if reason is not None}
