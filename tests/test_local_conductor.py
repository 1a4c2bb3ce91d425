"""The local conductor backends: grammar, embedded Gemma-3 270M plans, LoRA, errors, cancellation."""

from __future__ import annotations

import asyncio
import json
import random
import re

import pytest

from stiva_tui.conductor.base import ConductorError, PlanRequest, PreviousRound, WorkerInfo
from stiva_tui.conductor.grammar import lists_grammar, max_lists_bytes
from stiva_tui.conductor.prompt import GENERATION_PREFIX
from stiva_tui.core.workflow import parse_workflow
from tests.conftest_model import cancel_and_expect_idle, embedded_loaded, embedded_tokenizer, model_cache  # noqa: F401 - fixtures

WORKERS = [
    WorkerInfo("gpt-5", "strongest reasoning, expensive"),
    WorkerInfo("claude-sonnet-4", "careful writer and coder"),
    WorkerInfo("gemini-2.5-pro", "long context, good at math"),
    WorkerInfo("qwen3-32b", "cheap open model, decent at code"),
    WorkerInfo("deepseek-r1", "slow but thorough reasoning"),
    WorkerInfo("llama-3.3-70b", "fast, general knowledge"),
    WorkerInfo("local/gemma-3-270m", "tiny, offline", "embedded"),
]

QUESTIONS = [
    "What is the capital of Australia?",
    "Prove that the square root of 2 is irrational.",
    "Write a Python function that merges two sorted lists.",
    "How many positive divisors does 360 have?",
    "Summarise the causes of the First World War in three sentences.",
    "Translate 'good morning, how are you?' into German and Japanese.",
    "Find all real x with x^3 - 6x^2 + 11x - 6 = 0.",
    "Explain the difference between TCP and UDP to a child.",
    "Write a haiku about autumn rain, then critique it.",
    "What is 17 * 23 + 4?",
    "Design a database schema for a library that lends books and DVDs.",
    "Is it ethical to use AI to grade student essays? Give both sides.",
    "Debug: my Rust program says 'borrowed value does not live long enough'. What does it mean?",
    "Which is larger, 2^100 or 10^30?",
    "Plan a three-day trip to Kyoto on a budget.",
    "What is the derivative of x * sin(x)?",
    "Write a SQL query for the top 5 customers by total order value.",
    "Explain how vaccines train the immune system.",
    "A train leaves at 3 pm at 80 km/h; another at 4 pm at 100 km/h. When does the second catch up?",
    "Compose a short limerick about a cat who codes.",
    "Give me a regex that matches ISO 8601 dates.",
]


# --- the grammar alone (no model) ----------------------------------------------------------------


def _char_tokenizer_info():
    import xgrammar as xgr

    vocab = [chr(c) for c in range(32, 127)] + ["\n", "é", "model_id", ", ", "]", "[]", '"all"', "</s>"]
    return xgr.TokenizerInfo(vocab, stop_token_ids=[len(vocab) - 1]), vocab


def _random_walk(matcher, info, vocab_decode, rng, max_tokens):
    import torch
    import xgrammar as xgr

    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    out = []
    for _ in range(max_tokens):
        if matcher.is_terminated():
            break
        matcher.fill_next_token_bitmask(bitmask)
        logits = torch.rand(1, info.vocab_size, generator=rng)
        xgr.apply_token_bitmask_inplace(logits, bitmask)
        token = int(torch.argmax(logits[0]))
        assert matcher.accept_token(token), token
        out.append(token)
    assert matcher.is_terminated(), "the grammar did not finish within its byte bound"
    return vocab_decode(out[:-1])  # the last token is the stop token


