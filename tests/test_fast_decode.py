"""Stiva's own decode loop (`inference.decode`) against transformers' generate(): the same plans.

The fast paths of the local conductor (jump-forward over the tokens the grammar forces, a static
KV cache, torch.compile of the decode step) must change the speed, never the plan. Each is run on
the tiny random Qwen2-shaped model in nf4 on the CPU, grammar on, greedy, and compared token for
token with the eager `generate()` path of today.
"""

from __future__ import annotations

import threading

import pytest

from stiva_tui.conductor.base import PlanRequest, WorkerInfo
from tests.conftest_model import model_cache  # noqa: F401  (session fixture)
from tests.support.model_builders import build_random_model

POOL = [WorkerInfo(f"model-{i}", d) for i, d in enumerate(["strong reasoner", "fast and cheap", "good at code"])]
QUESTIONS = ["What is 17*23?", "Write a haiku about rivers.", "Prove that the square root of 2 is irrational."]


@pytest.fixture(scope="module")
def chat_conductor(tmp_path_factory):
    from stiva_tui.conductor.local import LocalConductor

    folder = build_random_model(tmp_path_factory.mktemp("qwen-like"), "tiny")
    conductor = LocalConductor(str(folder), device="cpu", max_reasoning_tokens=24, max_subtask_chars=80)
    conductor.load_sync()
    return conductor


@pytest.fixture(scope="module")
def base_conductor(tmp_path_factory):
    """A base model (no chat template): few-shot prompts with a static prefix, whose KV is cached."""
    from stiva_tui.conductor.local import LocalConductor

    folder = build_random_model(tmp_path_factory.mktemp("qwen-base"), "tiny", chat_template=None, seed=3)
    conductor = LocalConductor(str(folder), device="cpu", max_subtask_chars=80)
    conductor.load_sync()
    return conductor


def _run(conductor, question: str, decode, **kwargs):
    from stiva_tui.inference.generation import generate_sync

    loaded = conductor._loaded
    setup = conductor._prepare(PlanRequest(question, POOL, max_steps=3), loaded)
    return generate_sync(
        loaded,
        setup.prompt,
        max_new_tokens=setup.budget,
        logits_processors=[setup.processor],
        eos_ids=[setup.eos_id],
        prefix_tokens=setup.prefix_tokens,
        decode=decode,
        **kwargs,
    )


