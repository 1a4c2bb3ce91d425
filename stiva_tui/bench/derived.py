"""The routing field's bounds and frontier, from a bench's own runs (no call of their own).

- `oracle`: for each item, the cheapest single model that got it right (RouterBench's oracle: the
  upper bound of any router over these models); where none did, the cheapest one, wrong.
- `random`: for each item, one single model drawn uniformly (fixed by the item's id, so a report
  is the same every time it is built); its row also gives the expectation over every draw.
- `aiq`: RouterBench's Average Improvement in Quality: the area under the non-decreasing convex
  hull of (cost per question, accuracy), over the cost range of the systems, divided by that range.

Both bounds need every `direct:` system graded on an item; items where one is missing are left out.

The routing field's baselines (RouterBench, RouteLLM), learnt from the bench's train items (the
suite's `meta.split` "train") and applied to every other item, the held-out ones:

- `knn[@LEVEL]`: for each held-out item, the `KNN_K` train items whose questions are nearest by
  cosine of `core.textvec`'s hashed TF-IDF; then the model with the best mean score over them minus
  the level's cost weight times the model's normalised cost (and its latency weight times its
  normalised latency);
- `best-single[@LEVEL]`: the one model with the best mean score over all the train items minus the
  same weights, for every held-out item.

A model's cost is its mean cost per train item (tokens when nothing costs money), divided by the
dearest model's; its latency the same. LEVEL is what `--prefer` reads (core/preference.py: `best`,
`balanced`, `cheap`, `fast`, or a number from 0, best, to 1, cheap); no level is `best`. Equal
utilities go to the cheaper model. `fit_routing` needs the items' questions and splits (the suite's:
this module reads no file), and says why it cannot in one line (`RoutingUnavailable`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from ..core.preference import LEVELS, Preference, PreferenceError, parse_preference
from ..store.records import BenchItemRecord

DERIVED = ("oracle", "random")
ROUTERS = ("knn", "best-single")
TRAIN_SPLIT = "train"
KNN_K = 10
# The levels a derived router's AIQ is measured over: the preference scale from 0 (best) to 1
# (cheap) in tenths, the points a `knn@0.3` names.
SWEEP = tuple(round(i / 10, 1) for i in range(11))


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


# --- the routing field's baselines -----------------------------------------------------------------


class RoutingUnavailable(Exception):
    """Why `knn` and `best-single` cannot be computed on a bench, in one line."""


def router_level(system: str) -> tuple[str, Preference] | None:
    """(`knn` or `best-single`, its preference) for a derived router's name (`knn`, `knn@cheap`,
    `best-single@0.3`; no level is `best`); None for any other system."""
    base, at, level = system.partition("@")
    if base not in ROUTERS:
        return None
    if not at:
        return base, LEVELS["best"]
    try:
        preference = parse_preference(level)
    except PreferenceError:
        return None
    return (base, preference) if preference is not None else None


def sweep_names(base: str) -> list[str]:
    """The systems whose points make a derived router's AIQ: `base@0` .. `base@1` in tenths."""
    return [f"{base}@{level:g}" for level in SWEEP]


def _score(record: BenchItemRecord) -> float:
    """A record's score: its recorded 0-1 score where it carries one, else 1 right, 0 wrong."""
    score = getattr(record, "score", None)
    return float(score) if score is not None else float(record.correct)


