"""The `local` backend on a model shaped like the paper's base (Qwen2 architecture, byte-level BPE,
ChatML template) with random weights, in 4-bit nf4 on the CPU.

The embedded tests cover Gemma's SentencePiece-style vocabulary; this covers the other family of
tokenizers a conductor is likely to use, a vocabulary padded past the tokenizer (as Qwen2.5's is),
loading progress, the CUDA quantisation settings (double quantisation, bf16 compute), and what
happens when a local model will not load. The model is built here in a second: nothing comes from
a hub.
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from stiva_tui.conductor.base import ConductorError, PlanRequest, PreviousRound, WorkerInfo
from stiva_tui.core.workflow import parse_workflow
from tests.conftest_model import embedded_loaded, model_cache  # noqa: F401  (session fixtures)
from tests.support.model_builders import CHATML, build_random_model

POOL = [
    WorkerInfo(f"model-{i}", d)
    for i, d in enumerate(
        ["strong reasoner", "fast and cheap", "good at code", "long context", "careful writer", "math", "search"]
    )
]
QUESTIONS = [
    "What is 17*23?",
    "Write a haiku about rivers.",
    "Prove that the square root of 2 is irrational.",
    "Summarise the causes of the French Revolution.",
    "Fix this Python: def f(x) return x",
]


def build_qwen_like(folder, *, chat_template: str | None = CHATML, seed: int = 0):
    return build_random_model(folder, "tiny", chat_template=chat_template, seed=seed)


@pytest.fixture(scope="module")
def qwen_folder(tmp_path_factory):
    return build_qwen_like(tmp_path_factory.mktemp("qwen-like"))


@pytest.fixture(scope="module")
def qwen_conductor(qwen_folder):
    from stiva_tui.conductor.local import LocalConductor

    conductor = LocalConductor(
        str(qwen_folder), device="cpu", temperature=1.0, max_reasoning_tokens=24, max_subtask_chars=80
    )
    progress: list[tuple[float | None, str]] = []
    conductor.load_sync(lambda fraction, message: progress.append((fraction, message)))
    conductor.progress_seen = progress
    return conductor


def test_loading_shows_progress_and_reports_what_it_loaded(qwen_conductor, qwen_folder):
    import bitsandbytes as bnb

    seen = qwen_conductor.progress_seen
    fractions = [f for f, _ in seen if f is not None]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    # the weights' own progress comes through, between "loading ..." and "ready"
    weights = [(f, m) for f, m in seen if "loading weights" in m]
    assert weights, seen
    assert all(0.1 < f <= 0.94 for f, _ in weights)
    assert weights[-1][1].endswith(tuple(f"/{n}" for n in range(1, 1000)))
    info = qwen_conductor.describe()
    assert info["backend"] == "local" and info["device"] == "cpu" and info["quantization"] == "nf4"
    assert info["memory_mb"] > 0 and info["load_s"] > 0 and info["model"] == str(qwen_folder)
    from stiva_tui.conductor.choose import loaded_facts

    facts = loaded_facts(qwen_conductor)  # what `stiva ask` and the pool screen show
    assert facts.startswith("nf4 on cpu · ") and "\u00a0MB · loaded in " in facts and facts.endswith("\u00a0s")
    linear = [m for m in qwen_conductor._loaded.model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert linear and all(m.weight.quant_type == "nf4" for m in linear)


def test_progress_is_not_reported_outside_a_load(qwen_conductor):
    """The hook stays installed but reports only while (and where) a model loads."""
    from transformers.utils import logging as hf_logging

    from stiva_tui.inference import progress as loader

    assert loader._hook_installed
    before = len(qwen_conductor.progress_seen)
    bar = hf_logging.tqdm(range(3), desc="Loading weights")
    assert not isinstance(bar, loader._ForwardedBar)
    assert list(bar) == [0, 1, 2]
    assert len(qwen_conductor.progress_seen) == before


def test_prompt_uses_the_models_chat_template(qwen_conductor):
    from stiva_tui.conductor.prompt import GENERATION_PREFIX

    loaded = qwen_conductor._loaded
    ids = qwen_conductor.prompt_ids(PlanRequest("What is 17*23?", POOL[:3], max_steps=3), loaded)
    text = loaded.tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\n") or text.startswith("<|im_start|>user\n")
    assert text.endswith("<|im_start|>assistant\n" + GENERATION_PREFIX)
    assert "What is 17*23?" in text and all(w.id in text for w in POOL[:3])


def _gpt2_byte_chars() -> dict[int, str]:
    """The byte -> character table of byte-level BPE vocabularies (GPT-2's, which Qwen's uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), 256))
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def test_subtasks_hold_only_whole_characters(qwen_conductor):
    """Byte by byte through a byte-level vocabulary: valid UTF-8 passes; the 3-byte encodings of
    UTF-16 surrogates, which decode to three U+FFFD, do not."""
    import xgrammar as xgr

    from stiva_tui.conductor.grammar import compiled_lists_grammar

    tok = qwen_conductor._loaded.tokenizer
    vocab = tok.get_vocab()
    byte_token = {b: vocab[ch] for b, ch in _gpt2_byte_chars().items()}
    compiled = compiled_lists_grammar(tok, 1, 1, 10, False, vocab_size=len(tok), stop_token_ids=[tok.eos_token_id])

    def accepts(data: bytes) -> bool:
        matcher = xgr.GrammarMatcher(compiled)
        return all(matcher.accept_token(byte_token[b]) for b in b'\nmodel_id = [0]\nsubtasks = ["a' + data)

    for text in ("é", "漢字", "😀", "\ud7ff"):
        assert accepts(text.encode()), text
    for data in (b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\x80", b"\xc0\xaf", b"\xf5\x80\x80\x80"):
        assert not accepts(data), data
    # the same tokenizer at the model's (padded) width gets its own compiler, not the one above
    width = qwen_conductor._loaded.model.config.vocab_size
    assert width > len(tok)
    wide = compiled_lists_grammar(tok, 1, 1, 10, False, vocab_size=width, stop_token_ids=[tok.eos_token_id])
    assert compiled.tokenizer_info.vocab_size == len(tok) and wide.tokenizer_info.vocab_size == width


async def test_random_weights_plans_always_parse(qwen_conductor):
    """Sampling at temperature 1 from random weights: every plan parses, for every pool and limit."""
    rng = random.Random(7)
    count = 0
    for pool in (1, 3, 7):
        for max_steps in range(1, 6):
            question = rng.choice(QUESTIONS)
            request = PlanRequest(question, POOL[:pool], max_steps=max_steps)
            plan = await qwen_conductor.plan(request)
            assert parse_workflow(plan.raw_text, pool, max_steps) == plan.workflow
            assert 1 <= len(plan.workflow) <= max_steps
            for index, step in enumerate(plan.workflow.steps):
                assert 0 <= step.model < pool
                assert all(0 <= a < index for a in step.access)
                assert 0 < len(step.subtask) <= 80
            count += 1
    assert count == 15
    stats = qwen_conductor.last_stats
    assert stats["prompt_tokens"] > 0 and stats["completion_tokens"] > 0


async def test_later_rounds_may_keep_the_answer(qwen_conductor):
    first = parse_workflow('model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]', 3)
    previous = PreviousRound(first, "4", ("model-0",))
    for _ in range(3):
        request = PlanRequest("What is 2+2?", POOL[:3], max_steps=3, round=2, previous=previous)
        plan = await qwen_conductor.plan(request)
        assert parse_workflow(plan.raw_text, 3, 3, allow_empty=True) == plan.workflow


async def test_a_base_model_without_a_chat_template_plans_from_worked_examples(tmp_path):
    """`auto` prompts a model without a chat template with the few-shot completion prompt; the
    paper's prompt as plain text stays available as `plain`."""
    from stiva_tui.conductor.local import LocalConductor

    folder = build_qwen_like(tmp_path / "base", chat_template=None, seed=1)
    for style, marker in (("auto", "model_id = ["), ("plain", "Conductor:")):
        conductor = LocalConductor(
            str(folder), device="cpu", temperature=1.0, max_reasoning_tokens=8, max_subtask_chars=40, prompt_style=style
        )
        loaded = await conductor.load()
        request = PlanRequest("What is 17*23?", POOL[:2], max_steps=2)
        text = loaded.tokenizer.decode(conductor.prompt_ids(request, loaded))
        assert marker in text and text.rstrip().endswith("What is 17*23?" if style == "auto" else "answers.")
        plan = await conductor.plan(request)
        assert parse_workflow(plan.raw_text, 2, 2) == plan.workflow


async def test_the_cuda_quantisation_settings_work_too(qwen_folder):
    """Double quantisation with bf16 compute (what the backend uses on CUDA), run here on the CPU."""
    import torch

    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.inference.checkpoints import ModelSpec

    spec = ModelSpec(str(qwen_folder), device="cpu", double_quant=True, compute_dtype="bfloat16", label="qwen-like")
    conductor = HFConductor(spec, temperature=1.0, max_reasoning_tokens=8, max_subtask_chars=40)
    loaded = await conductor.load()
    qc = loaded.model.config.quantization_config
    qc = qc if isinstance(qc, dict) else qc.to_dict()
    assert qc["bnb_4bit_use_double_quant"] and qc["bnb_4bit_quant_type"] == "nf4"
    assert str(qc["bnb_4bit_compute_dtype"]).endswith("bfloat16")
    assert loaded.model.dtype == torch.bfloat16
    plan = await conductor.plan(PlanRequest("What is 17*23?", POOL[:3], max_steps=3))
    assert parse_workflow(plan.raw_text, 3, 3) == plan.workflow


def test_corrupt_weights_are_a_clear_error(qwen_folder, tmp_path):
    import shutil

    from stiva_tui.conductor.local import LocalConductor

    broken = tmp_path / "broken"
    shutil.copytree(qwen_folder, broken)
    (broken / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(ConductorError, match="cannot load") as info:
        LocalConductor(str(broken), device="cpu").load_sync()
    assert str(broken) in str(info.value)


def test_the_grammar_mask_falls_back_when_the_default_kernel_fails(monkeypatch):
    """On CUDA xgrammar masks with a Triton kernel; without Triton the plain-torch kernel is used."""
    import torch
    import xgrammar as xgr

    from stiva_tui.inference import grammar_mask

    real = xgr.apply_token_bitmask_inplace
    calls: list[str] = []

    def flaky(logits, bitmask, *args, backend="auto", **kwargs):
        calls.append(backend)
        if backend == "auto":
            raise ImportError("no module named triton")
        return real(logits, bitmask, *args, backend=backend, **kwargs)

    monkeypatch.setattr(xgr, "apply_token_bitmask_inplace", flaky)
    monkeypatch.setattr(grammar_mask, "_mask_backend", {})
    bitmask = xgr.allocate_token_bitmask(1, 100)
    bitmask.zero_()
    bitmask[0, 0] = 0b1010  # tokens 1 and 3
    for _ in range(2):
        scores = torch.randn(1, 100)
        grammar_mask.apply_bitmask(scores, bitmask)
        assert torch.isfinite(scores[0]).nonzero().flatten().tolist() == [1, 3]
    assert calls == ["auto", "torch_native", "torch_native"]  # the working kernel is remembered


async def test_a_grammar_no_kernel_can_apply_fails_the_plan_with_one_conductor_error(qwen_conductor, monkeypatch):
    """The mask kernel lives in `inference`, below the conductor; a plan it cannot mask is still the
    conductor's error, saying which device and why."""
    import xgrammar as xgr

    from stiva_tui.inference import grammar_mask

    def broken(logits, bitmask, *args, backend="auto", **kwargs):
        raise RuntimeError(f"no {backend} kernel here")

    monkeypatch.setattr(xgr, "apply_token_bitmask_inplace", broken)
    monkeypatch.setattr(grammar_mask, "_mask_backend", {})
    with pytest.raises(ConductorError) as info:
        await qwen_conductor.plan(PlanRequest("What is 2+2?", POOL[:2], max_steps=1))
    assert "generation failed: ConductorError: cannot apply the plan grammar on cpu: no auto kernel here" in str(
        info.value
    )


def test_auto_selection_refuses_a_model_that_is_not_a_causal_lm(monkeypatch, tmp_path):
    from stiva_tui.conductor import choose
    from stiva_tui.config import ConductorConfig

    monkeypatch.setattr(choose, "_cuda_free_gib", lambda: 60.0)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "vit", "hidden_size": 768}))
    conductor, reason = choose.select_conductor(ConductorConfig(model=str(tmp_path)))
    assert conductor.backend == "embedded" and "not a causal language model" in reason


