"""Grade every single model of the pool (or other systems) on a suite: the labelled outcomes `stiva train --method
graded-dpo` learns from, as routers are trained from graded model outputs (RouteLLM, RouterBench).

    benches = grade_pool(config, suite, seeds=8, progress=print)
    # then DPO on their pairs: train.dpo.train_from_votes(..., benches=[b.bench_id for b in benches])

Each grading is a real `stiva bench` of `direct:M` for every model M (kept in the history,
resumed and never paid twice when it is run again). A simulated pool is graded under `seeds`
seeds (the pool's own seed, then the next ones): K samples of every model on every question,
as a real pool graded K times at a temperature, so the pairs follow each item's mean grade rather
than one draw's luck. A real pool is graded once: asked the same prompt again, a real model
answers from the answer cache, and no new draw is had.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from .trainer import TrainError

Progress = Callable[[str], None]


class GradingFailed(TrainError):
    """The grading bench ran and stopped (another process runs it, a cancel): not a usage error.
    A history that cannot be written raises the store's own error (a `HistoryFault`)."""


@dataclass(frozen=True)
class GradedBench:
    bench_id: str
    seed: int | None  # the simulated pool's seed; None for a real pool
    accuracy: dict[str, float] = field(default_factory=dict)  # per system, over its graded items
    items: int = 0


def grade_pool(
    config,
    suite,
    seeds: int = 1,
    *,
    systems: str = "direct:*",
    progress: Progress | None = None,
    unsafe_code: bool = False,
    answer_cache: bool = True,
    concurrency: int = 8,
) -> list[GradedBench]:
    """Bench `systems` (`stiva bench --systems`; by default `direct:M` for every model of the pool)
    on `suite`, once per seed (TrainError when a bench cannot run, GradingFailed when one stops before
    every item is graded, the store's HistoryFault when the history cannot be written). `chain:A>B`
    systems among them give pairs with two-step plans."""
    from ..runtime.systems import SystemNameError, parse_systems

    try:
        parsed = parse_systems([systems])
    except SystemNameError as exc:
        raise TrainError(f"--graded-systems: {exc}") from None
    if seeds < 1:
        raise TrainError("--graded-seeds must be at least 1")
    simulated = config.sim is not None and not config.sim.replay
    if seeds > 1 and not simulated:
        raise TrainError(
            f"--graded-seeds {seeds} grades a simulated pool under {seeds} seeds (--pool sim); a real "
            "or recorded pool answers the same prompt from the answer cache, so grade it once"
        )
    out: list[GradedBench] = []
    for k in range(seeds):
        seed = config.sim.seed + k if simulated else None
        if k == 0:  # the pool the command started
            out.append(_grade(config, suite, parsed, seed, progress, unsafe_code, answer_cache, concurrency))
            continue
        from ..sim.pool import start_sim

        reseeded, server = start_sim(config.model_copy(update={"sim": config.sim.model_copy(update={"seed": seed})}))
        try:
            out.append(_grade(reseeded, suite, parsed, seed, progress, unsafe_code, answer_cache, concurrency))
        finally:
            server.stop()
    return out


def _grade(config, suite, systems, seed, progress, unsafe_code, answer_cache, concurrency) -> GradedBench:
    return asyncio.run(_grade_async(config, suite, systems, seed, progress, unsafe_code, answer_cache, concurrency))


async def _grade_async(config, suite, systems, seed, progress, unsafe_code, use_cache, concurrency) -> GradedBench:
    from ..bench.runner import BenchBusy, BenchError, BenchRunner
    from ..runtime import Runtime
    from ..store.faults import HistoryFaultsHeldBack

    runtime = await Runtime.create(config)
    answer_cache = None
    if use_cache:
        from ..pool.answer_cache import AnswerCache

        answer_cache = AnswerCache.open()
    where = f" (sim seed {seed})" if seed is not None else ""
    try:
        last = [-1]

        def on_progress(p) -> None:  # a line at every tenth of the way
            tenth = p.done * 10 // max(1, p.total)
            if progress and tenth != last[0]:
                last[0] = tenth
                progress(f"grading {len(names)} systems on {suite.name}{where}: {p.done}/{p.total}")

        try:
            runner = BenchRunner(
                runtime,
                suite,
                systems,
                concurrency=concurrency,
                on_progress=on_progress,
                unsafe_code=unsafe_code,
                answer_cache=answer_cache,
            )
            names = [s.name for s in runner.run_systems]
            if len(names) < 2:
                raise TrainError(
                    f"grading needs two systems or more to choose between; {', '.join(names)} "
                    "is one (a pool of one model?)"
                )
            runner.check()
            with HistoryFaultsHeldBack():  # a full disk stops the bench: said once, by the caller
                outcome = await runner.run()
        except BenchBusy as exc:
            raise GradingFailed(f"grading the pool{where}: {exc}") from None
        except BenchError as exc:
            raise TrainError(f"grading the pool{where}: {exc}") from None
        if outcome.status != "finished":
            raise GradingFailed(
                f"grading the pool{where} stopped ({outcome.stop_reason}); run the same command "
                f"again to continue (bench {outcome.bench_id} resumes)"
            )
        right: dict[str, list[bool]] = {}
        for record in outcome.records:
            if record.status == "graded":
                right.setdefault(record.system, []).append(record.correct)
        accuracy = {name: round(sum(v) / len(v), 4) for name in names if (v := right.get(name))}
        if progress:
            progress(
                f"graded bench {outcome.bench_id}{where}: "
                + ", ".join(f"{s.removeprefix('direct:')} {a:.0%}" for s, a in accuracy.items())
            )
        return GradedBench(outcome.bench_id, seed, accuracy, len(runner.items))
    finally:
        await runtime.aclose()
        if answer_cache is not None:
            answer_cache.close()
