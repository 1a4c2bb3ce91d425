"""The embedded model's tokenizer, built straight from its tokenizer.json (inference.checkpoints.
load_tokenizer), is the tokenizer AutoTokenizer builds, down to every token: only faster to load,
and without holding the GIL for most of a second while the app draws."""

from __future__ import annotations

import pytest

from tests.conftest_model import model_cache  # noqa: F401  (session fixture: the converted model)

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def both(model_cache):  # noqa: F811
    from transformers import AutoTokenizer

    from stiva_tui.inference.checkpoints import load_tokenizer
    from stiva_tui.inference.embedded import embedded_checkpoint_dir

    folder = embedded_checkpoint_dir()
    return AutoTokenizer.from_pretrained(str(folder)), load_tokenizer(str(folder))


def prompts() -> list[str]:
    """A text of every kind Stiva sends the embedded model: the conductor's few-shot prompt, the
    worker's, a plan as the grammar writes it, and text no prompt has."""
    from stiva_tui.conductor.base import PlanRequest, WorkerInfo
    from stiva_tui.conductor.fewshot import base_conductor_prompt

    workers = [WorkerInfo("local/gemma-3-270m", "the offline model"), WorkerInfo("openai/gpt-5", "strong")]
    texts = [
        base_conductor_prompt(PlanRequest("What is 17*23? Check it.", workers, max_steps=3)),
        'model_id = [1, 0]\nsubtasks = ["Multiply 17 by 23.", "Check the product."]\naccess_list = [[], [0]]',
        "  leading spaces,\ttabs\n\n\nand blank lines  ",
        "Ünïcödé ✓ 日本語 🙂 — «quotes» and ‘these’",
        "<bos>special<eos> <start_of_turn>user\nhi<end_of_turn>\n<pad><unk><mask>",
        "def add(a, b):\n    return a + b\n",
    ]
    from stiva_tui.core.workflow import workflow_from_lists
    from stiva_tui.pool.embedded import base_worker_prompt
    from stiva_tui.pool.types import StepInput

    plan = workflow_from_lists(
        {"model_id": [0, 0], "subtasks": ["Name the capital.", "Check it."], "access_list": [[], [0]]}, 2, 3
    )
    step = StepInput("What is the capital of Peru?", plan, 1, {0: "Lima is the capital of Peru."})
    texts += [str(m["content"]) for m in base_worker_prompt(step).messages]
    return texts


def test_the_fast_tokenizer_is_autotokenizers_to_the_last_token(both):
    auto, fast = both
    assert type(fast).__name__ != type(auto).__name__  # the fast path was taken (GemmaTokenizer is not)
    assert len(fast) == len(auto) == 262144
    assert fast.convert_ids_to_tokens(list(range(len(auto)))) == auto.convert_ids_to_tokens(list(range(len(auto))))
    assert sorted(fast.all_special_ids) == sorted(auto.all_special_ids)
    assert (fast.bos_token_id, fast.eos_token_id, fast.pad_token_id, fast.unk_token_id) == (
        auto.bos_token_id,
        auto.eos_token_id,
        auto.pad_token_id,
        auto.unk_token_id,
    )
    assert {i: (str(t), t.special) for i, t in fast.added_tokens_decoder.items()} == {
        i: (str(t), t.special) for i, t in auto.added_tokens_decoder.items()
    }
    assert fast.chat_template == auto.chat_template
    for text in prompts():
        for special in (True, False):
            ids = auto(text, add_special_tokens=special)["input_ids"]
            assert fast(text, add_special_tokens=special)["input_ids"] == ids, (text[:60], special)
        for skip in (True, False):
            assert fast.decode(ids, skip_special_tokens=skip) == auto.decode(ids, skip_special_tokens=skip)


def test_a_folder_stiva_did_not_convert_loads_through_autotokenizer(tmp_path, both):
    """Only the embedded model's converted folder takes the fast path: a copy without the marker
    (any other model) loads as transformers loads it."""
    import shutil

    from stiva_tui.inference.checkpoints import CONVERTED_MARKER, load_tokenizer
    from stiva_tui.inference.embedded import embedded_checkpoint_dir

    auto, fast = both
    folder = embedded_checkpoint_dir()
    copy = tmp_path / "other"
    copy.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folder / name, copy / name)
    assert type(load_tokenizer(str(copy))).__name__ == type(auto).__name__
    (copy / CONVERTED_MARKER).write_text("{}")
    assert type(load_tokenizer(str(copy))).__name__ == type(fast).__name__
