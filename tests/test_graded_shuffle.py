"""Graded DPO trains with the pool's order shuffled (issue 42, part 6: "Shuffled pool order").

A plan names its models by their index in the prompt's list. Pairs always written under the
pool's own order could be learnt as "index 0 on arithmetic" instead of "the model named alpha":
such an adapter routes wrong as soon as the pool is listed in another order. So each pair is
written under its own order of the pool, with its plans' indices remapped to it.

The pool is the real simulated pool's HTTP server: `alpha` is right on arithmetic only, `beta` on
geography only (`gamma`, in the fast test, on neither). The benches are real ones, graded by
`train.graded.grade_pool` into a real history, and the pairs are read back from it as `stiva
train graded` reads them."""

from __future__ import annotations

import json
import random
import re

import pytest

from stiva_tui.evals.suite import parse_suite
from stiva_tui.sim.profiles import SimModel
from stiva_tui.sim.server import SimServer
from tests.support import cli
from tests.support.pool import sim_pool_config

COUNTRIES = ["France", "Japan", "Canada", "Peru", "Spain", "Italy", "Kenya", "Norway", "Chile", "Egypt"]
COUNTRIES += ["India", "Ghana", "Nepal", "Cuba", "Iran", "Laos", "Mali", "Oman", "Chad", "Fiji"]
RIGHT = {"math": "alpha", "geo": "beta"}  # the only model right on each domain


def routing_suite():
    """(train, held-out) suites: arithmetic (alpha is right there) and geography (beta), 12 train
    and 8 held-out items of each."""
    rng = random.Random(7)
    rows = []
    for i in range(20):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        split = "train" if i < 12 else "heldout"
        rows.append(
            {
                "id": f"math-{i}",
                "question": f"Compute {a} times {b}.",
                "answer": str(a * b),
                "grader": "numeric",
                "meta": {"domain": "math", "split": split},
            }
        )
        rows.append(
            {
                "id": f"geo-{i}",
                "question": f"Which city is the capital of {COUNTRIES[i]}?",
                "answer": "City",
                "grader": "contains",
                "meta": {"domain": "geo", "split": split},
            }
        )
    text = "\n".join(json.dumps(r) for r in rows if r["meta"]["split"] == "train")
    held = parse_suite("\n".join(json.dumps(r) for r in rows if r["meta"]["split"] == "heldout"), name="routing:held")
    return parse_suite(text, name="routing:train"), held


def sim_config(server: SimServer, models: list[SimModel]):
    return sim_pool_config(server.base_url, [m.name for m in models])


def specialists(*names: str) -> list[SimModel]:
    skills = {"alpha": {"math": 1.0}, "beta": {"geo": 1.0}}
    return [SimModel(name, skills.get(name, {}), latency_s=0.0, words=0, other=0.0) for name in names]


def graded_bench(config, suite) -> str:
    """A real bench of `direct:M` for every model of the pool, as `stiva train graded` grades it."""
    from stiva_tui.train.graded import grade_pool

    (bench,) = grade_pool(config, suite, answer_cache=False)
    return bench.bench_id


def plan_index(text: str) -> int:
    match = re.fullmatch(r"\nmodel_id = \[(\d+)\]\nsubtasks = .*\naccess_list = \[\[\]\]\n", text, re.S)
    assert match, text
    return int(match.group(1))


