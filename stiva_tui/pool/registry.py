"""The pool: every model Stiva knows, in a fixed order, with whether (and why) it can be used.

Order: the config's [[models]]; then the built-in catalog (when `config.catalog`), models of
providers with a key first, then those without one (kept, unavailable, so the user sees what a key
would add); then models of discovered local servers; then the embedded model, always last and
there unless the config says `embedded_worker = false`, so the app works offline.
`Pool.available()` keeps that order and is what the conductor is shown, numbered from 0.

With discovery on, the local endpoints the config names are probed too: the models of one that
nothing answers at are unavailable ("unreachable: connection refused at http://127.0.0.1:11434/v1").
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from ..config import Config
from .embedded import embedded_pool_model
from .types import PoolModel

log = logging.getLogger(__name__)

KEYS_HINT = "add one with the keys screen"


class Pool:
    """An ordered list of pool models with unique ids."""

    def __init__(self, models: Iterable[PoolModel] = ()):
        self._models: tuple[PoolModel, ...] = tuple(models)
        # Local servers discovery found and did not trust, one line each (discovery.LeftOut).
        self.left_out: tuple[str, ...] = ()
        self._by_id: dict[str, PoolModel] = {}
        for model in self._models:
            if model.id in self._by_id:
                raise ValueError(f"pool model id {model.id!r} appears twice")
            self._by_id[model.id] = model

    @property
    def models(self) -> tuple[PoolModel, ...]:
        return self._models

    @property
    def by_id(self) -> dict[str, PoolModel]:
        return dict(self._by_id)

    def get(self, model_id: str, default: PoolModel | None = None) -> PoolModel | None:
        return self._by_id.get(model_id, default)

    def __getitem__(self, model_id: str) -> PoolModel:
        return self._by_id[model_id]

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._by_id

    def available(self) -> list[PoolModel]:
        """Enabled and available models, in pool order (the conductor's numbering)."""
        return [m for m in self._models if m.enabled and m.available]

    def ids(self) -> list[str]:
        return [m.id for m in self._models]

    def __iter__(self) -> Iterator[PoolModel]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)

    def public(self) -> list[dict]:
        """Every model as shown or stored: no keys, no headers."""
        return [m.public() for m in self._models]

    def __repr__(self) -> str:
        return f"Pool({len(self._models)} models, {len(self.available())} available)"


# --- keys ---------------------------------------------------------------------------------------


def is_loopback_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class _Provider:
    name: str
    base_url: str
    api_key_env: str | None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _KeyState:
    key: str | None
    available: bool
    reason: str

    def __repr__(self) -> str:  # never show the key
        return f"_KeyState(available={self.available}, reason={self.reason!r})"


def no_key_reason(env_var: str | None) -> str:
    if env_var:
        return f"no key: set ${env_var} or {KEYS_HINT}"
    return f"no key: {KEYS_HINT}"


def _resolve_key(provider: _Provider) -> _KeyState:
    from ..keys import SecretsError, get_key

    try:
        key, where = get_key(provider.name, provider.api_key_env)
    except SecretsError as exc:
        log.debug("keyring unusable for %s: %s", provider.name, exc)
        key, where = None, "none"
        keyring_broken = True
    else:
        keyring_broken = False
    if key:
        return _KeyState(key, True, f"key from {where}")  # "$OPENAI_API_KEY" or "keyring"
    if provider.api_key_env:
        reason = no_key_reason(provider.api_key_env)
        if keyring_broken:
            reason = f"no key: set ${provider.api_key_env} (no usable keyring)"
        return _KeyState(None, False, reason)
    if is_loopback_url(provider.base_url):
        return _KeyState(None, True, "no key needed")
    return _KeyState(None, True, "no key configured")


def _providers(config: Config) -> dict[str, _Provider]:
    """Config providers, and catalog providers (a config provider of the same name overrides the
    catalog's endpoint; it keeps the catalog's key variable unless it names its own)."""
    from ..catalog import load_catalog

    out: dict[str, _Provider] = {}
    for cat in load_catalog().providers:
        out[cat.name] = _Provider(cat.name, cat.base_url, cat.api_key_env)
    for prov in config.providers:
        base = out.get(prov.name)
        env = prov.api_key_env or (base.api_key_env if base else None)
        out[prov.name] = _Provider(prov.name, prov.base_url, env, tuple(prov.headers.items()))
    return out


def _resolve_keys(providers: Iterable[_Provider]) -> dict[str, _KeyState]:
    return {p.name: _resolve_key(p) for p in providers}


