"""A bench's report: `BenchReport`, the one typed report the CLI, the Markdown writer and the TUI
read; the Markdown table; the frontier plot.

`build_report(...)` gives a `BenchReport`; `BenchReport.to_json()` is the one JSON object
`stiva bench --json` prints (and `report.json`), with these keys in this order:

    {"suite", "bench_id", "status", "stop_reason", "sandbox" (how code items ran; None without them),
     "pool" ("simulated pool" when the sim: models answered, "recorded pool (bench ID)" for
     `--pool replay:ID`; else None: sim/labels.py),
     "systems": [{"system", "n", "correct", "errors", "accuracy", "ci95", "tokens_per_question",
                  "cost_per_question", "judge_cost_usd", "latency_p50_s", "latency_p95_s",
                  "queue_wait_p50_s", "queue_wait_p95_s"} (+ "expected_accuracy" for random)],
     "frontier": {"axis", "label", "aiq", "aiq_single_models", "hull", "on_hull"},
     "items": [{"id", "system", "run_id", "status", "correct", "answer", "extracted", "error",
                "failure" (why it is not right: the grader's detail, or the error), "prompt_tokens",
                "completion_tokens", "cost_usd", "latency_s", "queue_wait_s"}]}

- `oracle` and `random` rows are computed from the `direct:` rows (see `derived`).
- `frontier`: the non-decreasing convex hull of accuracy against cost per question (tokens when
  nothing costs money) and RouterBench's AIQ under it, beside the single models' own AIQ. The
  routers' rows (below) answer the held-out items only, so they are not on it.
- `knn[@LEVEL]` and `best-single[@LEVEL]` rows are routed from the train items' `direct:` rows onto
  the held-out ones (see `derived`); with them, or with a `router:DIR` system, the report gains
  `"routing"` (left out otherwise): {"train_items", "heldout_items", "k", "axis", "label",
  "aiq_single_models", "routers": [{"router", "aiq", "levels", "points"}], "systems": [every
  system's row on the held-out items], "unavailable" (why knn and best-single could not be
  computed, in one line; else None)}. Each router's AIQ is the area under the hull of its levels
  (a derived router's: 0 to 1 in tenths, and any level named) and of the cheapest single model
  (where any router goes at an infinite cost weight, as RouterBench sweeps it), over the single
  models' held-out cost range; `aiq_single_models` is the single models' hull over the same range.

- `n` counts graded items and errors together; `accuracy` is correct / n (None when n is 0):
  an item whose calls kept failing counts against its system, as a user would experience it.
- `ci95` is the Wilson score interval of that proportion ([0, 1] when n is 0).
- Tokens and cost per question are means over the n items of everything the system spent on
  them, the conductor's plan included; the judge's cost is reported apart.
- Latency counts from an item's first call; the time it queued behind other items of the bench
  before that is `queue_wait_s`, summarised apart. `latency_p50_s` and `latency_p95_s` are None
  where no item of the system has a latency (a bench imported from records without one): "not
  recorded", shown as "—", never as 0 s.

`report_markdown(...)` adds, for conductor systems, the mix of topologies and each model's share
of steps (read from the runs' traces). `write_frontier_png(...)` plots accuracy against cost per
question with matplotlib (imported there only).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from ..core import display as fmt
from ..core.trace import Trace
from ..sim.labels import loud, pool_notice
from ..store.records import BenchItemRecord
from .derived import (
    DERIVED,
    KNN_K,
    ROUTERS,
    TRAIN_SPLIT,
    RoutingUnavailable,
    aiq,
    derived_records,
    fit_routing,
    frontier,
    heldout_items,
    random_expectation,
    router_level,
    sweep_names,
)

Z95 = 1.959963984540054


# --- the report -------------------------------------------------------------------------------------


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SystemRow(_Part):
    """One system's row: what `n` items of it came to."""

    system: str
    n: int
    correct: int
    errors: int
    accuracy: float | None  # correct / n; None when n is 0
    ci95: list[float]  # [low, high]
    tokens_per_question: float
    cost_per_question: float
    judge_cost_usd: int | float  # the JSON has always said 0, not 0.0, for a system with no items yet
    latency_p50_s: float | None  # None: not recorded (an imported bench's records with no latency)
    latency_p95_s: float | None
    # the time items waited behind others in the bench's limiter, before their first call
    queue_wait_p50_s: float
    queue_wait_p95_s: float
    expected_accuracy: float | None = None  # `random`'s row only: the key is not in the others

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if self.system != "random":
            data.pop("expected_accuracy", None)
        return data


