"""`--pool sim`: the simulated pool as a config, and its server started for a runtime.

    config = pool_config(config, "sim")        # [sim] on; no catalog, no discovery, no embedded worker
    config, server = start_sim(config)         # the server runs; config gains its provider and models
    ...
    server.stop()

With `--pool sim` the pool is the simulated models only, and an `auto` conductor is the embedded
one (a `sim:` model answers questions; it cannot plan).
"""

from __future__ import annotations

from ..config import SIM_PROVIDER, Config, ConfigError, ModelConfig, ProviderConfig, SimConfig
from .profiles import default_models
from .server import SimServer

POOLS = ("sim",)
PROVIDER = SIM_PROVIDER


def pool_config(config: Config, name: str) -> Config:
    """`config` with its pool replaced by the named one (`--pool`)."""
    if name not in POOLS:
        raise ConfigError(f"unknown pool {name!r}: use {', '.join(POOLS)}")
    conductor = config.conductor
    if conductor.backend == "auto":
        conductor = conductor.model_copy(update={"backend": "embedded"})
    return config.model_copy(update={
        "sim": config.sim or SimConfig(), "catalog": False, "embedded_worker": False, "providers": [], "models": [],
        "discovery": config.discovery.model_copy(update={"enabled": False}), "conductor": conductor,
    })


def start_sim(config: Config) -> tuple[Config, SimServer]:
    """Start the server of `config.sim`; the config with its `sim:` models added (prices and
    descriptions from the profiles), and the server to stop when done."""
    from ..bench.suite import SuiteError, load_suite

    assert config.sim is not None
    items = []
    for spec in config.sim.suites:
        try:
            items += list(load_suite(spec).items)
        except SuiteError as exc:
            raise ConfigError(f"sim.suites: {exc}") from None
    models = default_models()
    server = SimServer(models, items, seed=config.sim.seed, latency_scale=config.sim.latency_scale).start()
    provider = ProviderConfig(name=PROVIDER, base_url=server.base_url)
    entries = [ModelConfig(id=m.pool_id, provider=PROVIDER, model=m.name, price_in=m.price_in, price_out=m.price_out,
                           description=m.description, latency_s=m.latency_s) for m in models]
    taken = {m.id for m in entries}
    updated = config.model_copy(update={
        "providers": [p for p in config.providers if p.name != PROVIDER] + [provider],
        "models": [m for m in config.models if m.id not in taken] + entries,
    })
    return updated, server
