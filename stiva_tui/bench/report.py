"""A bench's report: the JSON object, the Markdown table, the frontier plot.

`build_report(...)` gives the one JSON object `stiva bench --json` prints (and `report.json`):

    {"suite", "bench_id", "status", "stop_reason", "sandbox" (how code items ran; None without them),
     "systems": [{"system", "n", "correct", "errors", "accuracy", "ci95", "tokens_per_question",
                  "cost_per_question", "judge_cost_usd", "latency_p50_s", "latency_p95_s",
                  "queue_wait_p50_s", "queue_wait_p95_s"}],
     "items": [{"id", "system", "run_id", "status", "correct", "answer", "extracted", "error",
                "prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "queue_wait_s"}]}

- `n` counts graded items and errors together; `accuracy` is correct / n (None when n is 0):
  an item whose calls kept failing counts against its system, as a user would experience it.
- `ci95` is the Wilson score interval of that proportion ([0, 1] when n is 0).
- Tokens and cost per question are means over the n items of everything the system spent on
  them, the conductor's plan included; the judge's cost is reported apart.
- Latency counts from an item's first call; the time it queued behind other items of the bench
  before that is `queue_wait_s`, summarised apart.

`report_markdown(...)` adds, for conductor systems, the mix of topologies and each model's share
of steps (read from the runs' traces). `write_frontier_png(...)` plots accuracy against cost per
question with matplotlib (imported there only).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.trace import Trace
from ..store.records import BenchItemRecord

Z95 = 1.959963984540054


def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of correct / n."""
    if n <= 0:
        return (0.0, 1.0)
    p = correct / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, round(centre - half, 6)), min(1.0, round(centre + half, 6)))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of `values`; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def system_row(system: str, records: Sequence[BenchItemRecord]) -> dict[str, Any]:
    n = len(records)
    correct = sum(1 for r in records if r.status == "graded" and r.correct)
    errors = sum(1 for r in records if r.status == "error")
    latencies = [r.latency_s for r in records]
    lo, hi = wilson(correct, n)
    return {
        "system": system,
        "n": n,
        "correct": correct,
        "errors": errors,
        "accuracy": (correct / n) if n else None,
        "ci95": [lo, hi],
        "tokens_per_question": (sum(r.prompt_tokens + r.completion_tokens for r in records) / n) if n else 0.0,
        "cost_per_question": (sum(r.cost_usd for r in records) / n) if n else 0.0,
        "judge_cost_usd": sum(r.judge_cost_usd for r in records),
        "latency_p50_s": round(percentile(latencies, 50), 4),
        "latency_p95_s": round(percentile(latencies, 95), 4),
        # the time items waited behind others in the bench's limiter, before their first call
        "queue_wait_p50_s": round(percentile([r.queue_wait_s for r in records], 50), 4),
        "queue_wait_p95_s": round(percentile([r.queue_wait_s for r in records], 95), 4),
    }


