"""`--pool replay:BENCH_ID`, the history's half: a bench's graded `direct:` answers read from the
store and handed to the simulated pool (`stiva_tui.sim.replay` serves them; it does not open the
store).

    config, server = start_pool(config)    # sim, sim:SEED or replay:BENCH_ID, started
    ...
    server.stop()
"""

from __future__ import annotations

from dataclasses import replace

from ..config import Config, ConfigError
from ..sim.pool import start_sim
from ..sim.replay import RecordedAnswer, RecordedBench, ReplayError
from ..sim.server import SimServer
from ..store.benches import IMPORTED
from .imports import source_of

__all__ = ["read_recorded", "recorded_rank", "start_pool"]

_CHUNK = 500  # run ids per query (SQLite's bound on host parameters is far above)


def start_pool(config: Config) -> tuple[Config, SimServer]:
    """Start `config.sim`'s pool: the simulated one, or a replay of a bench read from the history
    (ConfigError, one line, when the history cannot be opened or the bench cannot be replayed)."""
    assert config.sim is not None
    if not config.sim.replay:
        return start_sim(config)
    from ..store import Store, StoreError

    try:
        store = Store.open()
    except StoreError as exc:
        raise ConfigError(f"--pool replay:{config.sim.replay}: {exc}") from None
    try:
        recorded = read_recorded(store, config.sim.replay)
    except ReplayError as exc:
        raise ConfigError(str(exc)) from None
    finally:
        store.close()
    return start_sim(config, recorded)


def read_recorded(store, bench_text: str) -> RecordedBench:
    """The bench `bench_text` names (a unique start of its id will do): its `direct:` systems and
    their graded answers, each with its run's question ("" where the run is gone). ReplayError
    when no such bench is stored."""
    from ..store import NotFoundError

    try:
        bench_id = store.resolve_bench(bench_text)
    except NotFoundError as exc:
        raise ReplayError(f"--pool replay:{bench_text}: {exc}") from None
    records = [r for r in store.bench_items(bench_id) if r.system.startswith("direct:") and r.status == "graded"]
    run_ids = [r.run_id for r in records if r.run_id]
    questions: dict[str, str] = {}
    for start in range(0, len(run_ids), _CHUNK):
        chunk = run_ids[start : start + _CHUNK]
        rows = store.query(f"SELECT id, question FROM runs WHERE id IN ({', '.join('?' * len(chunk))})", tuple(chunk))
        questions.update({row["id"]: row["question"] for row in rows})
    answers = tuple(
        RecordedAnswer(
            model=r.system.removeprefix("direct:"),
            item_id=r.item_id,
            question=questions.get(r.run_id or "", ""),
            answer=r.answer,
            correct=r.correct,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            cost_usd=r.cost_usd,
            latency_s=r.latency_s,
        )
        for r in records
    )
    bench = store.get_bench(bench_id)
    source = ""
    if bench.config_hash == IMPORTED:  # recorded answers (`stiva bench import`): no runs, the suite asks
        suite = _imported_suite(bench.suite, bench_text)
        source = source_of(suite.description) or "recorded answers"
        asked = {item.id: item.question for item in suite.items}
        answers = tuple(replace(a, question=asked.get(a.item_id, "")) for a in answers)
    models = tuple(s.removeprefix("direct:") for s in bench.systems if s.startswith("direct:"))
    return RecordedBench(bench_id, models, answers, source=source)


def _imported_suite(path: str, bench_text: str):
    from ..evals.loaders import load_suite
    from ..evals.suite import SuiteError

    try:
        return load_suite(path)
    except SuiteError as exc:
        raise ReplayError(
            f"--pool replay:{bench_text}: its suite of recorded answers cannot be read ({exc}); import it again "
            "with stiva bench import"
        ) from None


def recorded_rank(recorded: RecordedBench, train: set[str]) -> dict[str, tuple[float, float]]:
    """Each recorded model's rank for ties and agreements (core/replayed.py's `rank_by_record`),
    from its answers to the `train` items (to every item where `train` is empty): the most accurate
    first, the cheapest among equals. `stiva bench` on a replay pool ranks its models so, and the
    routing experiment's in-process replay with it."""
    from ..core.replayed import rank_by_record

    right: dict[str, list[float]] = {}
    spent: dict[str, list[float]] = {}
    for answer in recorded.answers:
        if train and answer.item_id not in train:
            continue
        right.setdefault(answer.model, []).append(float(answer.correct or 0))
        spent.setdefault(answer.model, []).append(float(answer.cost_usd or 0.0))
    return rank_by_record(
        {m: sum(v) / len(v) for m, v in right.items()}, {m: sum(v) / len(v) for m, v in spent.items()}
    )