@pytest.mark.model
async def test_auto_falls_back_to_embedded_when_the_local_model_will_not_load(
    monkeypatch, qwen_folder, embedded_loaded
):
    """The choice said `local` (a GPU reported room), the load failed (here: this machine has no
    CUDA): the run goes on with the embedded model and the reason says what happened."""
    from stiva_tui.conductor import choose
    from stiva_tui.config import parse_config
    from stiva_tui.runtime import ConductorVariant, Runtime

    monkeypatch.setattr(choose, "_cuda_free_gib", lambda: 60.0)
    config = parse_config(
        {"conductor": {"backend": "auto", "model": str(qwen_folder)}, "discovery": {"enabled": False}}
    )
    runtime = await Runtime.create(config, with_store=False, discover=False)
    try:
        messages: list[str] = []
        conductor = await runtime.ensure_conductor(lambda fraction, message: messages.append(message))
        assert conductor.backend == "embedded" and conductor.loaded
        reason = runtime.conductor_reason
        assert reason.startswith("embedded: the local model failed to load (") and reason.endswith("falling back")
        assert "CUDA GPU" in reason
        assert reason in messages  # the progress display shows it as it happens
        # an explicit `local` still fails loudly, as a variant or as the command line's override
        with pytest.raises(ConductorError, match="CUDA GPU"):
            await runtime.ensure_conductor(variant=ConductorVariant(backend="local"))
        runtime.conductor_override = f"local:{qwen_folder}"
        with pytest.raises(ConductorError, match="CUDA GPU"):
            await runtime.ensure_conductor()
    finally:
        await runtime.aclose()