def test_graded_pairs_list_the_pool_in_many_orders_and_their_plans_still_name_the_right_model(tmp_path, stiva_home):
    from stiva_tui.conductor.base import WorkerInfo
    from stiva_tui.conductor.prompt import compact_conductor_prompt
    from stiva_tui.train import dpo

    train, _ = routing_suite()
    models = specialists("alpha", "beta", "gamma")
    with SimServer(models, train.items, latency_scale=0.0) as server:
        bench = graded_bench(sim_config(server, models), train)
    harvest = dpo._read_history(None, [bench], best_only=True)
    # each item: its own model right, the two others wrong: two pairs, its model over each
    assert len(harvest.pairs) == 2 * len(train.items), harvest.left_out
    domain = {item.question: item.meta["domain"] for item in train.items}
    pool = [m.name for m in models]
    workers = [WorkerInfo(name, "") for name in pool]

    built, skipped = dpo.training_pairs(harvest.pairs, pool, 1, 20, shuffle=True, seed=0)
    assert len(built) == len(harvest.pairs) and not skipped
    places: dict[str, list[int]] = {"alpha": [], "beta": []}
    for pair in built:
        right = RIGHT[domain[pair.pair.question]]
        assert pair.pair.chosen_system == f"direct:{right}"
        assert pool[plan_index(pair.pair.chosen)] == right  # as pairs.jsonl keeps it: the pool's own order
        assert len(pair.listings) == 2
        # the question's model at another place in each of its two listings
        assert len({plan_index(listing.text.chosen) for listing in pair.listings}) == 2
        for listing in pair.listings:
            listed = listing.workers(pool)
            assert sorted(listed) == sorted(pool) and listing.text.question == pair.pair.question
            chosen, rejected = plan_index(listing.text.chosen), plan_index(listing.text.rejected)
            # the chosen plan names the question's model in the list the prompt shows, the rejected the other one
            assert listed[chosen] == right, (listed, listing.text)
            assert listed[rejected] == pair.pair.rejected_system.removeprefix("direct:") != right
            prompt = compact_conductor_prompt(dpo.listing_request(listing, workers, 1))
            shown = re.search(r"^Models: (.*)$", prompt, re.M).group(1).split("; ")
            assert shown == [f"{i} {name}" for i, name in enumerate(listed)], prompt
            places[right].append(chosen)
    orders = [listing.order for pair in built for listing in pair.listings]
    assert len(set(orders)) == 6, orders  # every order of three models
    # each specialist chosen at every place of the list equally often: its place says nothing
    for name, at in places.items():
        counts = [at.count(i) for i in range(3)]
        assert max(counts) - min(counts) <= 1, (name, counts)
    # the same orders in every run (and whatever order the pairs come in); another seed, others
    again, _ = dpo.training_pairs(harvest.pairs[::-1], pool, 1, 20, shuffle=True, seed=0)
    assert sorted(map(repr, again)) == sorted(map(repr, built))
    other, _ = dpo.training_pairs(harvest.pairs, pool, 1, 20, shuffle=True, seed=1)
    assert [lst.order for pair in other for lst in pair.listings] != orders
    # without shuffling, the pool's own order only: its model's fixed index is the whole answer
    plain, _ = dpo.training_pairs(harvest.pairs, pool, 1, 20, shuffle=False, seed=0)
    assert [[lst.order for lst in pair.listings] for pair in plain] == [[(0, 1, 2)]] * len(built)
    assert all(pair.listings[0].text == pair.pair for pair in plain)


def test_graded_shuffles_by_default_dpo_when_asked_and_no_shuffle_pool_turns_it_off():
    from stiva_tui.cli.main import parse_args
    from stiva_tui.cli.train import OPTIONS

    base = ["--base", "embedded", "--out", "adapter"]

    def options(*argv: str):
        args = parse_args(["train", *argv, *base])
        return OPTIONS[args.train_method].from_args(args).options

    assert options("graded", "skills").shuffle_pool is True
    assert options("dpo").shuffle_pool is False  # the votes' DPO: off unless asked
    assert options("dpo", "--shuffle-pool").shuffle_pool is True
    assert options("graded", "skills", "--no-shuffle-pool").shuffle_pool is False
    assert options("dpo", "--no-shuffle-pool").shuffle_pool is False
    # GRPO's flag, as before: off unless asked
    assert options("grpo", "skills").shuffle_pool is False
    assert options("grpo", "skills", "--shuffle-pool").shuffle_pool is True
    # the spelling from before the methods maps it too
    assert options("skills", "--method", "graded-dpo", "--no-shuffle-pool").shuffle_pool is False