# --- building -----------------------------------------------------------------------------------


def _needed_providers(config: Config, providers: Mapping[str, _Provider]) -> list[_Provider]:
    from ..catalog import load_catalog

    names: list[str] = [m.provider for m in config.models]
    if config.catalog:
        names += [p.name for p in load_catalog().providers]
    seen: dict[str, _Provider] = {}
    for name in names:
        if name in providers and name not in seen:
            seen[name] = providers[name]
    return list(seen.values())


def _assemble(
    config: Config,
    providers: Mapping[str, _Provider],
    keys: Mapping[str, _KeyState],
    discovered: Iterable[PoolModel],
    embedded: PoolModel,
    dead: Mapping[str, str] | None = None,
) -> Pool:
    """`dead`: the local base URLs nothing answers at, with why; their models are unavailable."""
    from ..catalog import load_catalog

    models: list[PoolModel] = []
    taken: set[str] = set()
    dead = dead or {}

    for entry in config.models:
        provider = providers.get(entry.provider)
        if provider is None:  # parse_config refuses this; a hand-made Config may not
            log.warning("model %s: unknown provider %s, skipped", entry.id, entry.provider)
            continue
        state = keys[provider.name]
        available, reason = state.available, state.reason
        if available and provider.base_url in dead:
            available, reason = False, f"unreachable: {dead[provider.base_url]} at {provider.base_url}"
        if not entry.enabled:
            available, reason = False, "disabled in config"
        models.append(
            PoolModel(
                id=entry.id,
                provider=provider.name,
                model=entry.model,
                base_url=provider.base_url,
                price_in=entry.price_in,
                price_out=entry.price_out,
                description=entry.description,
                kind="openai",
                enabled=entry.enabled,
                available=available,
                reason=reason,
                source="config",
                api_key=state.key,
                headers=provider.headers,
                planner=entry.planner,
                latency_s=entry.latency_s,
            )
        )
        taken.add(entry.id)

    if config.catalog:
        keyed: list[PoolModel] = []
        keyless: list[PoolModel] = []
        for cat in load_catalog().providers:
            provider = providers[cat.name]
            state = keys[cat.name]
            available, reason = state.available, state.reason
            if available and provider.base_url in dead:  # a catalog provider moved to this machine
                available, reason = False, f"unreachable: {dead[provider.base_url]} at {provider.base_url}"
            for m in cat.models:
                if m.id in taken:
                    continue
                model = PoolModel(
                    id=m.id,
                    provider=cat.name,
                    model=m.model,
                    base_url=provider.base_url,
                    price_in=m.price_in,
                    price_out=m.price_out,
                    description=m.description,
                    kind="openai",
                    available=available,
                    reason=reason,
                    source="catalog",
                    api_key=state.key,
                    headers=provider.headers,
                    planner=m.planner,
                )
                (keyed if available else keyless).append(model)
                taken.add(m.id)
        models += keyed + keyless

    configured_urls = {_norm_url(p.base_url) for p in providers.values() if is_loopback_url(p.base_url)}
    for model in discovered:
        if model.id in taken or model.id == embedded.id:
            continue
        if _norm_url(model.base_url) in configured_urls:
            continue  # the same server is already in the config under its own name
        models.append(model)
        taken.add(model.id)

    if embedded.id in taken:
        # A config model reusing the embedded id would hide it; keep the embedded one last.
        models = [m for m in models if m.id != embedded.id]
    if config.embedded_worker:
        models.append(embedded)
    return Pool(models)


def _norm_url(url: str) -> str:
    parts = urlsplit(url.rstrip("/"))
    host = (parts.hostname or "").lower()
    if host in ("localhost", "::1", "0.0.0.0") or host.startswith("127."):
        host = "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{host}:{port}{parts.path}"