@pytest.mark.parametrize("allow_empty", [False, True])
def test_grammar_random_walks_always_parse(allow_empty):
    import torch
    import xgrammar as xgr

    info, vocab = _char_tokenizer_info()
    compiler = xgr.GrammarCompiler(info, max_threads=1)
    rng = torch.Generator().manual_seed(1234)
    seen_lengths = set()
    seen_all = False
    for pool in (1, 2, 3, 7, 12):
        for max_steps in (1, 2, 3, 5):
            compiled = compiler.compile_grammar(lists_grammar(pool, max_steps, 24, allow_empty))
            bound = max_lists_bytes(pool, max_steps, 24) + 1
            for _ in range(6):
                matcher = xgr.GrammarMatcher(compiled)
                text = _random_walk(matcher, info, lambda ids: "".join(vocab[i] for i in ids), rng, bound)
                workflow = parse_workflow("Some reasoning.\n" + text, pool, max_steps, allow_empty=allow_empty)
                seen_lengths.add(len(workflow))
                for step in workflow.steps:
                    assert 0 <= step.model < pool
                    assert 1 <= len(step.subtask) <= 24
                seen_all |= any(s.access_all for s in workflow.steps)
                for i, step in enumerate(workflow.steps):
                    assert all(j < i for j in step.access)
    assert seen_lengths >= {1, 2, 3}
    assert seen_all


def test_grammar_rejects_invalid_workflows():
    import xgrammar as xgr

    info, _ = _char_tokenizer_info()
    compiler = xgr.GrammarCompiler(info, max_threads=1)
    compiled = compiler.compile_grammar(lists_grammar(3, 3, 40, False))

    def accepts(text: str) -> bool:
        matcher = xgr.GrammarMatcher(compiled)
        return matcher.accept_string(text) and matcher.is_completed()

    good = '\nmodel_id = [2, 0]\nsubtasks = ["Draft it", "Check it"]\naccess_list = [[], [0]]\n'
    assert accepts(good)
    assert accepts('\nmodel_id = [0, 1, 2]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], "all", [0, 1]]\n')
    assert not accepts(good.replace("[2, 0]", "[3, 0]"))  # model 3 is not in a pool of 3
    assert not accepts(good.replace("[[], [0]]", "[[0], [0]]"))  # step 0 reads itself
    assert not accepts(good.replace("[[], [0]]", "[[], [1]]"))  # step 1 reads itself
    assert not accepts(good.replace('"Draft it", ', ""))  # lengths differ
    assert not accepts('\nmodel_id = [0, 1, 2]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], [], [1, 0]]\n')
    assert not accepts('\nmodel_id = [0]\nsubtasks = ["a: b"]\naccess_list = [[]]\n')  # label-like text
    assert not accepts('\nmodel_id = [0]\nsubtasks = ["' + "x" * 41 + '"]\naccess_list = [[]]\n')
    assert not accepts('\nmodel_id = [0]\nsubtasks = [" a"]\naccess_list = [[]]\n')  # blank start
    four = '\nmodel_id = [0, 0, 0, 0]\nsubtasks = ["a", "b", "c", "d"]\naccess_list = [[], [], [], []]\n'
    assert not accepts(four)  # more than max_steps
    assert not accepts("\nmodel_id = []\nsubtasks = []\naccess_list = []\n")
    later = compiler.compile_grammar(lists_grammar(3, 3, 40, True))
    matcher = xgr.GrammarMatcher(later)
    assert matcher.accept_string("\nmodel_id = []\nsubtasks = []\naccess_list = []\n") and matcher.is_completed()


# --- errors that need no model --------------------------------------------------------------------


def test_missing_model_folder(tmp_path):
    from stiva_tui.conductor.local import LocalConductor

    conductor = LocalConductor(str(tmp_path / "no-such-model"), device="cpu")
    with pytest.raises(ConductorError, match="does not exist"):
        conductor.load_sync()


def test_folder_that_is_not_a_model(tmp_path):
    from stiva_tui.conductor.local import LocalConductor

    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConductorError, match="not a model folder"):
        LocalConductor(str(tmp_path), device="cpu").load_sync()


def test_folder_with_a_model_that_is_not_a_causal_lm(tmp_path):
    from stiva_tui.conductor.local import LocalConductor

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "vit"}))
    with pytest.raises(ConductorError, match="not a causal language model"):
        LocalConductor(str(tmp_path), device="cpu").load_sync()


def test_hf_id_not_in_the_offline_cache(monkeypatch):
    from stiva_tui.conductor.local import LocalConductor

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConductorError, match="hf download"):
        LocalConductor("nobody-here/no-such-conductor-model", device="cpu").load_sync()


# --- the real embedded model ---------------------------------------------------------------------


def _request(i: int) -> tuple[PlanRequest, int]:
    pool = (1, 3, 7)[i % 3]
    max_steps = 1 + i % 5
    return PlanRequest(QUESTIONS[i], WORKERS[:pool], max_steps=max_steps), pool


