"""The routing field's bounds and frontier, from a bench's own runs (no call of their own).

- `oracle`: for each item, the cheapest single model that got it right (RouterBench's oracle: the
  upper bound of any router over these models); where none did, the cheapest one, wrong.
- `random`: for each item, one single model drawn uniformly (fixed by the item's id, so a report
  is the same every time it is built); its row also gives the expectation over every draw.
- `aiq`: RouterBench's Average Improvement in Quality: the area under the non-decreasing convex
  hull of (cost per question, accuracy), over the cost range of the systems, divided by that range.

Both bounds need every `direct:` system graded on an item; items where one is missing are left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from ..store.records import BenchItemRecord

DERIVED = ("oracle", "random")


def _direct_by_item(records: Iterable[BenchItemRecord], direct: Sequence[str]) -> dict[str, list[BenchItemRecord]]:
    by_item: dict[str, dict[str, BenchItemRecord]] = {}
    for record in records:
        if record.system in direct:
            by_item.setdefault(record.item_id, {})[record.system] = record
    return {
        item: [found[s] for s in direct]
        for item, found in by_item.items()
        if len(found) == len(direct) and all(r.status == "graded" for r in found.values())
    }


def derived_records(system: str, records: Sequence[BenchItemRecord], direct: Sequence[str]) -> list[BenchItemRecord]:
    """The `oracle` or `random` records of a bench whose `direct` systems ran."""
    out = []
    for item_id, runs in _direct_by_item(records, direct).items():
        if system == "oracle":
            right = [r for r in runs if r.correct]
            pick = min(right or runs, key=lambda r: (r.cost_usd, r.prompt_tokens + r.completion_tokens))
            why = None if right else "no single model was right"
        else:
            digest = hashlib.sha256(f"random:{item_id}".encode()).digest()
            pick = runs[int.from_bytes(digest[:8], "big") % len(runs)]
            why = pick.error
        out.append(
            pick.model_copy(
                update={
                    "system": system,
                    "error": why,
                    "judge_prompt_tokens": 0,
                    "judge_completion_tokens": 0,
                    "judge_cost_usd": 0.0,
                }
            )
        )
    return out


def random_expectation(records: Sequence[BenchItemRecord], direct: Sequence[str]) -> float | None:
    """The accuracy of a uniformly random single model, in expectation (the mean of the models')."""
    by_item = _direct_by_item(records, direct)
    if not by_item:
        return None
    return sum(r.correct for runs in by_item.values() for r in runs) / (len(by_item) * len(direct))


def frontier(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The non-decreasing convex hull of (cost, accuracy) points, cheapest first: the points no
    mix of others beats (two systems mixed at random give any point on the line between them)."""
    best: dict[float, float] = {}
    for cost, accuracy in points:
        best[cost] = max(accuracy, best.get(cost, float("-inf")))
    rising: list[tuple[float, float]] = []
    for cost, accuracy in sorted(best.items()):
        if not rising or accuracy > rising[-1][1]:  # a dearer point that is no better is dominated
            rising.append((cost, accuracy))
    hull: list[tuple[float, float]] = []
    for point in rising:  # the upper hull (monotone chain)
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (point[1] - y1) - (y2 - y1) * (point[0] - x1) >= 0:
                hull.pop()  # hull[-1] lies on or under the line from hull[-2] to point
            else:
                break
        hull.append(point)
    return hull


def aiq(points: Sequence[tuple[float, float]], low: float, high: float) -> float | None:
    """The area under `frontier(points)` over [low, high], divided by high - low: 0 below the
    cheapest point, the hull between its points, its best accuracy after the dearest one. None
    when the range is empty."""
    hull = frontier(points)
    if not hull or high <= low:
        return None
    area = 0.0
    for (x1, y1), (x2, y2) in zip(hull, hull[1:]):
        a, b = max(x1, low), min(x2, high)
        if b > a:
            ya = y1 + (y2 - y1) * (a - x1) / (x2 - x1)
            yb = y1 + (y2 - y1) * (b - x1) / (x2 - x1)
            area += (ya + yb) / 2 * (b - a)
    last_x, last_y = hull[-1]
    if high > max(last_x, low):
        area += last_y * (high - max(last_x, low))
    return area / (high - low)