MODES = ["eager", "eager+jump", "static", "static+jump"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("question", QUESTIONS)
def test_the_own_loop_makes_the_plan_generate_makes(chat_conductor, mode, question):
    from stiva_tui.inference.decode import DecodeOptions

    reference = _run(chat_conductor, question, None)
    fast = _run(chat_conductor, question, DecodeOptions.parse(mode))
    assert fast.token_ids == reference.token_ids
    assert fast.text == reference.text and fast.finish == reference.finish
    assert fast.completion_tokens > 10
    # each token the model picks costs one forward pass (the first one is the prefill's)
    assert fast.forward_passes == fast.completion_tokens - fast.forced_tokens
    if mode.endswith("+jump"):
        # the list syntax and the keys are forced: passes saved
        assert fast.forced_tokens >= 3, fast.text
    else:
        assert fast.forced_tokens == 0


def test_forced_tokens_are_the_only_tokens_the_mask_allows(chat_conductor):
    """single_token reads xgrammar's bitmask the way the mask applies it."""
    import torch
    import xgrammar as xgr

    from stiva_tui.inference.grammar_mask import single_token

    for allowed in ([0], [31], [32], [5000], [1, 2], []):
        bitmask = xgr.allocate_token_bitmask(1, 6000)
        bitmask.fill_(0)
        scores = torch.zeros(1, 6000)
        for token in allowed:
            bitmask[0, token // 32] |= torch.tensor(1 << (token % 32), dtype=torch.int64).to(torch.int32)
        xgr.apply_token_bitmask_inplace(scores, bitmask)
        finite = torch.isfinite(scores[0]).nonzero().flatten().tolist()
        assert finite == allowed
        assert single_token(bitmask) == (allowed[0] if len(allowed) == 1 else None)


@pytest.mark.parametrize("mode", ["eager+jump", "static+jump"])
def test_the_prefix_cache_serves_the_own_loop_and_stays_on_the_models_device(base_conductor, mode):
    from stiva_tui.inference.decode import DecodeOptions

    loaded = base_conductor._loaded
    for question in QUESTIONS[:2]:
        reference = _run(base_conductor, question, None)
        fast = _run(base_conductor, question, DecodeOptions.parse(mode))
        assert fast.token_ids == reference.token_ids and fast.text == reference.text
    slots = loaded.extras["prefix_kv"]
    assert slots, "the base prompt's static prefix was cached"
    device = next(loaded.model.parameters()).device
    for key, cache in slots.items():
        assert cache.get_seq_length() == len(key)  # the prefix was computed into it
        assert all(layer.keys.device == device for layer in cache.layers)
    if mode.startswith("static"):
        caches = loaded.extras["static_caches"]
        assert caches and all(layer.keys.device == device for c in caches.values() for layer in c.layers)


def test_streaming_and_stop_strings_through_the_own_loop(chat_conductor):
    from stiva_tui.inference.decode import DecodeOptions

    reference = _run(chat_conductor, QUESTIONS[0], None)
    stop = reference.text[len(reference.text) // 2 :][:3]
    assert stop.strip()
    expected = _run(chat_conductor, QUESTIONS[0], None, stop_strings=[stop])
    chunks: list[str] = []
    fast = _run(
        chat_conductor, QUESTIONS[0], DecodeOptions.parse("eager+jump"), stop_strings=[stop], on_text=chunks.append
    )
    assert fast.text == expected.text and fast.finish == expected.finish == "stop"
    # generate() asks its stopping criteria before the streamer sees the token, so it makes one
    # token past the stop string; the own loop stops at it
    assert fast.token_ids == expected.token_ids[: len(fast.token_ids)]
    assert len(expected.token_ids) - len(fast.token_ids) <= 1
    assert "".join(chunks) == fast.text and len(chunks) > 1
    assert stop not in fast.text


def test_cancelling_stops_the_own_loop_at_the_next_token(chat_conductor):
    from stiva_tui.inference.decode import DecodeOptions

    event = threading.Event()
    chunks: list[str] = []

    def on_text(text: str) -> None:
        chunks.append(text)
        event.set()

    result = _run(chat_conductor, QUESTIONS[1], DecodeOptions.parse("eager+jump"), stop_event=event, on_text=on_text)
    assert result.finish == "cancelled"
    assert chunks and result.completion_tokens <= 2 + result.forced_tokens


def test_decode_options_are_checked():
    from stiva_tui.inference.decode import DecodeOptions

    assert DecodeOptions.parse("compiled+jump") == DecodeOptions("compiled", jump_forward=True)
    with pytest.raises(ValueError, match="unknown decode mode"):
        DecodeOptions.parse("fast")
    with pytest.raises(ValueError, match="jump_forward needs"):
        DecodeOptions.parse("hf+jump")
    with pytest.raises(ValueError, match="unknown decode option"):
        DecodeOptions.parse("eager+cuda")


@pytest.mark.slow
def test_the_compiled_static_cache_path_makes_the_same_plan(chat_conductor):
    """torch.compile of the one-token step (inductor on the CPU: tens of seconds to compile)."""
    from stiva_tui.inference.decode import DecodeOptions

    for mode in ("compiled", "compiled+jump"):
        reference = _run(chat_conductor, QUESTIONS[2], None)
        fast = _run(chat_conductor, QUESTIONS[2], DecodeOptions.parse(mode))
        assert fast.token_ids == reference.token_ids and fast.text == reference.text
    assert any(key[0] == "compiled_step" for key in chat_conductor._loaded.extras if isinstance(key, tuple))


async def test_the_conductor_plans_through_the_option_and_counts_forced_tokens(chat_conductor):
    from stiva_tui.conductor.local import LocalConductor

    jumping = LocalConductor(
        chat_conductor.spec.source, device="cpu", max_reasoning_tokens=24, max_subtask_chars=80, decode="static+jump"
    )
    assert jumping._load(None) is chat_conductor._loaded  # one model per spec: the option is the conductor's
    request = PlanRequest(QUESTIONS[0], POOL, max_steps=3)
    plain = await chat_conductor.plan(request)
    fast = await jumping.plan(request)
    assert fast.raw_text == plain.raw_text and fast.workflow == plain.workflow
    assert jumping.describe()["decode"] == "static+jump" and chat_conductor.describe()["decode"] == "hf"
    stats = jumping.last_stats
    assert stats["forced_tokens"] > 0
    assert stats["forward_passes"] == stats["completion_tokens"] - stats["forced_tokens"]
    assert chat_conductor.last_stats["forward_passes"] is None  # generate() does not count them


def test_the_config_takes_the_decode_and_format_options_strictly():
    from pydantic import ValidationError

    from stiva_tui.conductor.local import LocalConductor
    from stiva_tui.config import ConductorConfig

    config = ConductorConfig(decode="compiled+jump", quant="int4", model="/nowhere/model")
    conductor = LocalConductor.from_config(config, device="cpu")
    assert conductor.decode.label() == "compiled+jump" and conductor.spec.quant == "int4"
    assert conductor.describe()["quantization"] == "int4 (torchao)"
    assert ConductorConfig().decode == "hf" and ConductorConfig().quant == "nf4"
    for bad in ({"decode": "fast"}, {"quant": "gptq"}):
        with pytest.raises(ValidationError):
            ConductorConfig(**bad)


@pytest.fixture(scope="module")
def int4_conductor(chat_conductor):
    pytest.importorskip("torchao")
    from stiva_tui.conductor.local import LocalConductor

    conductor = LocalConductor(
        chat_conductor.spec.source, device="cpu", max_reasoning_tokens=24, max_subtask_chars=80, quant="int4"
    )
    conductor.load_sync()
    return conductor


async def test_int4_torchao_loads_says_so_and_its_plans_parse(int4_conductor):
    from stiva_tui.conductor.choose import loaded_facts
    from stiva_tui.core.workflow import parse_workflow
    from stiva_tui.inference.checkpoints import cpu_int4_config

    # torchao 0.15 has a CPU int4 layout; from 0.16 int8 weight-only stands in on the CPU
    label = "int4 (torchao)" if cpu_int4_config() is not None else "int8 (torchao)"
    info = int4_conductor.describe()
    assert info["quantization"] == label and int4_conductor.spec.quant == "int4"
    assert loaded_facts(int4_conductor).startswith(f"{label} on cpu")
    model = int4_conductor._loaded.model
    # torchao's quantized weights are tensor subclasses of its own (AffineQuantizedTensor up to
    # 0.16, Int8Tensor and its kin since): any weight of a torchao type counts
    quantized = [m for m in model.modules() if type(getattr(m, "weight", None)).__module__.startswith("torchao")]
    assert len(quantized) >= 2 * 7  # every projection of both layers (the head too where its width allows)
    from stiva_tui.inference.decode import DecodeOptions

    for mode in ("hf", "eager+jump"):
        int4_conductor.decode = DecodeOptions.parse(mode)
        for question in QUESTIONS:
            plan = await int4_conductor.plan(PlanRequest(question, POOL, max_steps=3))
            parse_workflow(plan.raw_text, len(POOL), 3)
            assert 1 <= len(plan.workflow) <= 3


def test_int4_without_torchao_is_one_clear_error(chat_conductor, monkeypatch):
    import sys

    from stiva_tui.conductor.base import ConductorError
    from stiva_tui.conductor.local import LocalConductor
    from stiva_tui.inference import checkpoints

    monkeypatch.setitem(sys.modules, "torchao", None)  # `import torchao` fails
    monkeypatch.setattr(checkpoints, "_cache", {})  # not the int4 model another test loaded
    conductor = LocalConductor(chat_conductor.spec.source, device="cpu", quant="int4")
    with pytest.raises(ConductorError) as caught:
        conductor.load_sync()
    message = str(caught.value)
    assert "pip install 'stiva-tui[fast]'" in message and "\n" not in message


def test_the_cache_goes_under_the_name_the_installed_transformers_takes():
    """transformers 5.2x takes `cache=`; 5.17 (the GPU image) takes `past_key_values=` and silently
    ignored `cache=`, so the prefix cache was never filled there."""
    from stiva_tui.inference.decode import cache_kwarg

    class Old:
        def forward(self, input_ids=None, past_key_values=None, use_cache=None, **kwargs): ...

    class New:
        def forward(self, input_ids=None, cache=None, use_cache=None, **kwargs): ...

    class Wrapper:  # peft's PeftModel: **kwargs, the model it wraps says
        def __init__(self, inner):
            self.inner = inner

        def forward(self, *args, **kwargs): ...

        def get_base_model(self):
            return self.inner

    assert cache_kwarg(Old()) == "past_key_values" and cache_kwarg(New()) == "cache"
    assert cache_kwarg(Wrapper(Old())) == "past_key_values"


def test_a_model_load_says_nothing_of_torchao_where_it_is_installed():
    """transformers imports torchao with every model load where it is installed; its import chatter
    (skipped C++ extensions, torch's deprecation of its enum registrations) must not reach a user's
    terminal: quiet_libraries() silences it, as it does bitsandbytes'."""
    import subprocess
    import sys

    pytest.importorskip("torchao")
    code = (
        "from stiva_tui.inference.checkpoints import quiet_libraries; quiet_libraries(); "
        "import transformers.quantizers.auto; import sys; print('torchao' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"  # it was imported, and said nothing
    assert done.stderr.strip() == "", done.stderr
