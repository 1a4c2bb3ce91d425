"""Test and benchmark fixtures: random-weight stand-ins for real conductor models, built here.

Nothing comes from a hub. The tokenizer is a byte-level BPE — the kind Qwen2.5 uses — trained
here on a small corpus, with Qwen's ChatML chat template and special tokens; the model has a real
architecture's shape and random weights. Such a model is as fast and as large as the real one;
its text is noise, which the plan grammar still turns into valid workflows.

    folder = build_random_model(path, "qwen2.5-7b", device="cuda")   # ~15 GB of bf16 safetensors
    folder = build_random_model(path, "tiny")                         # a second on the CPU

torch, transformers and tokenizers are imported inside the functions only.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Qwen2's architecture at two sizes. "qwen2.5-7b" is Qwen/Qwen2.5-7B-Instruct's config.json.
SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-7b": dict(
        hidden_size=3584,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        intermediate_size=18944,
        vocab_size=152064,
        max_position_embeddings=32768,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        hidden_act="silu",
    ),
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=None,
        tie_word_embeddings=False,
    ),
}

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def default_corpus() -> list[str]:
    """Text to train the tokenizer on: the conductor's own prompt and workflow format."""
    from stiva_tui.conductor.base import PlanRequest, WorkerInfo
    from stiva_tui.conductor.prompt import conductor_messages

    workers = [
        WorkerInfo(f"model-{i}", d)
        for i, d in enumerate(["strong reasoner, expensive", "fast and cheap", "good at code", "long context"])
    ]
    # the prompt of a plan of at most two steps: the one the tiny models' tests plan with, and the
    # same text as before votes and gates were told of (their rules come from three steps up), so
    # the tiny models' tokenizers, and what they learn, stay as they were
    request = PlanRequest("What is 17*23?", workers, max_steps=2)
    prompt = "\n".join(m["content"] for m in conductor_messages(request))
    return [
        prompt,
        'model_id = [0, 1, 2]\nsubtasks = ["Solve the problem step by step", "Check the answer"]\n'
        'access_list = [[], [0], "all"]',
        "Prove that the square root of 2 is irrational. Write a haiku about rivers. Summarise the causes "
        "of the French Revolution. Fix this Python function and explain the bug.",
    ]


def build_tokenizer(
    folder: Path, vocab_size: int = 1500, corpus: Iterable[str] | None = None, chat_template: str | None = CHATML
) -> Any:
    """Train a byte-level BPE tokenizer on `corpus` and save it (a PreTrainedTokenizerFast) in `folder`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = list(corpus if corpus is not None else default_corpus())
    tok.train_from_iterator(texts * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    if chat_template:
        fast.chat_template = chat_template
    fast.save_pretrained(str(folder))
    return fast


def build_random_model(
    folder: Path | str,
    shape: str = "tiny",
    *,
    device: str = "cpu",
    dtype: str = "float32",
    seed: int = 0,
    chat_template: str | None = CHATML,
    tokenizer_vocab: int = 1500,
    corpus: Iterable[str] | None = None,
) -> Path:
    """Save a random-weight model of `shape` and its tokenizer in `folder`; returns the folder.

    The model's vocabulary is padded past the tokenizer's (as Qwen2.5's is: 152064 rows, 151665
    tokens), so the logits have columns no token stands for."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fast = build_tokenizer(folder, tokenizer_vocab, corpus, chat_template)
    values = dict(SHAPES[shape])
    if values.get("vocab_size") is None:
        values["vocab_size"] = (len(fast) + 63) // 64 * 64 + 64
    if values["vocab_size"] < len(fast):
        raise ValueError(f"shape {shape!r} has {values['vocab_size']} rows for a {len(fast)}-token tokenizer")
    config = Qwen2Config(**values, eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"))
    torch.manual_seed(seed)
    with torch.device(device):  # a 7B model initialises in seconds on a GPU, minutes on a CPU
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.save_pretrained(str(folder))
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return folder