async def test_loads_in_two_threads_keep_their_progress_apart(qwen_folder, tmp_path):
    """Two models asked for at once (the loads take turns: transformers' loading is not
    thread-safe): each load's progress goes only to its own callback."""
    import dataclasses

    from stiva_tui.conductor.local import LocalConductor

    other = build_qwen_like(tmp_path / "other", seed=2)
    a = LocalConductor(str(qwen_folder), device="cpu")
    b = LocalConductor(str(other), device="cpu")
    a.spec = dataclasses.replace(a.spec, label="model A")
    b.spec = dataclasses.replace(b.spec, label="model B")
    seen: dict[str, list[str]] = {"A": [], "B": []}
    await asyncio.gather(a.load(lambda f, m: seen["A"].append(m)), b.load(lambda f, m: seen["B"].append(m)))
    for mine, theirs in (("A", "B"), ("B", "A")):
        assert any("loading weights" in m for m in seen[mine]), seen[mine]
        assert all(f"model {theirs}" not in m for m in seen[mine]), seen[mine]


STOPPING_PLAN = 'model_id = [1, 0]\nsubtasks = ["Draft it.", "Check step 0."]\naccess_list = [[], [0]]'


class _Forced:
    """A logits processor that makes the model write `tokens`, whatever its weights say."""

    def __init__(self, tokens: list[int]):
        self.tokens = tokens
        self.start: int | None = None

    def __call__(self, input_ids, scores):
        self.start = input_ids.shape[1] if self.start is None else self.start
        target = self.tokens[min(input_ids.shape[1] - self.start, len(self.tokens) - 1)]
        forced = scores.new_full(scores.shape, float("-inf"))
        forced[:, target] = 0.0
        return forced


