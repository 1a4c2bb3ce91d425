"""The routing field's baselines, computed from a bench's own `direct:` records: `knn` (the k nearest
train questions' best model, minus a cost weight) and `best-single` (the one model that did best on
the train items), each at a preference level, and their AIQ against the single models' hull on the
held-out items. End to end through the real `stiva bench` on the scripted HTTP provider, and on
records built in memory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_systems import stiva

from stiva_tui.bench.derived import RoutingUnavailable, fit_routing
from stiva_tui.bench.report import build_report, report_markdown
from stiva_tui.runtime.systems import SystemNameError, parse_systems
from stiva_tui.store.records import BenchItemRecord
from tests.support.fakeprovider import Reply

SUM = re.compile(r"What is (\d+) \+ (\d+)\?")
WORD = re.compile(r"letters are in the word '([a-z]+)'")
WORDS = ["banana", "kiwi", "cherry", "apple", "melon", "grape", "lemon", "mango", "peach", "plum", "fig", "lime"]


def two_kinds_suite(path: Path, *, splits: bool = True) -> Path:
    """Sums and letter counts, 12 of each in the train split and 6 of each held out."""
    lines = []
    for i in range(18):
        split = ("train" if i < 12 else "heldout") if splits else None
        meta = {"split": split} if split else {}
        a, b = 3 + i, 11 + 2 * i
        lines.append({"id": f"sum-{i}", "question": f"What is {a} + {b}?", "answer": str(a + b), "grader": "numeric"})
        lines[-1]["meta"] = meta
        word = WORDS[i % len(WORDS)] + "s" * (i // len(WORDS))
        lines.append(
            {
                "id": f"word-{i}",
                "question": f"How many letters are in the word '{word}'?",
                "answer": str(len(word)),
                "grader": "numeric",
                "meta": meta,
            }
        )
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def script_two_kinds(fake) -> None:
    """`calc` (cheap) adds right and miscounts letters; `atlas` (dear) counts letters right and adds wrong."""

    def calc(request):
        found = SUM.search(request.user_text)
        if found:
            return Reply(f"The answer is {int(found[1]) + int(found[2])}.", usage=(10, 2))
        return Reply(f"The answer is {len(WORD.search(request.user_text)[1]) + 1}.", usage=(10, 2))

    def atlas(request):
        found = WORD.search(request.user_text)
        if found:
            return Reply(f"The answer is {len(found[1])}.", usage=(10, 2))
        found = SUM.search(request.user_text)
        return Reply(f"The answer is {int(found[1]) + int(found[2]) + 1}.", usage=(10, 2))

    fake.default("calc", calc)
    fake.default("atlas", atlas)


def two_kinds_config(path: Path, base_url: str) -> Path:
    models = "".join(
        f'[[models]]\nid = "{name}"\nprovider = "lab"\nmodel = "{name}"\nprice_in = {price}\nprice_out = {price}\n'
        for name, price in (("calc", 1.0), ("atlas", 20.0))
    )
    path.write_text(
        'catalog = false\nembedded_worker = false\n[conductor]\nbackend = "remote"\nmodel = "calc"\n'
        f'[discovery]\nenabled = false\n[workers]\nretries = 0\n[[providers]]\nname = "lab"\nbase_url = "{base_url}"\n'
        + models
    )
    return path


def bench(capsys, suite: Path, config: Path, systems: str, *extra: str) -> dict:
    code, out, err = stiva(capsys, "bench", str(suite), "--systems", systems, "--config", str(config), "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_knn_routes_each_kind_of_held_out_question_to_its_model_and_beats_the_best_single(
    fake, tmp_path, stiva_home, capsys
):
    script_two_kinds(fake)
    config = two_kinds_config(tmp_path / "c.toml", fake.base_url)
    suite = two_kinds_suite(tmp_path / "s.jsonl")
    out = tmp_path / "out"
    report = bench(
        capsys, suite, config, "direct:*,oracle,knn,knn@cheap,best-single,best-single@cheap", "--out", str(out)
    )
    rows = {row["system"]: row for row in report["systems"]}
    # the singles ran on every item; each is right on its own kind only
    assert rows["direct:calc"]["n"] == rows["direct:atlas"]["n"] == 36
    assert rows["direct:calc"]["accuracy"] == rows["direct:atlas"]["accuracy"] == 0.5
    # the routers answer the 12 held-out items, by the 24 train items' records
    assert rows["knn"]["n"] == rows["best-single"]["n"] == 12
    assert rows["knn"]["accuracy"] == 1.0 and rows["knn@cheap"]["accuracy"] == 1.0
    assert rows["best-single"]["accuracy"] == 0.5  # one model, right on half
    by_item = {(i["system"], i["id"]): i for i in report["items"]}
    assert by_item[("knn", "sum-14")]["correct"] and by_item[("knn", "word-14")]["correct"]
    assert ("knn", "sum-3") not in by_item  # a train item is not routed
    # the cost per question of a pick is its model's: calc's on sums, atlas's on words
    assert by_item[("knn", "sum-14")]["cost_usd"] == by_item[("direct:calc", "sum-14")]["cost_usd"]
    assert by_item[("knn", "word-14")]["cost_usd"] == by_item[("direct:atlas", "word-14")]["cost_usd"]
    routing = report["routing"]
    assert routing["unavailable"] is None
    assert (routing["train_items"], routing["heldout_items"]) == (24, 12)
    held = {row["system"]: row for row in routing["systems"]}
    assert held["direct:calc"]["n"] == 12 and held["direct:calc"]["accuracy"] == 0.5
    assert held["oracle"]["accuracy"] == 1.0
    aiq = {r["router"]: r for r in routing["routers"]}
    assert set(aiq) == {"knn", "best-single"}
    # knn's hull runs from the cheapest single model (any router's at an infinite cost weight) to
    # 100% at half the dearest one's cost: well above the singles' flat 50%; best-single is on it
    assert aiq["knn"]["aiq"] > routing["aiq_single_models"] + 0.2
    assert aiq["best-single"]["aiq"] == pytest.approx(routing["aiq_single_models"])
    assert {"knn", "knn@cheap", "knn@0.5"} <= set(aiq["knn"]["levels"])
    assert aiq["knn"]["levels"][-1] == "direct:calc" and len(aiq["knn"]["points"]) == len(aiq["knn"]["levels"])
    # the main frontier is over every item: routers answered only the held-out ones, so are not on it
    assert not any(s.startswith(("knn", "best-single")) for s in report["frontier"]["on_hull"])
    markdown = (out / "report.md").read_text()
    assert "12 held-out items" in markdown and "| knn |" in markdown
    assert (out / "frontier.png").stat().st_size > 0
    # the table says the same in the terminal
    code, text, err = stiva(capsys, "bench", str(suite), "--systems", "direct:*,knn", "--config", str(config))
    assert code == 0, err
    said = " ".join(text.split())
    assert "AIQ on the 12 held-out items (of the 36 above): single models" in said and "knn" in said
    assert "knn from this bench's 24 train items" in said, text


def test_without_a_train_split_the_routers_say_why_in_one_line(fake, tmp_path, stiva_home, capsys):
    script_two_kinds(fake)
    config = two_kinds_config(tmp_path / "c.toml", fake.base_url)
    suite = two_kinds_suite(tmp_path / "s.jsonl", splits=False)
    report = bench(capsys, suite, config, "direct:*,knn,best-single@cheap")
    rows = {row["system"]: row for row in report["systems"]}
    assert rows["knn"]["n"] == rows["best-single@cheap"]["n"] == 0
    why = report["routing"]["unavailable"]
    assert "train" in why and "\n" not in why
    code, text, err = stiva(capsys, "bench", str(suite), "--systems", "direct:*,knn", "--config", str(config))
    assert code == 0
    assert why.split(":")[0] in (text + err).replace("\n", " ")
    # a bench of the held-out split alone has no train items either
    held = bench(capsys, two_kinds_suite(tmp_path / "t.jsonl"), config, "direct:*,knn", "--split", "heldout")
    assert "train" in held["routing"]["unavailable"]


def test_router_names_parse_and_bad_levels_are_one_line_errors():
    names = [s.name for s in parse_systems(["knn,knn@cheap,knn@0.3,best-single,best-single@balanced"])]
    assert names == ["knn", "knn@cheap", "knn@0.3", "best-single", "best-single@balanced"]
    assert all(s.derived for s in parse_systems(["knn@best,best-single@fast"]))
    with pytest.raises(SystemNameError, match="knn@2"):
        parse_systems(["knn@2"])
    with pytest.raises(SystemNameError, match="oracle@cheap"):
        parse_systems(["oracle@cheap"])


# --- records built in memory ---------------------------------------------------------------------------


def record(system: str, item: str, correct: bool, cost: float) -> BenchItemRecord:
    return BenchItemRecord(
        system=system, item_id=item, status="graded", correct=correct, cost_usd=cost, prompt_tokens=10, latency_s=0.1
    )


def near_tie(n_train: int = 10, n_held: int = 6):
    """`dear` is right on every item, `cheap` on all but one of the ten train items (each item's k = 10
    neighbours), at a tenth of the price."""
    records, questions, splits = [], {}, {}
    for i in range(n_train + n_held):
        item = f"q{i}"
        questions[item] = f"What is the product of {i} and {i + 3}?"
        splits[item] = "train" if i < n_train else "test"
        records.append(record("direct:dear", item, True, 0.01))
        records.append(record("direct:cheap", item, i % 10 != 0 or i >= n_train, 0.001))
    return records, questions, splits


def test_the_cost_weight_moves_knn_at_cheap_to_the_cheaper_model_when_scores_nearly_tie():
    records, questions, splits = near_tie()
    routing = fit_routing(records, ["direct:dear", "direct:cheap"], questions, splits)
    assert set(routing.picks("knn")) == {"direct:dear"}  # at best, the 0.1 better score wins
    assert set(routing.picks("knn@cheap")) == {"direct:cheap"}  # at cheap, a tenth of the price wins
    assert set(routing.picks("knn@balanced")) == {"direct:cheap"}
    assert set(routing.picks("best-single")) == {"direct:dear"}
    assert set(routing.picks("best-single@cheap")) == {"direct:cheap"}
    # a pick is the record of the model picked, renamed: its cost is that model's
    assert {r.cost_usd for r in routing.records("knn@cheap")} == {0.001}
    # an exact tie goes to the cheaper model at every level
    tied = [r.model_copy(update={"correct": True}) for r in records]
    routing = fit_routing(tied, ["direct:dear", "direct:cheap"], questions, splits)
    assert set(routing.picks("knn")) == {"direct:cheap"}
    # the picks are the records of the model picked, renamed, and the same every time
    again = fit_routing(records, ["direct:dear", "direct:cheap"], questions, splits)
    assert [r.model_dump() for r in again.records("knn@0.2")] == [
        r.model_dump()
        for r in fit_routing(records, ["direct:dear", "direct:cheap"], questions, splits).records("knn@0.2")
    ]
    assert all(r.system == "knn@0.2" for r in again.records("knn@0.2"))


def test_the_report_builds_the_routing_section_from_records_and_says_why_when_it_cannot():
    records, questions, splits = near_tie()
    systems = ["direct:dear", "direct:cheap", "knn", "knn@cheap", "best-single"]
    report = build_report("s", "b", systems, list(questions), records, questions=questions, splits=splits)
    data = json.loads(report.to_json())
    rows = {row["system"]: row for row in data["systems"]}
    assert rows["knn"]["n"] == 6 and rows["knn@cheap"]["cost_per_question"] == pytest.approx(0.001)
    assert data["routing"]["heldout_items"] == 6
    # no texts (the app's history view): the rows are empty and the section says why
    bare = build_report("s", "b", systems, list(questions), records)
    assert bare.routing.unavailable and "question" in bare.routing.unavailable
    assert {r.system: r.n for r in bare.systems}["knn"] == 0
    assert bare.routing.unavailable in report_markdown(bare)
    # nothing in the train split
    with pytest.raises(RoutingUnavailable, match="train"):
        fit_routing(records, ["direct:dear", "direct:cheap"], questions, {k: "test" for k in splits})
    # a bench without routers has no routing key at all (the JSON it always printed)
    plain = json.loads(build_report("s", "b", systems[:2], list(questions), records).to_json())
    assert "routing" not in plain