@pytest.mark.model
async def test_embedded_plans_always_parse(embedded_loaded):
    """Both prompt styles of the embedded conductor (few-shot "base", its default, and the paper's
    prompt as "plain" text with free reasoning), greedy and sampled, up to 5 steps: every plan parses."""
    from stiva_tui.conductor.embedded import EmbeddedConductor

    class Uncapped(EmbeddedConductor):
        def step_limit(self, request):  # exercise the grammar up to 5 steps
            return request.max_steps

    conductors = {
        (style, temperature): Uncapped(
            max_reasoning_tokens=12, max_subtask_chars=32, temperature=temperature, prompt_style=style
        )
        for style in ("base", "plain")
        for temperature in (0.0, 0.8)
    }
    greedy = conductors["base", 0.0]
    assert (await greedy.load()) is embedded_loaded  # shared, one load per process
    info = greedy.describe()
    assert info["backend"] == "embedded" and info["quantization"] == "bf16" and info["device"] == "cpu"
    assert info["memory_mb"] > 100 and info["load_s"] >= 0
    shapes = set()
    for i in range(len(QUESTIONS)):
        request, pool = _request(i)
        style = "base" if i % 2 == 0 else "plain"
        conductor = conductors[style, 0.8 if i % 3 == 1 else 0.0]
        deltas: list[str] = []
        plan = await conductor.plan(request, on_delta=deltas.append)
        # the whole text parses, not only the constrained part
        workflow = parse_workflow(plan.raw_text, pool, request.max_steps)
        assert workflow == plan.workflow
        assert 1 <= len(workflow) <= request.max_steps
        for j, step in enumerate(workflow.steps):
            assert 0 <= step.model < pool
            assert all(k < j for k in step.access)
            assert len(step.subtask) <= 32
        if style == "plain":
            assert plan.raw_text.startswith(GENERATION_PREFIX)
            assert conductor.last_stats["reasoning_tokens"] <= 12
        else:  # worked examples, no reasoning: the lists at once
            assert plan.raw_text.startswith("\nmodel_id = [") and plan.reasoning == ""
            assert conductor.last_stats["reasoning_tokens"] == 0
        assert "".join(deltas).strip() in plan.raw_text and "model_id = [" in "".join(deltas)
        prompt = conductor.prompt_ids(request, embedded_loaded)
        assert plan.usage.prompt_tokens == len(prompt)
        assert plan.usage.completion_tokens == conductor.last_stats["completion_tokens"] > 0
        assert plan.latency_s > 0 and not plan.usage.estimated
        shapes.add(workflow.shape())
    assert shapes


@pytest.mark.model
async def test_embedded_conductor_plans_one_step_for_a_trivial_pool_or_a_simple_question(embedded_loaded):
    from stiva_tui.conductor.embedded import EmbeddedConductor

    conductor = EmbeddedConductor()
    embedded_only = [WORKERS[-1]]
    hard = "Write a Python function that merges two sorted lists, then review it for bugs and edge cases."
    for question, workers in [("What is the capital of Spain?", WORKERS[:3]), (hard, embedded_only)]:
        plan = await conductor.plan(PlanRequest(question, workers, max_steps=5))
        (step,) = plan.workflow.steps  # the conductor still writes the one step
        assert step.access == () and 0 <= step.model < len(workers)
        # an instruction about the question, not text copied from rules or examples
        assert not re.search(r"(?i)model number|step 0|access_list|Italy|spider", step.subtask), step.subtask
    # a longer question on a real pool may have two steps, never more
    plan = await conductor.plan(PlanRequest(hard, WORKERS[:3], max_steps=5))
    assert 1 <= len(plan.workflow) <= 2


@pytest.mark.model
async def test_embedded_conductor_caps_its_plans_at_two_steps(embedded_loaded):
    from stiva_tui.conductor.embedded import EmbeddedConductor

    conductor = EmbeddedConductor(max_reasoning_tokens=4, max_subtask_chars=24)
    assert conductor.max_steps_cap == 2
    plan = await conductor.plan(PlanRequest(QUESTIONS[0], WORKERS[:3], max_steps=5))
    assert 1 <= len(plan.workflow) <= 2
    assert parse_workflow(plan.raw_text, 3, 2) == plan.workflow