class _ForcedMask:
    """A grammar mask (`inference.grammar_mask.GrammarMask`'s interface) that allows `tokens` in turn."""

    def __init__(self, tokens: list[int]):
        self.tokens = tokens
        self.taken = 0

    def accept(self, token: int) -> None:
        self.taken += 1

    def forced(self) -> int:
        return self.tokens[min(self.taken, len(self.tokens) - 1)]

    def __call__(self, scores):
        forced = scores.new_full(scores.shape, float("-inf"))
        forced[:, self.forced()] = 0.0
        return forced


@pytest.mark.parametrize("decode", [None, "eager"])
def test_generation_stops_where_the_plan_is_complete(qwen_conductor, decode):
    """A model that writes its lists and goes on writing is stopped right after them (the local
    conductor without its grammar: `stop_at` with `plan_end`), counting only what it generated."""
    from stiva_tui.core.workflow import plan_end
    from stiva_tui.inference.decode import DecodeOptions
    from stiva_tui.inference.generation import generate_sync

    loaded = qwen_conductor.load_sync()
    tok = loaded.tokenizer
    plan_tokens = len(tok(STOPPING_PLAN, add_special_tokens=False)["input_ids"])
    target = tok(STOPPING_PLAN + " and then it goes on" * 60, add_special_tokens=False)["input_ids"]
    seen: list[str] = []
    result = generate_sync(
        loaded,
        tok("Plan:", add_special_tokens=False)["input_ids"],
        max_new_tokens=len(target),
        logits_processors=[_Forced(target)],
        on_text=seen.append,
        eos_ids=[tok.eos_token_id],
        decode=DecodeOptions.parse(decode) if decode else None,
        stop_at=lambda text, since: plan_end(text, 3, 5, since=since),
    )
    assert result.text == STOPPING_PLAN == "".join(seen)
    assert result.finish == "stop"
    assert plan_tokens <= result.completion_tokens <= plan_tokens + 2 < len(target)


