"""`--pool sim`: the simulated pool as a config, and its server started for a runtime.

    config = pool_config(config, "sim")        # [sim] on; no catalog, no discovery, no embedded worker
    config, server = start_sim(config)         # the server runs; config gains its provider and models
    ...
    server.stop()

A replay's answers come from the history, which this package does not open: its caller passes
them in (`start_sim(config, recorded=...)`; `stiva_tui.bench.replay.start_pool` reads them).

With `--pool sim` the pool is the simulated models only, and an `auto` or `remote` conductor is
the embedded one (a `sim:` model answers questions; it cannot plan, and the configured remote
conductor's model is not in this pool). `--pool replay:BENCH_ID` is the same with a
bench's recorded answers of real models as the pool (sim/replay.py). `--pool sim:SEED` is the
simulated pool under another seed (`[sim] seed`): another draw of which calls are right, so that
grading the train split under seeds 0..K-1 samples each model K times.
"""

from __future__ import annotations

import re

from ..config import (
    DEFAULT_LOCAL_MODEL,
    REPLAY_PROVIDER,
    SIM_PROVIDER,
    Config,
    ConfigError,
    ModelConfig,
    ProviderConfig,
    SimConfig,
)
from .labels import RECORDED_LABEL, SIM_LABEL
from .profiles import configured_models, default_models
from .replay import RecordedBench, ReplayError, replay_pool
from .server import SimServer

POOLS = ("sim", "sim:SEED", "replay:BENCH_ID")
PROVIDER = SIM_PROVIDER


def pool_config(config: Config, name: str) -> Config:
    """`config` with its pool replaced by the named one (`--pool`)."""
    replay = name.removeprefix("replay:").strip() if name.startswith("replay:") else None
    seed = None  # `sim:SEED`: the same pool under another draw (a sample of it, as a real pool graded again)
    if name.startswith("sim:"):
        text = name.removeprefix("sim:").strip()
        if not re.fullmatch(r"[0-9]{1,9}", text):  # isdigit() takes '²', which int() refuses
            raise ConfigError(f"--pool {name!r}: the seed of sim:SEED is a whole number, such as sim:3")
        seed = int(text)
    if name != "sim" and not replay and seed is None:
        raise ConfigError(f"--pool {name!r}: use {', '.join(POOLS[:-1])} or {POOLS[-1]}")
    conductor = config.conductor
    if conductor.backend in ("auto", "remote"):  # a remote conductor's model is not in this pool
        conductor = conductor.model_copy(update={"backend": "embedded", "model": DEFAULT_LOCAL_MODEL})
    sim = (config.sim or SimConfig()).model_copy(update={"replay": replay} | ({} if seed is None else {"seed": seed}))
    return config.model_copy(
        update={
            "sim": sim,
            "catalog": False,
            "embedded_worker": False,
            "providers": [],
            "models": [],
            "discovery": config.discovery.model_copy(update={"enabled": False}),
            "conductor": conductor,
        }
    )


def pool_label(config: Config) -> str | None:
    """ "simulated pool" (with "(seed N)" under another seed than 0), "recorded pool (bench ID)"
    (with where the answers came from, for a bench of `stiva bench import`), or None for a pool of
    real models (sim/labels.py: one word for each kind, everywhere)."""
    if config.sim is None:
        return None
    if config.sim.replay and config.sim.replay_source:
        return f"{RECORDED_LABEL} (bench {config.sim.replay}: {config.sim.replay_source})"
    if config.sim.replay:
        return f"{RECORDED_LABEL} (bench {config.sim.replay})"
    return f"{SIM_LABEL} (seed {config.sim.seed})" if config.sim.seed else SIM_LABEL


def questions_to_try(config: Config, n: int = 3) -> list[str]:
    """A few questions the simulated pool knows, to offer someone trying it (`--pool sim`'s first
    screen): the shortest question of each domain of its suites, in the suites' order, at most `n`.
    None for a pool of real models or a replayed one (its questions are a bench's)."""
    from ..evals.loaders import load_suite
    from ..evals.suite import SuiteError

    if config.sim is None or config.sim.replay:
        return []
    shortest: dict[str, str] = {}
    for spec in config.sim.suites:
        try:
            items = load_suite(spec).items
        except SuiteError:
            continue
        for item in items:
            question = " ".join(item.question.split())
            if not question or "\n" in item.question.strip():
                continue
            domain = str(item.meta.get("domain") or spec)
            if domain not in shortest or len(question) < len(shortest[domain]):
                shortest[domain] = question
    return list(shortest.values())[:n]


def start_sim(config: Config, recorded: RecordedBench | None = None) -> tuple[Config, SimServer]:
    """Start the server of `config.sim`; the config with its `sim:` models added (prices and
    descriptions from the profiles), and the server to stop when done. A replay
    (`config.sim.replay`) serves `recorded`, the bench its caller read from the history."""
    from ..evals.loaders import load_suite
    from ..evals.suite import SuiteError

    assert config.sim is not None
    if config.sim.replay:
        if recorded is None:
            raise ConfigError(
                f"--pool replay:{config.sim.replay}: the bench's recorded answers were not read "
                "(start it with stiva_tui.bench.replay.start_pool)"
            )
        return _start_replay(config, recorded)
    items = []
    for spec in config.sim.suites:
        try:
            items += list(load_suite(spec).items)
        except SuiteError as exc:
            raise ConfigError(f"sim.suites: {exc}") from None
    models = configured_models(config.sim.models) if config.sim.models else default_models()
    server = SimServer(models, items, seed=config.sim.seed, latency_scale=config.sim.latency_scale).start()
    return _with_models(config, server, PROVIDER, models), server


def _start_replay(config: Config, recorded: RecordedBench) -> tuple[Config, SimServer]:
    assert config.sim is not None and config.sim.replay
    try:
        models, answerer = replay_pool(recorded, config.sim.replay)
    except ReplayError as exc:
        raise ConfigError(str(exc)) from None
    # the whole id, where the command named a start of it
    sim = config.sim.model_copy(update={"replay": recorded.bench_id, "replay_source": recorded.source})
    config = config.model_copy(update={"sim": sim})
    server = SimServer(models, (), latency_scale=config.sim.latency_scale, answerer=answerer).start()
    return _with_models(config, server, REPLAY_PROVIDER, models), server


def _with_models(config: Config, server: SimServer, provider_name: str, models) -> Config:
    provider = ProviderConfig(name=provider_name, base_url=server.base_url)
    entries = [
        ModelConfig(
            id=m.pool_id,
            provider=provider_name,
            model=m.name,
            price_in=m.price_in,
            price_out=m.price_out,
            description=m.description,
            latency_s=m.latency_s,
        )
        for m in models
    ]
    taken = {m.id for m in entries}
    return config.model_copy(
        update={
            "providers": [p for p in config.providers if p.name != provider_name] + [provider],
            "models": [m for m in config.models if m.id not in taken] + entries,
        }
    )