async def build_pool(
    config: Config,
    *,
    discover: bool | None = None,
    discovery_ports: Mapping[str, int | None] | None = None,
    embedded_process: bool = False,
) -> Pool:
    """Build the pool for `config`. `discover` None follows `config.discovery.enabled`;
    `discovery_ports` overrides where local servers are looked for (else `[discovery] ports` moves
    some from their default ports: see discovery); `embedded_process`: the embedded model runs in a
    process of its own (its reason says so)."""
    from . import discovery

    do_discover = config.discovery.enabled if discover is None else discover
    providers = _providers(config)
    needed = _needed_providers(config, providers)

    discovery_task: asyncio.Task[discovery.Discovery] | None = None
    if do_discover:
        ports = discovery_ports if discovery_ports is not None else _discovery_ports(config)
        discovery_task = asyncio.ensure_future(discovery.discover(ports=ports, timeout_s=config.discovery.timeout_s))
    # A local server the config names (Ollama, LM Studio) may not be running: one connect each,
    # with discovery (discovery off trusts the config as written, and touches no local port).
    local_urls = [p.base_url for p in needed if is_loopback_url(p.base_url)] if do_discover else []
    probe_task = asyncio.ensure_future(discovery.unreachable(local_urls, timeout_s=config.discovery.timeout_s))
    try:
        # Keyring backends may block (D-Bus): resolve keys in a thread while discovery runs.
        keys = await asyncio.to_thread(_resolve_keys, needed)
        dead = await probe_task
        found = discovery.Discovery()
        if discovery_task is not None:
            try:
                found = await discovery_task
            except Exception as exc:  # discovery is best effort
                log.warning("discovery of local servers failed: %s", exc)
    finally:
        for task in (discovery_task, probe_task):
            if task is not None and not task.done():
                task.cancel()
    pool = _assemble(config, providers, keys, found.models(), embedded_pool_model(embedded_process), dead)
    # A server the config names on purpose is the config's, whoever runs it: no line about it.
    configured_urls = {_norm_url(p.base_url) for p in providers.values() if is_loopback_url(p.base_url)}
    pool.left_out = tuple(item.line() for item in found.left_out if _norm_url(item.base_url) not in configured_urls)
    return pool


def _discovery_ports(config: Config) -> dict[str, int | None] | None:
    """The default ports with `[discovery] ports` over them (0: not looked for); None: the defaults."""
    from .discovery import DEFAULT_PORTS

    if not config.discovery.ports:
        return None
    moved = {**DEFAULT_PORTS, **config.discovery.ports}
    return {name: port or None for name, port in moved.items()}


def build_pool_sync(
    config: Config, *, discover: bool | None = None, discovery_ports: Mapping[str, int | None] | None = None
) -> Pool:
    """`build_pool` for synchronous callers; works inside a running event loop too (it then runs
    in a worker thread with its own loop)."""
    coro_args = dict(discover=discover, discovery_ports=discovery_ports)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(build_pool(config, **coro_args))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(lambda: asyncio.run(build_pool(config, **coro_args))).result()


def with_availability(model: PoolModel, available: bool, reason: str) -> PoolModel:
    """A copy of `model` with a new availability (e.g. after a failed health check)."""
    return replace(model, available=available, reason=reason)


# --- references from the config ---------------------------------------------------------------------


def check_references(
    config: Config,
    pool: Pool,
    conductor_backend: str | None = None,
    conductor_model: str | None = None,
    *,
    conductor_option: str | None = None,
    fallback_model: str | None = None,
) -> tuple[list[str], list[str]]:
    """(errors, warnings) about the models the config names: a fallback, a MoA model, the
    remote conductor's model or the conductor's `fallback_model` (`fallback_model`, where the
    conductor's settings were overridden; else the config's) that no pool knows is an error; one
    known but unavailable right now (no key, a server down) is a warning. Each names the config
    field, or, for the conductor given on the command line (`conductor_option`, what --conductor
    said), the option: such a message starts with "--conductor"."""
    errors: list[str] = []
    warnings: list[str] = []
    backend = conductor_backend or config.conductor.backend
    named = [(f"workers.fallbacks: {m!r}", m) for m in (config.workers.fallbacks or ())]
    named += [(f"moa.proposers: {m!r}", m) for m in config.moa.proposers]
    if config.moa.aggregator:
        named.append((f"moa.aggregator: {config.moa.aggregator!r}", config.moa.aggregator))
    if config.bench.judge:
        named.append((f"bench.judge: {config.bench.judge!r}", config.bench.judge))
    if backend == "remote":
        model = conductor_model or config.conductor.model
        field = (
            f"--conductor {conductor_option}: {model!r}"
            if conductor_option
            else f"conductor.model: {model!r} (the remote conductor)"
        )
        named.append((field, model))
    fallback = config.conductor.fallback_model if fallback_model is None else fallback_model
    if fallback:
        named.append((f"conductor.fallback_model: {fallback!r}", fallback))
    for field, model_id in named:
        model = pool.get(model_id)
        if model is None:
            errors.append(f"{field} is not a model of the pool; known: {', '.join(pool.ids())}")
        elif not (model.enabled and model.available):
            warnings.append(f"{field} is not available now ({model.reason})")
    return errors, warnings