def build_report(suite: str, bench_id: str, systems: Sequence[str], item_order: Sequence[str],
                 records: Iterable[BenchItemRecord], *, status: str = "finished",
                 stop_reason: str | None = None) -> dict[str, Any]:
    """The report of `records` (one per finished system x item), systems and items in the
    order given (the command line's, the suite's)."""
    by_system: dict[str, list[BenchItemRecord]] = {s: [] for s in systems}
    for record in records:
        if record.system in by_system:
            by_system[record.system].append(record)
    position = {item_id: i for i, item_id in enumerate(item_order)}
    rank = {s: i for i, s in enumerate(systems)}
    ordered = sorted((r for rs in by_system.values() for r in rs if r.item_id in position),
                     key=lambda r: (position[r.item_id], rank[r.system]))
    return {
        "suite": suite,
        "bench_id": bench_id,
        "status": status,
        "stop_reason": stop_reason,
        "systems": [system_row(s, [r for r in by_system[s] if r.item_id in position]) for s in systems],
        "items": [
            {"id": r.item_id, "system": r.system, "run_id": r.run_id, "status": r.status,
             "correct": bool(r.status == "graded" and r.correct), "answer": r.answer, "extracted": r.extracted,
             "error": r.error, "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
             "cost_usd": r.cost_usd, "latency_s": r.latency_s, "queue_wait_s": r.queue_wait_s}
            for r in ordered
        ],
    }


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


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def report_markdown(report: dict[str, Any], mixes: dict[str, tuple[Counter, Counter]] | None = None) -> str:
    """The report as Markdown: the table, then the conductor systems' plan mix."""
    lines = [f"# Bench `{report['bench_id']}` on `{report['suite']}`", ""]
    if report.get("status") != "finished":
        lines += [f"**Partial report:** the bench was stopped ({report.get('stop_reason') or report.get('status')}); "
                  "run the same command again to continue it.", ""]
    sandbox = report.get("sandbox")
    if sandbox:
        loud = sandbox.startswith("NONE")
        lines += [f"{'**' if loud else ''}Code items ran in: {sandbox}{'**' if loud else ''}", ""]
    lines += ["| system | n | correct | errors | accuracy | 95% CI | tokens/q | cost/q (USD) | judge USD | p50 s | p95 s |",
              "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for row in report["systems"]:
        lo, hi = row["ci95"]
        lines.append(
            f"| {row['system']} | {row['n']} | {row['correct']} | {row['errors']} | {_fmt(row['accuracy'])} | "
            f"[{lo:.3f}, {hi:.3f}] | {row['tokens_per_question']:.0f} | {row['cost_per_question']:.6f} | "
            f"{row['judge_cost_usd']:.6f} | {row['latency_p50_s']:.2f} | {row['latency_p95_s']:.2f} |")
    for system, (shapes, models) in (mixes or {}).items():
        total = sum(shapes.values())
        steps = sum(models.values())
        if not total:
            continue
        lines += ["", f"## Plans of `{system}`", "",
                  "| topology | runs | share |", "|---|---:|---:|"]
        lines += [f"| {shape} | {shapes[shape]} | {shapes[shape] / total:.0%} |" for shape in TOPOLOGIES if shapes[shape]]
        lines += ["", "| model | steps | share of steps |", "|---|---:|---:|"]
        lines += [f"| {model} | {count} | {count / steps:.0%} |" for model, count in models.most_common()]
    return "\n".join(lines) + "\n"


def write_frontier_png(report: dict[str, Any], path: Path) -> bool:
    """Accuracy against cost per question, one point per system with its 95% interval.
    False (and nothing written) when matplotlib cannot be imported."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001 - an optional view; the table says the same
        return False
    rows = [r for r in report["systems"] if r["n"]]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    markers = "osD^vP*Xh<>p"
    for i, row in enumerate(rows):
        acc = row["accuracy"] or 0.0
        lo, hi = row["ci95"]
        # a legend, not labels beside the points: systems of equal cost and accuracy would overlap
        ax.errorbar([row["cost_per_question"]], [acc], yerr=[[acc - lo], [hi - acc]], fmt=markers[i % len(markers)],
                    capsize=4, label=f"{row['system']} ({acc:.0%}, n={row['n']})")
    dearest = max((row["cost_per_question"] for row in rows), default=0.0)
    right = dearest * 1.15 if dearest > 0 else 1e-6
    ax.set_xlim(left=-0.03 * right, right=right)  # a free system sits just inside the frame
    ax.set_xticks([t for t in ax.get_xticks() if 0 <= t <= right])  # and no negative costs on the axis
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xlabel("cost per question (USD)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{report['suite']} — accuracy vs cost ({report['bench_id']})", fontsize=10)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def terminal_frontier(report: dict[str, Any], width: int = 48, height: int = 12) -> str:
    """The frontier as text, for the terminal: accuracy (rows) against cost per question
    (columns), each system a letter, with a legend. Works in any plain terminal."""
    rows = [r for r in report["systems"] if r["n"]]
    if not rows:
        return "(no graded items yet)"
    costs = [r["cost_per_question"] for r in rows]
    lo_cost, hi_cost = min(costs), max(costs)
    span = (hi_cost - lo_cost) or 1.0
    grid = [[" "] * width for _ in range(height)]
    legend = []
    for i, row in enumerate(rows):
        mark = chr(ord("A") + i) if i < 26 else "*"
        x = 0 if hi_cost == lo_cost else round((row["cost_per_question"] - lo_cost) / span * (width - 1))
        y = height - 1 - round((row["accuracy"] or 0.0) * (height - 1))
        grid[y][x] = mark if grid[y][x] == " " else "+"
        legend.append(f"{mark} {row['system']}: accuracy {_fmt(row['accuracy'])}, "
                      f"${row['cost_per_question']:.6f}/q")
    lines = []
    for j, cells in enumerate(grid):
        label = f"{1 - j / (height - 1):4.2f}" if j in (0, height // 2, height - 1) else "    "
        lines.append(f"{label} |" + "".join(cells))
    lines.append("     +" + "-" * width)
    left, right = f"${lo_cost:.6f}/q", f"${hi_cost:.6f}/q"
    lines.append("      " + left + " " * max(1, width - len(left) - len(right)) + right)  # ends under the axis
    return "\n".join(lines + [""] + legend)