@pytest.mark.model
async def test_embedded_later_round_may_keep_the_answer(embedded_loaded):
    from stiva_tui.conductor.embedded import EmbeddedConductor

    conductor = EmbeddedConductor(max_reasoning_tokens=16, max_subtask_chars=40)
    first = parse_workflow('model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]', 3)
    previous = PreviousRound(first, "Canberra.", ("gpt-5",))
    for temperature in (0.0, 1.0):
        conductor.temperature = temperature
        request = PlanRequest("Capital of Australia?", WORKERS[:3], max_steps=3, round=2, previous=previous)
        plan = await conductor.plan(request)
        assert parse_workflow(plan.raw_text, 3, 3, allow_empty=True) == plan.workflow
    # the compiled round-2 grammar accepts the three empty lists (checked with the real tokenizer)
    import xgrammar as xgr

    from stiva_tui.conductor.grammar import compiled_lists_grammar

    compiled = compiled_lists_grammar(
        embedded_loaded.tokenizer,
        3,
        3,
        40,
        True,
        vocab_size=embedded_loaded.model.config.vocab_size,
        stop_token_ids=[1],
    )
    matcher = xgr.GrammarMatcher(compiled)
    assert matcher.accept_string("\nmodel_id = []\nsubtasks = []\naccess_list = []\n") and matcher.is_completed()


@pytest.mark.model
def test_grammar_random_logits_with_the_real_tokenizer(embedded_loaded):
    """Random tokens of the real 262k vocabulary, only those the grammar allows: always parses."""
    import torch
    import xgrammar as xgr

    from stiva_tui.conductor.grammar import compiled_lists_grammar

    tok = embedded_loaded.tokenizer
    vocab = embedded_loaded.model.config.vocab_size
    rng = torch.Generator().manual_seed(7)
    for pool, max_steps, allow_empty in [(1, 1, False), (2, 3, True), (3, 5, False), (7, 4, True), (20, 2, False)]:
        compiled = compiled_lists_grammar(tok, pool, max_steps, 30, allow_empty, vocab_size=vocab, stop_token_ids=[1])
        info = compiled.tokenizer_info
        for _ in range(3):
            matcher = xgr.GrammarMatcher(compiled, override_stop_tokens=[1])
            text = _random_walk(
                matcher, info, lambda ids: tok.decode(ids), rng, max_lists_bytes(pool, max_steps, 30) + 1
            )
            workflow = parse_workflow("Reasoning here.\n" + text, pool, max_steps, allow_empty=allow_empty)
            assert len(workflow) <= max_steps


