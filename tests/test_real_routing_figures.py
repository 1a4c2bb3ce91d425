"""The routing figures' own checks (issue 51, the audit of real_routing.py): the learnt baselines
are scored item by item against the records of the very items they routed, so a baseline scored on a
permuted pool changes; and the in-process computation the script uses for its sweep gives exactly
what `stiva bench` prints."""

from __future__ import annotations

import json
import random

from test_router import recorded_pool

from benchmarks.experiments.real_routing import across_datasets, learnt_baselines, paired_interval
from stiva_tui.cli.main import main


def _import(path, capsys) -> dict:
    assert main(["bench", "import", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _heldout(suite: str) -> set[str]:
    from stiva_tui.evals.loaders import load_suite

    return {item.id for item in load_suite(suite).items if item.meta.get("split") != "train"}


def test_knn_is_scored_on_the_items_it_routed_and_a_permuted_pool_changes_it(tmp_path, capsys):
    # sums (`math` right) and capitals (`geo` right): the suite lists sum-0, cap-0, sum-1, ... while
    # the ids sort cap-*, then sum-*, so picks taken in one order and scored in the other go wrong
    rows = [json.loads(line) for line in recorded_pool(tmp_path).read_text().splitlines()]
    rows = [row for row in rows if row["model"] != "dear"]  # no model right on everything
    pool = tmp_path / "two.jsonl"
    pool.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    imported = _import(pool, capsys)
    heldout = _heldout(imported["suite"])
    knn = learnt_baselines(imported["bench"], imported["suite"], imported["models"], heldout)["knn"]
    assert knn["n"] == len(heldout) and knn["accuracy"] == 1.0

    # the same questions, each item's grades moved to another item of the other kind: a pool whose
    # answers no longer belong to their questions
    ids = sorted({row["id"] for row in rows})
    moved = dict(zip(ids, random.Random(3).sample(ids, len(ids))))
    grades = {(row["id"], row["model"]): row["correct"] for row in rows}
    for row in rows:
        row["correct"] = grades[(moved[row["id"]], row["model"])]
    permuted = tmp_path / "permuted" / "pool.jsonl"
    permuted.parent.mkdir()
    permuted.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    other = _import(permuted, capsys)
    scored = learnt_baselines(other["bench"], other["suite"], other["models"], _heldout(other["suite"]))["knn"]
    assert scored["accuracy"] < 0.9  # the routing no longer finds its right model


def test_the_paired_interval_is_the_difference_on_the_same_items():
    same = [1.0, 0.0] * 50
    assert paired_interval(same, same) == [0.0, 0.0]
    better = [1.0] * 100
    low, high = paired_interval(better, same)
    assert 35 <= low <= 50 <= high <= 65  # 50 points better, give or take the draw


def test_the_samples_are_drawn_across_the_data_sets():
    class Item:
        def __init__(self, domain):
            self.meta = {"domain": domain}

    items = [Item("gsm")] * 10 + [Item("math")] * 10 + [Item("crux")] * 10
    picked = across_datasets(items, 6)
    assert sorted(i.meta["domain"] for i in picked) == ["crux", "crux", "gsm", "gsm", "math", "math"]


def test_the_test_half_is_a_stable_seeded_hash_of_the_id_and_keeps_an_items_models_together(tmp_path):
    from benchmarks.experiments.real_routing import TEST_SHARE, split_of, write_split

    ids = [f"gsm/{n}" for n in range(2000)]
    test = [i for i in ids if split_of(i) == "test"]
    assert abs(len(test) / len(ids) - TEST_SHARE) < 0.04
    assert [split_of(i) for i in ids] == [split_of(i) for i in ids]  # stable
    # not the import's own holdout hash (which earlier figures reused after seeing it)
    from stiva_tui.evals.recorded.records import split_for

    assert sum((split_of(i) == "test") != (split_for(i, 0.5) == "heldout") for i in ids) > 500
    rows = [{"id": i, "model": m} for i in ids[:50] for m in ("a", "b")]
    written = [json.loads(line) for line in write_split(rows, tmp_path / "r.jsonl").read_text().splitlines()]
    by_item: dict[str, set] = {}
    for row in written:
        by_item.setdefault(row["id"], set()).add(row["split"])
    assert all(len(splits) == 1 for splits in by_item.values()) and {"test", "train"} == set.union(*by_item.values())


def test_a_candidate_is_named_on_the_replay_as_the_bench_names_it():
    from benchmarks.experiments.real_routing import on_replay

    assert on_replay("direct:gpt-4o") == "direct:replay:gpt-4o"
    assert on_replay("cascade:a+b>vote:c+d+e") == "cascade:replay:a+replay:b>vote:replay:c+replay:d+replay:e"
    assert on_replay("vote:x@host+y+z") == "vote:replay:x@host+replay:y+replay:z"


def test_a_data_sets_rows_are_the_bench_rows_of_its_items_alone():
    from benchmarks.experiments.real_routing import rows_of

    def item(item_id, system, correct, usd, status="graded"):
        return {"id": item_id, "system": system, "correct": correct, "cost_usd": usd, "status": status}

    report = {
        "items": [
            item("gsm/1", "a", True, 0.5),
            item("gsm/2", "a", False, 1.5),
            item("crux/1", "a", True, 9.0),
            item("gsm/1", "b", True, 0.25, status="error"),  # an error is never right
            item("gsm/2", "b", True, 0.25),
        ]
    }
    rows = rows_of(report, {"gsm/1", "gsm/2"})
    assert rows["a"]["n"] == 2 and rows["a"]["accuracy"] == 0.5 and rows["a"]["cost_per_question"] == 1.0
    assert rows["b"]["accuracy"] == 0.5 and rows["b"]["cost_per_question"] == 0.25