class Frontier(_Part):
    """The accuracy-vs-cost frontier of the measured systems, and its AIQ."""

    axis: str  # the SystemRow field on the x axis: cost_per_question, or tokens_per_question
    label: str
    aiq: float | None
    aiq_single_models: float | None
    hull: list[list[float]]  # [[x, accuracy], ...], cheapest first
    on_hull: list[str]


class RouterLine(_Part):
    """A router's points on the held-out items, one per level, and the AIQ of their hull."""

    router: str  # knn, best-single, router:DIR
    aiq: float | None
    levels: list[str]  # the systems the points are, in order; the last is the cheapest single model
    points: list[list[float]]  # [[x, accuracy], ...]


class Routing(_Part):
    """The routers against the single models, on the held-out items (meta.split not "train")."""

    train_items: int
    heldout_items: int
    k: int  # the neighbours knn reads
    axis: str
    label: str
    aiq_single_models: float | None  # the single models' hull, over their own cost range
    routers: list[RouterLine]
    systems: list[SystemRow]  # every system of the bench, on the held-out items only
    unavailable: str | None  # why knn and best-single could not be computed (None where none was named)
    # router:DIR -> the train items its own files say it learnt from (router.json's "items"; None
    # where they cannot be read): this bench's train items are knn's and best-single's, not its
    router_items: dict[str, int | None] = {}


class ItemRow(_Part):
    """One (item, system): its verdict, what was read from the answer, and what it cost."""

    id: str
    system: str
    run_id: str | None
    status: str  # "graded" or "error"
    correct: bool
    answer: str
    extracted: str
    error: str | None
    failure: str | None  # why it is not right: the grader's detail, or the error
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    queue_wait_s: float


class AnswerCacheLine(_Part):
    """What `--answer-cache` did in this invocation."""

    reused: int
    asked: int
    saved_usd: float
    off: str | None  # why the cache went off, if it did


class BenchReport(_Part):
    """A bench's report. `sandbox`, `answer_cache` and `pool` are what the command knows of the
    invocation (the TUI, reading the history alone, leaves them unset); `answer_cache` is left out
    of the JSON when `--answer-cache` was not given."""

    suite: str
    bench_id: str
    status: str
    stop_reason: str | None
    systems: list[SystemRow]
    frontier: Frontier
    items: list[ItemRow]
    sandbox: str | None = None  # how code items ran; None without them
    answer_cache: AnswerCacheLine | None = None
    pool: str | None = None  # "simulated pool", "recorded pool (bench ID)"; None for real models
    routing: Routing | None = None  # with knn, best-single or router:DIR systems only

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if self.answer_cache is None:
            data.pop("answer_cache", None)
        if self.routing is None:
            data.pop("routing", None)
        return data

    def to_json(self) -> str:
        """The JSON object `stiva bench --json` prints and report.json holds."""
        return json.dumps(self.model_dump(), indent=2)


def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of correct / n."""
    if n <= 0:
        return (0.0, 1.0)
    p = correct / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, round(centre - half, 6)), min(1.0, round(centre + half, 6)))


def bootstrap_mean(values: Sequence[float], resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the mean of `values` and its percentile-bootstrap 95% interval.

    For per-question costs and latencies, which are skewed (most questions cost nothing on a free
    model, a few cost much): a normal interval of such a mean runs below zero, the bootstrap's
    stays inside what the values can give. Seeded, so a report is reproduced exactly."""
    if not values:
        return (0.0, 0.0, 0.0)
    n = len(values)
    mean = math.fsum(values) / n
    if n == 1:
        return (mean, mean, mean)
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))
    return (mean, percentile(means, 2.5), percentile(means, 97.5))