@pytest.mark.model
async def test_lora_adapter_loads_and_changes_the_output(embedded_loaded, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from stiva_tui.conductor.local import LocalConductor

    folder = embedded_loaded.spec.source
    base = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    adapter = tmp_path / "adapter"
    peft_model.save_pretrained(str(adapter))
    del peft_model, base

    conductor = LocalConductor(folder, adapter=str(adapter), device="cpu", max_reasoning_tokens=8, max_subtask_chars=40)
    loaded = await conductor.load()
    assert loaded is not embedded_loaded
    assert conductor.describe()["adapter"] == str(adapter)
    ids = torch.tensor([embedded_loaded.tokenizer("The plan is to ask", add_special_tokens=True)["input_ids"]])
    with torch.inference_mode():
        plain = embedded_loaded.model(input_ids=ids).logits[0, -1]
        tuned = loaded.model(input_ids=ids).logits[0, -1]
    assert (plain - tuned).abs().max() > 1e-2
    plan = await conductor.plan(PlanRequest("What is 2 + 2?", WORKERS[:2], max_steps=2))
    assert parse_workflow(plan.raw_text, 2, 2) == plan.workflow
    # a missing adapter folder is a clear error
    bad = LocalConductor(folder, adapter=str(tmp_path / "nope"), device="cpu")
    with pytest.raises(ConductorError, match="adapter"):
        bad.load_sync()


@pytest.mark.model
async def test_cancelling_a_plan_stops_generation(embedded_loaded):
    from stiva_tui.conductor.embedded import EmbeddedConductor

    conductor = EmbeddedConductor(max_reasoning_tokens=2000, max_subtask_chars=400)
    first = asyncio.Event()

    def on_delta(text: str) -> None:
        first.set()

    task = asyncio.create_task(conductor.plan(PlanRequest("Write a long essay about rivers.", WORKERS[:3]), on_delta))
    await asyncio.wait_for(first.wait(), 60)
    await cancel_and_expect_idle(task, embedded_loaded, "generation went on after the plan was cancelled")


@pytest.mark.model
def test_incremental_decoder_matches_full_decode(embedded_tokenizer):
    from stiva_tui.inference.generation import IncrementalDecoder

    tok = embedded_tokenizer
    text = "Héllo wörld — 日本語 ✓ model_id = [1, 2]\n  spaces  and\ttabs 🚀!"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    anchor = tok("Start:", add_special_tokens=False)["input_ids"]
    decoder = IncrementalDecoder(tok, anchor)
    out = "".join(decoder.push(t) for t in ids) + decoder.flush()
    assert out == tok.decode(anchor[-1:] + ids)[len(tok.decode(anchor[-1:])) :]
    assert "\ufffd" not in out


def test_random_seed_independence_of_grammar_bound():
    rng = random.Random(3)
    for _ in range(50):
        pool, steps, chars = rng.randint(1, 30), rng.randint(1, 8), rng.randint(1, 500)
        text = lists_grammar(pool, steps, chars, bool(rng.getrandbits(1)))
        assert text.count("steps") >= steps
        # a maximal workflow fits in the byte bound
        longest = (
            "\nmodel_id = ["
            + ", ".join([str(pool - 1)] * steps)
            + "]\nsubtasks = ["
            + ", ".join(['"' + "é" * chars + '"'] * steps)
            + "]\naccess_list = ["
            + ", ".join(["[" + ", ".join(str(j) for j in range(i)) + "]" if i else '"all"' for i in range(steps)])
            + "]\n"
        )
        assert len(longest.encode()) <= max_lists_bytes(pool, steps, chars)


@pytest.mark.model
def test_batched_plans_of_different_prompts_match_one_by_one(embedded_loaded):
    """`sample_each_sync` (the plans of a training step, each under its own order of the pool, in
    one left-padded batch) writes, greedily, the plans that one generation per prompt writes, with
    the same log-probabilities: the padding changes nothing a row sees."""
    import torch

    from stiva_tui.conductor.embedded import EmbeddedConductor
    from stiva_tui.inference.checkpoints import LoadedModel

    # in fp32, as `stiva train` holds it (in bf16 a batch's other shapes round differently)
    model = type(embedded_loaded.model)(embedded_loaded.model.config)
    model.load_state_dict({k: v.float() for k, v in embedded_loaded.model.state_dict().items()})
    model = model.float().eval()
    model.generation_config = embedded_loaded.model.generation_config
    loaded = LoadedModel(
        model=model,
        tokenizer=embedded_loaded.tokenizer,
        spec=embedded_loaded.spec,
        device="cpu",
        quantization=None,
        load_s=0.0,
        memory_bytes=0,
    )
    assert next(model.parameters()).dtype == torch.float32
    conductor = EmbeddedConductor(max_subtask_chars=40, prompt_style="compact")
    rng = random.Random(3)
    requests = []
    for i in range(5):  # prompts of different lengths: the pools differ in size and order
        workers = rng.sample(WORKERS, 2 + i % 4)
        requests.append(PlanRequest(QUESTIONS[(5 * i) % len(QUESTIONS)], workers, max_steps=2))
    assert len({len(conductor.prompt_ids(r, loaded)) for r in requests}) > 1
    batched = conductor.sample_each_sync(requests, loaded, temperature=0.0)
    alone = [conductor.sample_many_sync(r, loaded, 1, 0.0)[0] for r in requests]
    for b, a in zip(batched, alone):
        assert b.prompt_ids == a.prompt_ids
        assert b.completion_ids == a.completion_ids and b.text == a.text
        assert b.workflow == a.workflow and b.workflow is not None
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-3)
    # sampled: every row still parses under its own pool's grammar
    for request, plan in zip(requests, conductor.sample_each_sync(requests, loaded, temperature=1.0)):
        assert plan.workflow is not None and all(s.model < len(request.workers) for s in plan.workflow.steps)