def test_no_shuffle_pool_reaches_the_command(stiva_home):
    """The real entry point takes the flag (here it stops at the missing suite, after parsing)."""
    result = cli.stiva(
        "train", "graded", str(stiva_home / "none.jsonl"), "--no-shuffle-pool", *("--base", "embedded"),
        *("--out", str(stiva_home / "a")), home=stiva_home,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "unrecognized arguments" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


# --- an adapter trained on shuffled pairs reads the list ---------------------------------------------


@pytest.fixture(scope="module")
def list_reader(tmp_path_factory):
    """A small random-weight Qwen2 model (tests/support/model_builders' "tiny" shape) whose weights
    are drawn at 0.15 rather than 0.02. At 0.02 its attention is near uniform, so it sees the
    prompt as a bag of tokens: "0 alpha; 1 beta" and "0 beta; 1 alpha" look the same to it and no
    training makes it read the list (DPO's loss stayed at 0.693 over 400 steps). At 0.15 its
    heads tell places apart, as a pretrained model's do. Its tokenizer has the names and the
    compact prompt's model line in its corpus, so each name is one token."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from tests.support.model_builders import SHAPES, build_tokenizer

    folder = tmp_path_factory.mktemp("shuffle") / "model"
    folder.mkdir()
    corpus = [f"Compute {a} times {b}." for a in range(2, 40) for b in (3, 7)]
    corpus += [f"Which city is the capital of {c}?" for c in COUNTRIES]
    corpus += [f"Models: 0 {a}; 1 {b}\nPlan, at most 1 step:" for a, b in (("alpha", "beta"), ("beta", "alpha"))] * 10
    fast = build_tokenizer(folder, 1500, corpus * 4)
    shape = {**SHAPES["tiny"], "vocab_size": (len(fast) + 63) // 64 * 64 + 64}
    config = Qwen2Config(**shape, initializer_range=0.15, eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"))
    torch.manual_seed(3)
    AutoModelForCausalLM.from_config(config).save_pretrained(str(folder))
    return folder


def routed_right(model_dir, adapter, held, workers) -> float:
    """How often plans sampled through the grammar-constrained plan path name the item's model,
    by its index in `workers`."""
    import torch

    from stiva_tui.conductor.base import PlanRequest
    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.inference.checkpoints import ModelSpec

    conductor = HFConductor(
        ModelSpec(str(model_dir), device="cpu", adapter=adapter, quantize=False, compute_dtype="float32", label="s"),
        max_reasoning_tokens=0,
        max_subtask_chars=4,
        temperature=1.0,
        prompt_style="auto" if adapter else "compact",
    )
    loaded = conductor.load_sync()
    torch.manual_seed(11)
    ids = [w.id for w in workers]
    right = total = 0
    for item in held:
        for plan in conductor.sample_many_sync(PlanRequest(item.question, workers, max_steps=1), loaded, 4, 1.0):
            assert plan.workflow is not None
            right += plan.workflow.steps[0].model == ids.index(RIGHT[item.meta["domain"]])
            total += 1
    return right / total


@pytest.mark.slow
def test_a_graded_adapter_routes_right_with_the_pool_listed_in_another_order(list_reader, tmp_path, stiva_home):
    """Graded DPO on the two specialists' benches, the pool listed alpha, beta. On held-out
    questions the adapter routes each domain to its model with the pool listed beta, alpha too.
    Trained on the pool's own order only (--no-shuffle-pool), it learns "index 0 on arithmetic"
    instead, and routes nearly every question wrong once the list is reversed."""
    from stiva_tui.conductor.base import WorkerInfo
    from stiva_tui.train.dpo import VoteTrainOptions, train_from_votes

    train, held = routing_suite()
    models = specialists("alpha", "beta")
    listed = [WorkerInfo("alpha", ""), WorkerInfo("beta", "")]
    routed: dict[bool, dict[str, float]] = {}
    with SimServer(models, train.items, latency_scale=0.0) as server:
        config = sim_config(server, models)
        bench = graded_bench(config, train)
        # shuffled, the list is learnt after ~50 steps of 8 rows; "index 0 on arithmetic" much sooner
        for shuffle, steps, batch in ((True, 96, 8), (False, 48, 4)):
            out = tmp_path / f"adapter-{shuffle}"
            summary = train_from_votes(
                config,
                VoteTrainOptions(
                    base=str(list_reader),
                    out=out,
                    steps=steps,
                    batch=batch,
                    lr=3e-3,
                    device="cpu",
                    lora_r=8,
                    lora_targets="all",
                    prompt_style="compact",
                    max_subtask_chars=4,
                    max_steps_per_plan=1,
                    save_every=1000,
                    benches=(bench,),
                    bench_pairs="best",
                    shuffle_pool=shuffle,
                ),
            )
            assert (summary.steps, summary.pairs, summary.graded) == (steps, 24, 24)
            pairs = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
            orders = {tuple(t["listed"]) for p in pairs for t in p["trained_as"]}
            assert orders == ({("alpha", "beta"), ("beta", "alpha")} if shuffle else {("alpha", "beta")})
            routed[shuffle] = {
                "alpha, beta": routed_right(list_reader, str(out), held.items, listed),
                "beta, alpha": routed_right(list_reader, str(out), held.items, listed[::-1]),
            }
    before = {
        "alpha, beta": routed_right(list_reader, None, held.items, listed),
        "beta, alpha": routed_right(list_reader, None, held.items, listed[::-1]),
    }
    assert min(before.values()) < 0.6, before  # untrained, it does not already route right in both orders
    # measured: 0.95 and 1.0 shuffled; 1.0 and 0.0 on the pool's own order
    assert min(routed[True].values()) >= 0.8, (before, routed)
    assert routed[False]["alpha, beta"] >= 0.8 and routed[False]["beta, alpha"] <= 0.2, (before, routed)