def bootstrap_difference(
    pairs: Sequence[tuple[float, float]], resamples: int = 4000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high) of b - a over paired values (the same questions under two systems):
    the paired bootstrap, which is the honest test of "b is above a" when both saw each question."""
    return bootstrap_mean([b - a for a, b in pairs], resamples, seed)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of `values`; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def system_row(system: str, records: Sequence[BenchItemRecord]) -> SystemRow:
    n = len(records)
    correct = sum(1 for r in records if r.status == "graded" and r.correct)
    errors = sum(1 for r in records if r.status == "error")
    latencies = [r.latency_s for r in records]
    # every item at 0 s: no latency was recorded (a bench imported from records without one); a
    # call that ran took some time
    timed = not latencies or any(latency > 0 for latency in latencies)  # no item at all: 0 s, as always
    lo, hi = wilson(correct, n)
    return SystemRow(
        system=system,
        n=n,
        correct=correct,
        errors=errors,
        accuracy=(correct / n) if n else None,
        ci95=[lo, hi],
        tokens_per_question=(sum(r.prompt_tokens + r.completion_tokens for r in records) / n) if n else 0.0,
        cost_per_question=(sum(r.cost_usd for r in records) / n) if n else 0.0,
        judge_cost_usd=sum(r.judge_cost_usd for r in records),
        latency_p50_s=round(percentile(latencies, 50), 4) if timed else None,
        latency_p95_s=round(percentile(latencies, 95), 4) if timed else None,
        queue_wait_p50_s=round(percentile([r.queue_wait_s for r in records], 50), 4),
        queue_wait_p95_s=round(percentile([r.queue_wait_s for r in records], 95), 4),
    )


def build_report(
    suite: str,
    bench_id: str,
    systems: Sequence[str],
    item_order: Sequence[str],
    records: Iterable[BenchItemRecord],
    *,
    status: str = "finished",
    stop_reason: str | None = None,
    questions: Mapping[str, str] | None = None,
    splits: Mapping[str, str | None] | None = None,
) -> BenchReport:
    """The report of `records` (one per finished system x item), systems and items in the
    order given (the command line's, the suite's). `questions` and `splits` (item id -> the
    question, its meta.split) are what `knn` and `best-single` learn from; without them their rows
    are empty and the routing section says why."""
    by_system: dict[str, list[BenchItemRecord]] = {s: [] for s in systems}
    position = {item_id: i for i, item_id in enumerate(item_order)}
    for record in records:
        if record.system in by_system and record.item_id in position:
            by_system[record.system].append(record)
    direct = [s for s in systems if s.startswith("direct:")]
    measured = [r for s in direct for r in by_system[s]]
    for name in DERIVED:
        if name in by_system:
            by_system[name] = derived_records(name, measured, direct)
    routing = None
    if any(router_level(s) or s.startswith("router:") for s in systems):
        routing = routing_summary(systems, by_system, measured, direct, questions, splits)
    rank = {s: i for i, s in enumerate(systems)}
    ordered = sorted((r for rs in by_system.values() for r in rs), key=lambda r: (position[r.item_id], rank[r.system]))
    rows = [system_row(s, by_system[s]) for s in systems]
    for row in rows:
        if row.system == "random":
            row.expected_accuracy = random_expectation(measured, direct)
    return BenchReport(
        suite=suite,
        bench_id=bench_id,
        status=status,
        stop_reason=stop_reason,
        systems=rows,
        frontier=frontier_summary(rows),
        routing=routing,
        items=[
            ItemRow(
                id=r.item_id,
                system=r.system,
                run_id=r.run_id,
                status=r.status,
                correct=bool(r.status == "graded" and r.correct),
                answer=r.answer,
                extracted=r.extracted,
                error=r.error if r.status == "error" else None,
                failure=None if r.status == "graded" and r.correct else (r.error or "wrong answer"),
                prompt_tokens=r.prompt_tokens,
                completion_tokens=r.completion_tokens,
                cost_usd=r.cost_usd,
                latency_s=r.latency_s,
                queue_wait_s=r.queue_wait_s,
            )
            for r in ordered
        ],
    )


def frontier_axis(rows: Sequence[SystemRow]) -> tuple[str, str]:
    """(row field, axis label) of the frontier's x axis: cost per question, or tokens per question
    when nothing costs money (a free pool would otherwise put every system on one point)."""
    if any(r.n and r.cost_per_question > 0 for r in rows):
        return "cost_per_question", "cost per question (USD)"
    return "tokens_per_question", "tokens per question"


def frontier_summary(rows: Sequence[SystemRow]) -> Frontier:
    """The accuracy-vs-cost frontier of the measured systems (oracle left out: it is a bound no
    system reaches) and its AIQ, beside the AIQ of the single models alone over the same range."""
    key, label = frontier_axis(rows)
    measured = [
        r for r in rows if r.n and r.accuracy is not None and r.system != "oracle" and not router_level(r.system)
    ]
    points = [(getattr(r, key), r.accuracy) for r in measured]
    low = min((x for x, _ in points), default=0.0)
    high = max((x for x, _ in points), default=0.0)
    singles = [(getattr(r, key), r.accuracy) for r in measured if r.system.startswith("direct:")]
    hull = frontier(points)
    on_hull = [r.system for r in measured if (getattr(r, key), r.accuracy) in hull]
    return Frontier(
        axis=key,
        label=label,
        aiq=aiq(points, low, high),
        aiq_single_models=aiq(singles, low, high) if singles else None,
        hull=[[x, y] for x, y in hull],
        on_hull=on_hull,
    )


def routing_summary(
    systems: Sequence[str],
    by_system: dict[str, list[BenchItemRecord]],
    measured: Sequence[BenchItemRecord],
    direct: Sequence[str],
    questions: Mapping[str, str] | None,
    splits: Mapping[str, str | None] | None,
) -> Routing:
    """Fills `by_system`'s derived routers (knn, best-single) from the train items, and measures
    every router against the single models on the held-out items."""
    unavailable = None
    fitted = None
    try:
        fitted = fit_routing(measured, direct, questions, splits)
    except RoutingUnavailable as exc:
        unavailable = str(exc)
    derived: dict[str, list[BenchItemRecord]] = {}
    if fitted is not None:
        for system in systems:
            if router_level(system):
                by_system[system] = derived[system] = fitted.records(system)
    if fitted is not None:  # the items every single model answered: the routers' and the singles' alike
        train, heldout = set(fitted.train_ids), set(fitted.heldout_ids)
    else:
        known = splits or {}
        train = {r.item_id for r in measured if known.get(r.item_id) == TRAIN_SPLIT}
        heldout = set(heldout_items(known, {r.item_id for r in measured})) if splits else set()
    rows = [system_row(s, [r for r in by_system[s] if r.item_id in heldout]) for s in systems]
    key, label = frontier_axis(rows)
    singles = [(getattr(r, key), r.accuracy) for r in rows if r.system in direct and r.n and r.accuracy is not None]
    low = min((x for x, _ in singles), default=0.0)
    high = max((x for x, _ in singles), default=0.0)
    families: dict[str, list[SystemRow]] = {}
    if fitted is not None:
        for base in ROUTERS:
            named = [s for s in systems if s.partition("@")[0] == base and router_level(s)]
            if named:
                for system in dict.fromkeys([*sweep_names(base), *named]):
                    records = derived.get(system) or fitted.records(system)
                    families.setdefault(base, []).append(system_row(system, records))
    for row in rows:
        if row.system.startswith("router:") and row.n:
            families.setdefault(row.system.rpartition("@")[0] or row.system, []).append(row)
    # Every router's hull starts at the cheapest single model: where any router goes at an
    # infinite cost weight (RouterBench sweeps its willingness to pay that far).
    single_rows = [r for r in rows if r.system in direct and r.n and r.accuracy is not None]
    cheapest = min(single_rows, key=lambda r: (getattr(r, key), -(r.accuracy or 0.0), r.system), default=None)
    routers = []
    for name, levels in families.items():
        kept = [r for r in levels if r.n and r.accuracy is not None] + ([cheapest] if cheapest else [])
        points = [(getattr(r, key), r.accuracy or 0.0) for r in kept]
        routers.append(
            RouterLine(
                router=name,
                aiq=aiq(points, low, high) if points and singles else None,
                levels=[r.system for r in kept],
                points=[[x, y] for x, y in points],
            )
        )
    if not any(router_level(s) for s in systems):
        unavailable = None  # knn and best-single were not asked for: nothing to say about them
    return Routing(
        router_items={name: _router_items(name) for name in families if name.startswith("router:")},
        train_items=len(train),
        heldout_items=len(heldout),
        k=fitted.k if fitted is not None else KNN_K,
        axis=key,
        label=label,
        aiq_single_models=aiq(singles, low, high) if singles else None,
        routers=routers,
        systems=rows,
        unavailable=unavailable,
    )


def _router_items(system: str) -> int | None:
    """The train items `router:DIR` learnt from, as its router.json says (None where it cannot be read)."""
    from ..core.reading import read_text

    try:
        data = json.loads(read_text(Path(system.removeprefix("router:")).expanduser() / "router.json", 16 << 20))
    except (OSError, ValueError, RecursionError):
        return None
    items = data.get("items") if isinstance(data, dict) else None
    return items if isinstance(items, int) and not isinstance(items, bool) else None


def routing_covers(routing: Routing, total_items: int) -> str:
    """Which items the routing AIQs are on, said once: "these 25 held-out items" where the table's
    items are all held out (`--split heldout`), else "the 25 held-out items (of the 40 above)"."""
    n = routing.heldout_items
    return f"these {n} held-out items" if n >= total_items else f"the {n} held-out items (of the {total_items} above)"


def routing_learnt(routing: Routing) -> str:
    """What each router learnt from: a router:DIR from its own files, knn and best-single from
    this bench's train items. "" where no router is measured."""
    parts = []
    for name, items in routing.router_items.items():
        parts.append(
            f"{name} from {'an unknown number of' if items is None else f'{items:,}'} train items (its router.json)"
        )
    derived = [r.router for r in routing.routers if r.router in ROUTERS]
    if derived:
        parts.append(f"{' and '.join(derived)} from this bench's {routing.train_items:,} train items")
    return ("learnt: " + "; ".join(parts)) if parts else ""