async def test_under_the_grammar_a_plan_ends_with_its_lists(qwen_conductor):
    """The grammar's end allows only the end token: nothing is generated after the lists."""
    from stiva_tui.core.workflow import plan_end

    for pool, steps in ((1, 1), (3, 3), (7, 5)):
        plan = await qwen_conductor.plan(PlanRequest("What is 17*23?", POOL[:pool], max_steps=steps))
        end = plan_end(plan.raw_text, pool, steps)
        assert end is not None and not plan.raw_text[end:].strip()
        assert qwen_conductor.last_stats["finish"] == "stop"


async def test_without_the_grammar_the_local_conductor_stops_at_the_end_of_its_lists(qwen_folder, monkeypatch):
    from stiva_tui.conductor.local import HFConductor, LocalConductor

    conductor = LocalConductor(str(qwen_folder), device="cpu", grammar=False, max_reasoning_tokens=0)
    loaded = conductor.load_sync()
    written = loaded.tokenizer(" " + STOPPING_PLAN + " and then it goes on" * 60, add_special_tokens=False)
    plan_tokens = len(loaded.tokenizer(" " + STOPPING_PLAN, add_special_tokens=False)["input_ids"])
    prepare = HFConductor._prepare

    def writes_the_plan_and_goes_on(self, request, loaded):
        setup = prepare(self, request, loaded)
        setup.processor.mask = _ForcedMask(written["input_ids"])  # in place of the grammar's
        return setup

    monkeypatch.setattr(HFConductor, "_prepare", writes_the_plan_and_goes_on)
    plan = await conductor.plan(PlanRequest("What is 17*23?", POOL[:3], max_steps=5))
    assert plan.workflow == parse_workflow(STOPPING_PLAN, 3, 5)
    assert plan.raw_text.endswith(STOPPING_PLAN)
    assert conductor.last_stats["finish"] == "stop"
    assert plan.usage.completion_tokens <= plan_tokens + 2
