"""Order does not decide the result (issue 57, part 2): on ZeroEval's recorded answers, a cascade or
a vote of the same models listed in any order replays to the same accuracy, on the held-out half,
because a tie and an agreement return the best-ranked model's answer (its record on the train half,
then its cost), never the first-listed one's."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

from stiva_tui.core.answers import final_answer, infer_kind
from stiva_tui.core.replayed import Answer, rank_by_record, replay_workflow
from stiva_tui.evals.recorded.records import split_for
from stiva_tui.runtime.systems import parse_system

RECORDS = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "zeroeval.records.jsonl.gz"
MINI, FLASH, GPT4O, HAIKU = "gpt-4o-mini-2024-07-18", "gemini-1.5-flash", "gpt-4o-2024-05-13", "claude-3-haiku-20240307"


@pytest.fixture(scope="module")
def zeroeval():
    """(held-out answers by item, each model's rank from the train half)."""
    by_item: dict[str, dict[str, dict]] = {}
    with gzip.open(RECORDS, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row["model"] in (MINI, FLASH, GPT4O, HAIKU):
                by_item.setdefault(row["id"], {})[row["model"]] = row
    answers, train_right, train_cost = {}, {}, {}
    for item_id, rows in by_item.items():
        first = next(iter(rows.values()))
        kind = infer_kind(first["answer"], first["question"])
        cost = {m: (r["prompt_tokens"] * 1 + r["completion_tokens"] * 4) / 1e6 for m, r in rows.items()}
        if split_for(item_id, 0.5) == "train":
            for model, row in rows.items():
                train_right.setdefault(model, []).append(float(row["correct"]))
                train_cost.setdefault(model, []).append(cost[model])
            continue
        answers[item_id] = {
            m: Answer(final_answer(r["response"], kind), float(r["correct"]), cost[m]) for m, r in rows.items()
        }
    rank = rank_by_record(
        {m: sum(v) / len(v) for m, v in train_right.items()}, {m: sum(v) / len(v) for m, v in train_cost.items()}
    )
    return answers, rank


def _accuracy(zeroeval, system: str) -> float:
    answers, rank = zeroeval
    mode = parse_system(system).mode
    right = [replay_workflow(mode.workflow, mode.models, item, rank).correct for item in answers.values()]
    return 100 * sum(right) / len(right)


@pytest.mark.parametrize(
    "models",
    [(MINI, FLASH, GPT4O), (HAIKU, MINI, GPT4O)],
    ids=["mini-flash-4o", "haiku-mini-4o"],
)
def test_a_cascade_replays_to_the_same_accuracy_in_either_order_on_zeroeval(zeroeval, models):
    a, b, strong = models
    one, other = _accuracy(zeroeval, f"cascade:{a}+{b}>{strong}"), _accuracy(zeroeval, f"cascade:{b}+{a}>{strong}")
    assert abs(one - other) <= 0.1, (one, other)
    assert one > 50  # the replay read the answers at all


def test_a_vote_replays_to_the_same_accuracy_in_every_order_on_zeroeval(zeroeval):
    got = {
        order: _accuracy(zeroeval, "vote:" + "+".join(order)) for order in itertools.permutations((MINI, FLASH, GPT4O))
    }
    assert max(got.values()) - min(got.values()) <= 0.1, got