# --- the conductor's plans --------------------------------------------------------------------------

TOPOLOGIES = ("one step", "chain", "fan-in", "other DAG", "second round")


def topology(trace: Trace) -> str | None:
    """The shape of a conductor run: a second round (that changed the plan) wins over the first
    round's shape; parallel steps without a reader count as fan-in's kin, "other DAG"."""
    rounds = [r for r in trace.rounds if r.workflow is not None]
    if not rounds:
        return None
    if any(r.round > 1 and r.workflow is not None and r.workflow.model_id for r in rounds):
        return "second round"
    workflow = rounds[0].workflow.workflow() if rounds[0].workflow is not None else None
    if workflow is None:
        return None
    shape = workflow.shape()
    return {"single": "one step", "chain": "chain", "fan-in": "fan-in"}.get(shape, "other DAG")


def plan_mix(traces: Iterable[Trace]) -> tuple[Counter, Counter]:
    """(topology counts, step counts by model) over conductor runs."""
    shapes: Counter = Counter()
    models: Counter = Counter()
    for trace in traces:
        shape = topology(trace)
        if shape is not None:
            shapes[shape] += 1
        for round_ in trace.rounds:
            for step in round_.steps:
                if step.model:
                    models[step.model] += 1
    return shapes, models


def not_timed(rows: Sequence[SystemRow]) -> str:
    """ "not recorded for A, B" (or "not recorded" where no system's latency was): the systems whose
    p50 and p95 are shown as "—"; "" where every system's were recorded."""
    missing = [r.system for r in rows if r.n and r.latency_p50_s is None]
    if not missing:
        return ""
    return "not recorded" if len(missing) == len([r for r in rows if r.n]) else f"not recorded for {', '.join(missing)}"


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def report_markdown(report: BenchReport, mixes: dict[str, tuple[Counter, Counter]] | None = None) -> str:
    """The report as Markdown: the table, then the conductor systems' plan mix."""
    lines = [f"# Bench `{report.bench_id}` on `{report.suite}`", ""]
    notice = pool_notice(report.pool)  # simulated or recorded: said before any figure
    if notice is not None:
        lines += [f"**{notice[0]}:** {notice[1]}", ""]
    if report.status != "finished":
        lines += [
            f"**Partial report:** the bench was stopped ({report.stop_reason or report.status}); "
            "run the same command again to continue it.",
            "",
        ]
    sandbox = report.sandbox
    if sandbox:
        loud = sandbox.startswith("NONE")
        lines += [f"{'**' if loud else ''}Code items ran in: {sandbox}{'**' if loud else ''}", ""]
    lines += [
        "| system | n | correct | errors | accuracy | 95% CI | tokens/q | cost/q (USD) | judge USD | p50 s | p95 s |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in report.systems:
        lo, hi = row.ci95
        lines.append(
            f"| {row.system} | {row.n} | {row.correct} | {row.errors} | {_fmt(row.accuracy)} | "
            f"[{lo:.3f}, {hi:.3f}] | {row.tokens_per_question:.0f} | {row.cost_per_question:.6f} | "
            f"{row.judge_cost_usd:.6f} | {_fmt(row.latency_p50_s, 2)} | {_fmt(row.latency_p95_s, 2)} |"
        )
    untimed = not_timed(report.systems)
    if untimed:
        lines += ["", f"p50, p95: {untimed}."]
    summary = report.frontier
    if report.routing is not None and report.routing.heldout_items and summary.on_hull:
        # one AIQ per system: the routing section's, on the held-out items; the frontier's names only
        lines += ["", f"On the frontier: {', '.join(summary.on_hull)}. AIQ: see the routing section."]
    elif summary.aiq is not None:
        single = summary.aiq_single_models
        lines += [
            "",
            f"AIQ (area under the accuracy-vs-{summary.label.split(' per ')[0]} frontier): "
            f"{summary.aiq:.3f}"
            + (f"; single models alone: {single:.3f}" if single is not None else "")
            + f". On the frontier: {', '.join(summary.on_hull)}.",
        ]
    if report.routing is not None:
        lines += ["", *routing_markdown(report.routing)]
    for system, (shapes, models) in (mixes or {}).items():
        total = sum(shapes.values())
        steps = sum(models.values())
        if not total:
            continue
        lines += ["", f"## Plans of `{system}`", "", "| topology | runs | share |", "|---|---:|---:|"]
        lines += [
            f"| {shape} | {shapes[shape]} | {shapes[shape] / total:.0%} |" for shape in TOPOLOGIES if shapes[shape]
        ]
        lines += ["", "| model | steps | share of steps |", "|---|---:|---:|"]
        lines += [f"| {model} | {count} | {count / steps:.0%} |" for model, count in models.most_common()]
    return "\n".join(lines) + "\n"


def routing_markdown(routing: Routing) -> list[str]:
    """The routing section's lines: the held-out table and each router's AIQ."""
    lines = [f"## Routing on the {routing.heldout_items} held-out items", ""]
    if routing.unavailable:
        lines += [f"**knn, best-single:** {routing.unavailable}", ""]
    if not routing.heldout_items:
        return lines
    derived = [r.router for r in routing.routers if r.router in ROUTERS]
    how = (
        f"; {' and '.join(derived)} learnt from this bench's {routing.train_items} train items' direct: answers "
        f"(knn: the {routing.k} nearest train questions, hashed TF-IDF of words and character n-grams)"
        if derived
        else ""
    )
    own = "".join(
        f"; {name} learnt from {'an unknown number of' if items is None else f'{items:,}'} train items "
        "(its router.json)"
        for name, items in routing.router_items.items()
    )
    lines += [
        f'Every system on the items whose meta.split is not "train"{how}{own}.',
        "",
        "| system | n | accuracy | 95% CI | tokens/q | cost/q (USD) |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for row in routing.systems:
        lo, hi = row.ci95
        lines.append(
            f"| {row.system} | {row.n} | {_fmt(row.accuracy)} | [{lo:.3f}, {hi:.3f}] | "
            f"{row.tokens_per_question:.0f} | {row.cost_per_question:.6f} |"
        )
    what = routing.label.split(" per ")[0]
    parts = [f"single models {_fmt(routing.aiq_single_models)}"]
    parts += [f"{r.router} {_fmt(r.aiq)} ({len(r.points) - 1} levels)" for r in routing.routers]
    lines += [
        "",
        f"AIQ on these items, over the single models' {what} range (a router's hull starts at the cheapest "
        "single model, where any router goes at an infinite cost weight): " + " · ".join(parts) + ".",
    ]
    return lines


def routing_line(routing: Routing, total_items: int | None = None) -> str:
    """The routing section in one line, under the terminal's table: one AIQ per system (the single
    models' hull, each router), the items they are on said once, and what each router learnt
    from. `total_items`: the items of the table above (default: the held-out ones)."""
    if not routing.heldout_items:
        return f"knn, best-single: {routing.unavailable or 'no held-out item'}"
    parts = [f"single models {_fmt(routing.aiq_single_models)}"]
    parts += [f"{r.router} {_fmt(r.aiq)}" for r in routing.routers]
    covers = routing_covers(routing, total_items or routing.heldout_items)
    line = f"AIQ on {covers}: " + " · ".join(parts)
    learnt = routing_learnt(routing)
    line += f" · {learnt}" if learnt else ""
    return line + (f" · knn, best-single: {routing.unavailable}" if routing.unavailable else "")


def write_frontier_png(report: BenchReport, path: Path) -> bool:
    """Accuracy against cost per question (tokens when nothing costs money), one point per system
    with its 95% interval, and the frontier drawn as the non-decreasing convex hull; with a
    routing section, a second panel beside it: the held-out items, each router's levels as a line
    against the single models' hull. False (and nothing written) when matplotlib cannot be
    imported."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001 - an optional view; the table says the same
        return False
    rows = [r for r in report.systems if r.n]
    key, label = frontier_axis(rows)
    routing = report.routing if report.routing is not None and report.routing.heldout_items else None
    if routing is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    else:
        fig, (ax, held) = plt.subplots(1, 2, figsize=(12.0, 4.4), dpi=120)
    markers = "osD^vP*Xh<>p"
    for i, row in enumerate(rows):
        acc = row.accuracy or 0.0
        lo, hi = row.ci95
        # a legend, not labels beside the points: systems of equal cost and accuracy would overlap
        ax.errorbar(
            [getattr(row, key)],
            [acc],
            yerr=[[acc - lo], [hi - acc]],
            fmt=markers[i % len(markers)],
            capsize=4,
            label=f"{row.system} ({acc:.0%}, n={row.n})",
        )
    dearest = max((getattr(row, key) for row in rows), default=0.0)
    right = dearest * 1.15 if dearest > 0 else 1.0
    hull = report.frontier.hull
    if hull:
        xs = [x for x, _ in hull] + [right]
        ys = [y for _, y in hull] + [hull[-1][1]]
        aiq_value = report.frontier.aiq
        ax.plot(
            xs,
            ys,
            "-",
            color="0.5",
            alpha=0.6,
            zorder=0,
            label="frontier" + (f" (AIQ {aiq_value:.3f})" if aiq_value is not None else ""),
        )
    _frame(ax, right, label)
    pool = f" — {loud(report.pool)}" if report.pool else ""
    ax.set_title(f"{report.suite} — accuracy vs {label.split(' per ')[0]} ({report.bench_id}){pool}", fontsize=9)
    if routing is not None:
        _draw_routing(held, routing, markers)
        held.set_title(f"routers on the {routing.heldout_items} held-out items{pool}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def _frame(ax: Any, right: float, label: str) -> None:
    ax.set_xlim(left=-0.03 * right, right=right)  # a free system sits just inside the frame
    ax.set_xticks([t for t in ax.get_xticks() if 0 <= t <= right])  # and no negative costs on the axis
    ax.legend(fontsize=7, loc="lower right")
    ax.set_xlabel(label)
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)


def _draw_routing(ax: Any, routing: Routing, markers: str) -> None:
    """The held-out panel: the single models and their hull, `oracle`, and each router's levels."""
    key = routing.axis
    rows = [r for r in routing.systems if r.n and r.accuracy is not None]
    singles = [r for r in rows if r.system.startswith("direct:")]
    for i, row in enumerate(singles):
        ax.plot(
            [getattr(row, key)], [row.accuracy], markers[i % len(markers)], label=f"{row.system} ({row.accuracy:.0%})"
        )
    xs = [getattr(r, key) for r in rows] + [x for line in routing.routers for x, _ in line.points]
    right = max(xs, default=0.0) * 1.15 or 1.0
    hull = frontier((getattr(r, key), r.accuracy or 0.0) for r in singles)
    if hull:
        ax.plot(
            [x for x, _ in hull] + [right],
            [y for _, y in hull] + [hull[-1][1]],
            "-",
            color="0.5",
            alpha=0.6,
            zorder=0,
            label=f"single models' hull (AIQ {_fmt(routing.aiq_single_models)})",
        )
    for row in rows:
        if row.system == "oracle":
            ax.plot([getattr(row, key)], [row.accuracy], "*", color="gold", markersize=11, label="oracle")
    for line in routing.routers:
        points = sorted((x, y) for x, y in line.points)
        ax.plot([x for x, _ in points], [y for _, y in points], ".-", label=f"{line.router} (AIQ {_fmt(line.aiq)})")
    _frame(ax, right, routing.label)


def terminal_frontier(report: BenchReport, width: int = 48, height: int = 12) -> str:
    """The frontier as text, for the terminal: accuracy (rows) against cost per question
    (columns), each system a letter, with a legend; systems that fall on one cell share a "+",
    and a legend line names them. Works in any plain terminal."""
    rows = [r for r in report.systems if r.n]
    if not rows:
        return "(no graded items yet)"
    costs = [r.cost_per_question for r in rows]
    lo_cost, hi_cost = min(costs), max(costs)
    span = (hi_cost - lo_cost) or 1.0
    grid = [[" "] * width for _ in range(height)]
    legend = []
    held_at: dict[tuple[int, int], list[tuple[str, SystemRow]]] = {}  # what each cell holds
    for i, row in enumerate(rows):
        mark = chr(ord("A") + i) if i < 26 else "*"
        x = 0 if hi_cost == lo_cost else round((row.cost_per_question - lo_cost) / span * (width - 1))
        y = height - 1 - round((row.accuracy or 0.0) * (height - 1))
        grid[y][x] = mark if grid[y][x] == " " else "+"
        held_at.setdefault((y, x), []).append((mark, row))
        legend.append(f"{mark} {row.system}: accuracy {_fmt(row.accuracy)}, {fmt.money(row.cost_per_question)}/q")
    # A point hidden under another is named: "+" is where several fell, and this says which.
    for (_y, _x), held in sorted(held_at.items(), key=lambda c: (c[0][1], c[0][0])):
        if len(held) > 1:
            first = held[0][1]
            legend.append(
                f"+ {', '.join(mark for mark, _ in held)}: on the same point "
                f"(accuracy {_fmt(first.accuracy, 2)}, {fmt.money(first.cost_per_question)}/q)"
            )
    lines = []
    for j, cells in enumerate(grid):
        label = f"{1 - j / (height - 1):4.2f}" if j in (0, height // 2, height - 1) else "    "
        lines.append(f"{label} |" + "".join(cells))
    lines.append("     +" + "-" * width)
    left, right = f"{fmt.money(lo_cost)}/q", f"{fmt.money(hi_cost)}/q"
    lines.append("      " + left + " " * max(1, width - len(left) - len(right)) + right)  # ends under the axis
    return "\n".join(lines + [""] + legend)