class Routing:
    """`knn` and `best-single` fitted on a bench's train items (see the module's text)."""

    def __init__(
        self,
        direct: Sequence[str],
        train: Mapping[str, list[BenchItemRecord]],
        heldout: Mapping[str, list[BenchItemRecord]],
        questions: Mapping[str, str],
        k: int = KNN_K,
    ) -> None:
        import numpy as np

        from ..core.textvec import CosineIndex, TextVectorizer

        self.direct = list(direct)
        self.k = k
        self.train_ids = sorted(train)  # sorted: the same neighbours whatever order the store gave
        self.heldout_ids = sorted(heldout)
        self._heldout = heldout
        scores = np.array([[_score(r) for r in train[item]] for item in self.train_ids], dtype=np.float64)
        money = any(r.cost_usd > 0 for runs in train.values() for r in runs)
        cost = np.array(
            [
                [r.cost_usd if money else r.prompt_tokens + r.completion_tokens for r in train[i]]
                for i in self.train_ids
            ],
            dtype=np.float64,
        ).mean(axis=0)
        latency = np.array([[r.latency_s for r in train[i]] for i in self.train_ids], dtype=np.float64).mean(axis=0)
        self.cost = cost / cost.max() if cost.max() > 0 else np.zeros_like(cost)
        self.latency = latency / latency.max() if latency.max() > 0 else np.zeros_like(latency)
        # ties go to the cheaper model, then to the one named first
        self._rank = np.argsort(np.lexsort((np.arange(len(self.direct)), cost)))
        self.overall = scores.mean(axis=0)
        vectors = TextVectorizer()
        base = vectors.fit_transform_sparse([questions[item] for item in self.train_ids])
        neighbours, _ = CosineIndex(base).top_k(vectors.transform_sparse(questions[i] for i in self.heldout_ids), k)
        self.local = scores[neighbours].mean(axis=1) if len(self.heldout_ids) else np.zeros((0, len(self.direct)))

    def picks(self, system: str) -> list[str]:
        """The direct system `system` (`knn@cheap`, ...) sends each held-out item to, in `heldout_ids` order."""
        named = router_level(system)
        if named is None:
            raise ValueError(f"{system} is not a derived router")
        return self._picks(*named)

    def _picks(self, base: str, preference: Preference) -> list[str]:
        import numpy as np

        table = (
            self.local if base == "knn" else np.broadcast_to(self.overall, (len(self.heldout_ids), len(self.direct)))
        )
        utility = table - preference.cost * self.cost - preference.latency * self.latency
        best = utility >= utility.max(axis=1, keepdims=True) - 1e-9
        chosen = np.where(best, self._rank, len(self.direct)).argmin(axis=1)
        return [self.direct[int(i)] for i in chosen]

    def records(self, system: str) -> list[BenchItemRecord]:
        """The records of `system` (`knn@cheap`, ...): each held-out item's record of the model it
        picked, under the router's name."""
        out = []
        for item, pick in zip(self.heldout_ids, self.picks(system)):
            record = next(r for r in self._heldout[item] if r.system == pick)
            out.append(
                record.model_copy(
                    update={
                        "system": system,
                        "judge_prompt_tokens": 0,
                        "judge_completion_tokens": 0,
                        "judge_cost_usd": 0.0,
                    }
                )
            )
        return out


def heldout_items(splits: Mapping[str, str | None], items: Iterable[str]) -> list[str]:
    """The items of `items` not in the train split."""
    return [item for item in items if splits.get(item) != TRAIN_SPLIT]


def fit_routing(
    records: Sequence[BenchItemRecord],
    direct: Sequence[str],
    questions: Mapping[str, str] | None,
    splits: Mapping[str, str | None] | None,
    *,
    k: int = KNN_K,
) -> Routing:
    """`knn` and `best-single` fitted on the train items of a bench whose `direct` systems ran
    (RoutingUnavailable, saying why in one line, when they cannot be)."""
    if questions is None or splits is None:
        raise RoutingUnavailable(
            "knn and best-single need the suite's questions and splits, which only `stiva bench` reads: "
            "see the report it wrote (report.json, report.md)"
        )
    if len(direct) < 2:
        raise RoutingUnavailable("knn and best-single choose between direct: systems: name two or more, or direct:*")
    if not any(splits.get(item) == TRAIN_SPLIT for item in splits):
        raise RoutingUnavailable(
            'knn and best-single learn from the train split: no item of this bench has meta.split "train" '
            "(bench the whole suite rather than --split, or give items a split: stiva bench import does)"
        )
    runs = {item: found for item, found in _direct_by_item(records, direct).items() if item in questions}
    train = {item: found for item, found in runs.items() if splits.get(item) == TRAIN_SPLIT}
    heldout = {item: found for item, found in runs.items() if splits.get(item) != TRAIN_SPLIT}
    if not train:
        raise RoutingUnavailable("knn and best-single: no train item has a graded answer from every direct: system yet")
    if not any(splits.get(item) != TRAIN_SPLIT for item in splits):
        raise RoutingUnavailable("knn and best-single: every item of this bench is in the train split, none held out")
    return Routing(direct, train, heldout, questions, k)