def test_an_adapter_plans_under_the_step_limit_it_was_trained_under(tmp_path):
    """`stiva train --plan-steps 1` writes the limit beside the adapter; the conductor that loads
    the adapter plans under it (the same prompt and grammar as in training), not under the
    config's larger max_steps, and keeps its own smaller cap where that is smaller."""
    from stiva_tui.conductor.embedded import EmbeddedConductor
    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.inference.checkpoints import ModelSpec

    hard = (
        "Write a Python function that merges two sorted lists, then explain its running time in detail\n"
        "and review it for bugs and edge cases."
    )  # not a simple question: the embedded cap of two applies
    request = PlanRequest(hard, WORKERS[:3], max_steps=5)
    trained = tmp_path / "one-step"
    trained.mkdir()
    (trained / "stiva_adapter.json").write_text(
        json.dumps({"base": "embedded", "prompt_style": "compact", "max_steps_per_plan": 1})
    )
    wide = tmp_path / "three-steps"
    wide.mkdir()
    (wide / "stiva_adapter.json").write_text(json.dumps({"base": "embedded", "max_steps_per_plan": 3}))
    unmarked = tmp_path / "no-limit"
    unmarked.mkdir()
    (unmarked / "stiva_adapter.json").write_text(json.dumps({"base": "embedded", "max_steps_per_plan": True}))

    local = HFConductor(ModelSpec(source="some/model", adapter=str(trained)))
    assert local.step_limit(request) == 1 and local.limited(request).max_steps == 1
    assert local.prompt_style == "compact"
    assert HFConductor(ModelSpec(source="some/model", adapter=str(wide))).step_limit(request) == 3
    assert HFConductor(ModelSpec(source="some/model", adapter=str(unmarked))).step_limit(request) == 5
    assert HFConductor(ModelSpec(source="some/model")).step_limit(request) == 5
    # the embedded conductor's own cap of two stays the smaller one
    assert EmbeddedConductor(adapter=str(trained)).step_limit(request) == 1
    assert EmbeddedConductor(adapter=str(wide)).step_limit(request) == 2
    assert EmbeddedConductor.max_steps_cap == 2  # an instance's trained limit never changes the class's


def test_a_short_question_gets_a_second_step_only_from_a_model_trained_for_it(tmp_path):
    """The prompted embedded model plans one step for a short question (its second steps there
    were noise). An adapter trained with `--plan-steps 2`, and the conductor that trains it, plan
    under two: capped at one, the two-step plan it learnt for such questions could never be
    written (the prompt said "at most 1 step" in training, and the grammar allowed one)."""
    from stiva_tui.conductor.embedded import EmbeddedConductor
    from stiva_tui.conductor.prompt import compact_conductor_prompt
    from stiva_tui.config import parse_config
    from stiva_tui.train.trainer import TrainOptions, _conductor_for

    short = PlanRequest("How many meters are in 3 kilometers?", WORKERS[:3], max_steps=5)
    two = tmp_path / "two-steps"
    two.mkdir()
    (two / "stiva_adapter.json").write_text(json.dumps({"base": "embedded", "max_steps_per_plan": 2}))
    unmarked = tmp_path / "unmarked"
    unmarked.mkdir()
    (unmarked / "stiva_adapter.json").write_text(json.dumps({"base": "embedded"}))

    assert EmbeddedConductor().step_limit(short) == 1
    assert EmbeddedConductor(adapter=str(unmarked)).step_limit(short) == 1
    assert EmbeddedConductor(adapter=str(two)).step_limit(short) == 2
    # only the embedded worker in the pool: one step, trained or not
    assert EmbeddedConductor(adapter=str(two)).step_limit(PlanRequest(short.question, WORKERS[-1:], max_steps=5)) == 1

    config = parse_config({})
    trainee = _conductor_for(
        "embedded", config, TrainOptions(base="embedded", out=tmp_path / "out", max_steps_per_plan=2), "cpu"
    )
    assert trainee.step_limit(short) == 2
    assert compact_conductor_prompt(trainee.limited(short)).endswith("Plan, at most 2 steps:")
    untrained = _conductor_for("embedded", config, TrainOptions(base="embedded", out=tmp_path / "out"), "cpu")
    assert untrained.step_limit(short) == 1
