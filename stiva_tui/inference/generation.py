"""Streaming generation on a loaded model: chat prompts, incremental decoding, stop strings.

`generate_sync(loaded, prompt_ids, ...)` runs one `generate()` on the shared model (serialised by
its lock) and calls `on_text` with each new piece of text; `logits_processors` is the hook a
caller's grammar plugs into, `stop_at` a caller's own end of the text (a plan's lists complete). `generate_async` runs it in a thread, and cancelling the awaiting
task stops generation at the next token.

torch and transformers are imported inside functions only.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .checkpoints import LoadedModel
from .decode import DecodeOptions, cache_kwarg, run_loop

# --- prompts ------------------------------------------------------------------------------------


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_plain(messages: Sequence[dict], assistant_label: str = "Assistant") -> str:
    """A plain-text chat rendering for base models without a chat template."""
    parts = []
    for message in messages:
        role = message.get("role", "user")
        content = str(message.get("content", "")).strip()
        if role == "system":
            parts.append(content)
        elif role == "assistant":
            parts.append(f"{assistant_label}: {content}")
        else:
            parts.append(f"User: {content}")
    parts.append(f"{assistant_label}:")
    return "\n\n".join(parts)


def render_completion(messages: Sequence[dict]) -> str:
    """The text a base model continues: the messages' contents as they are, a blank line apart
    (the few-shot prompts of `conductor.fewshot` are written for this; no role labels)."""
    return "\n\n".join(str(m.get("content", "")).strip("\n") for m in messages)


def prompt_ids(
    tokenizer: Any, messages: Sequence[dict], prefix: str = "", assistant_label: str = "Assistant"
) -> list[int]:
    """Token ids of the chat `messages` followed by the start of the assistant's turn + `prefix`."""
    if has_chat_template(tokenizer):
        try:
            text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 - e.g. a template without a system role
            merged = _merge_system(messages)
            text = tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)
        text += prefix
        # the rendered template already holds its special tokens (e.g. <bos>) as text
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    text = render_plain(messages, assistant_label)
    if prefix:
        text += " " + prefix
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


def _merge_system(messages: Sequence[dict]) -> list[dict]:
    system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system")
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if system and rest:
        rest[0]["content"] = system + "\n\n" + rest[0]["content"]
    return rest


# --- incremental decoding -----------------------------------------------------------------------


class IncrementalDecoder:
    """Text deltas from a growing list of token ids (no split UTF-8, spaces kept)."""

    def __init__(self, tokenizer: Any, anchor: Sequence[int] = ()):
        self.tokenizer = tokenizer
        self.ids: list[int] = list(anchor)[-1:]
        self.prefix = 0
        self.read = len(self.ids)
        self.text = ""

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def push(self, token: int) -> str:
        self.ids.append(int(token))
        prefix_text = self._decode(self.ids[self.prefix : self.read])
        new_text = self._decode(self.ids[self.prefix :])
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            delta = new_text[len(prefix_text) :]
            self.prefix = self.read
            self.read = len(self.ids)
            self.text += delta
            return delta
        return ""

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character at the end)."""
        prefix_text = self._decode(self.ids[self.prefix : self.read])
        new_text = self._decode(self.ids[self.prefix :])
        delta = new_text[len(prefix_text) :] if len(new_text) > len(prefix_text) else ""
        self.prefix = self.read = len(self.ids)
        self.text += delta
        return delta


# --- one generate() call, run in a thread -------------------------------------------------------


@dataclass
class GenerationResult:
    text: str
    token_ids: list[int]
    prompt_tokens: int
    completion_tokens: int
    finish: str  # "stop" (end token or stop string) | "length" | "cancelled"
    first_token_s: float | None
    seconds: float
    forward_passes: int | None = None  # Stiva's loop only: model calls, prefill included
    forced_tokens: int = 0  # tokens the grammar forced, fed without a forward pass of their own


# Where a caller's text is complete: given the text so far and how much of it was looked at
# before, the end to cut it at (generation stops there), or None to go on.
StopAt = Callable[[str, int], int | None]


class _Streamer:
    """transformers' streamer interface: put() per new token (the first put is the prompt)."""

    def __init__(
        self,
        tokenizer: Any,
        prompt: Sequence[int],
        eos_ids: set[int],
        stop_strings: Sequence[str],
        on_text: Callable[[str], None] | None,
        stop_at: StopAt | None = None,
    ):
        self.decoder = IncrementalDecoder(tokenizer, prompt)
        self.stop_at = stop_at
        self.checked = 0  # characters of decoder.text that stop_at has looked at
        self.eos_ids = eos_ids
        self.stop_strings = [s for s in stop_strings if s]
        self.on_text = on_text
        self.seen_prompt = False
        self.ids: list[int] = []
        self.emitted = 0  # characters of decoder.text already sent
        self.stopped = False  # a stop string was found
        self.cut: int | None = None
        self.first_token_at: float | None = None

    def put(self, value: Any) -> None:
        if not self.seen_prompt:
            self.seen_prompt = True
            return
        for token in value.reshape(-1).tolist():
            if self.first_token_at is None:
                self.first_token_at = time.monotonic()
            self.ids.append(int(token))
            if self.stopped:
                continue
            if int(token) in self.eos_ids:
                continue
            self.decoder.push(int(token))
            self._emit(final=False)

    def end(self) -> None:
        if not self.stopped:
            self.decoder.flush()
        self._emit(final=True)

    @property
    def text(self) -> str:
        text = self.decoder.text
        return text if self.cut is None else text[: self.cut]

    def _emit(self, final: bool) -> None:
        text = self.decoder.text
        limit = len(text)
        if self.stop_strings and self.cut is None:
            hits = [i for i in (text.find(s, max(0, self.emitted - len(s))) for s in self.stop_strings) if i >= 0]
            if hits:
                self.cut = min(hits)
                self.stopped = True
            elif not final:
                limit -= _partial_stop(text, self.stop_strings)
        if self.stop_at is not None and self.cut is None and len(text) > self.checked:
            end = self.stop_at(text, self.checked)
            self.checked = len(text)
            if end is not None:
                self.cut = end
                self.stopped = True
        if self.cut is not None:
            limit = min(limit, self.cut)
        if limit > self.emitted:
            chunk = text[self.emitted : limit]
            self.emitted = limit
            if self.on_text is not None and chunk:
                self.on_text(chunk)


def _partial_stop(text: str, stops: Sequence[str]) -> int:
    """Length of the longest end of `text` that begins a stop string (held back while streaming)."""
    best = 0
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:k]):
                best = max(best, k)
                break
    return best


class _StopWhen:
    def __init__(self, event: threading.Event, streamer: _Streamer):
        self.event = event
        self.streamer = streamer

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = self.event.is_set() or self.streamer.stopped
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


def eos_token_ids(loaded: LoadedModel) -> list[int]:
    """The ids that end a generation: the model's and tokenizer's end tokens, plus the chat
    templates' end-of-turn markers the vocabulary has. Worked out once per loaded model: asking the
    tokenizer for its whole vocabulary costs ~0.5 s on Gemma's 262k tokens, and did so on every call."""
    cached = loaded.extras.get("eos_ids")
    if cached is not None:
        return list(cached)
    tok = loaded.tokenizer
    ids: list[int] = []
    for source in (getattr(loaded.model, "generation_config", None), getattr(loaded.model, "config", None)):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.append(value)
        elif isinstance(value, (list, tuple)):
            ids.extend(int(v) for v in value)
    if tok.eos_token_id is not None:
        ids.append(int(tok.eos_token_id))
    unknown = getattr(tok, "unk_token_id", None)
    for name in ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
        tid = tok.convert_tokens_to_ids(name)
        # An absent token converts to the unknown token's id (or None): that is no end marker.
        if isinstance(tid, int) and tid >= 0 and tid != unknown:
            ids.append(tid)
    found = list(dict.fromkeys(ids))
    loaded.extras["eos_ids"] = tuple(found)
    return found


def _generation_config(loaded: LoadedModel, max_new_tokens: int, temperature: float, eos: Sequence[int]) -> Any:
    """Greedy at temperature 0, plain sampling otherwise (no top-k/top-p: the grammar's mask and
    the model's distribution are what is sampled from); padding with the pad token, else an end token."""
    from transformers import GenerationConfig

    pad = loaded.tokenizer.pad_token_id
    return GenerationConfig(
        max_new_tokens=max(1, int(max_new_tokens)),
        do_sample=temperature > 0,
        temperature=temperature if temperature > 0 else None,
        top_k=None,
        top_p=None,
        eos_token_id=list(eos) or None,
        pad_token_id=pad if pad is not None else (eos[0] if eos else None),
    )


def _prompt_rows(loaded: LoadedModel, prompt: Sequence[int], n: int) -> Any:
    """`n` copies of the prompt as a batch on the model's device."""
    import torch

    device = "cuda" if loaded.device == "cuda" else "cpu"
    return torch.tensor([list(prompt)] * n, dtype=torch.long, device=device)


# How many static prompt prefixes a loaded model keeps the KV cache of (the worker's examples,
# the conductor's examples for a pool or two): each is a few MB on the 270M model.
_PREFIX_KV_SLOTS = 4


def shared_prefix_len(prefix_ids: Sequence[int], prompt: Sequence[int]) -> int:
    """len(prefix_ids) when `prompt` starts with them, else 0 (the prompt's tokenization merged a
    token across the boundary, so the prefix's cache would not be this prompt's)."""
    n = len(prefix_ids)
    return n if 0 < n < len(prompt) and list(prompt[:n]) == list(prefix_ids) else 0


def _prefix_cache(loaded: LoadedModel, prompt: Sequence[int], prefix_tokens: int) -> Any:
    """A fresh copy of the KV cache of `prompt[:prefix_tokens]`, computed once per loaded model and
    prefix, or None without a prefix. The few-shot prompts of base models are a long static prefix
    and a short case, so prefill becomes the case alone. Call under the model's lock."""
    if prefix_tokens <= 0 or prefix_tokens >= len(prompt):
        return None
    import copy

    import torch
    from transformers import DynamicCache

    key = tuple(int(t) for t in prompt[:prefix_tokens])
    slots: dict = loaded.extras.setdefault("prefix_kv", {})
    cache = slots.pop(key, None)
    if cache is None:
        cache = DynamicCache(config=loaded.model.config)
        ids = _prompt_rows(loaded, key, 1)
        with torch.inference_mode():
            # logits for the last position only: the full 262k-wide logits of every prefix token
            # would cost more than the prefix itself
            loaded.model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                use_cache=True,
                logits_to_keep=1,
                **{cache_kwarg(loaded.model): cache},
            )
        while len(slots) >= _PREFIX_KV_SLOTS:
            slots.pop(next(iter(slots)))
    slots[key] = cache  # most recently used last
    return copy.deepcopy(cache)


def generate_sync(
    loaded: LoadedModel,
    prompt: Sequence[int],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    logits_processors: Sequence[Any] = (),
    stop_strings: Sequence[str] = (),
    stop_event: threading.Event | None = None,
    on_text: Callable[[str], None] | None = None,
    eos_ids: Sequence[int] | None = None,
    prefix_tokens: int = 0,
    decode: DecodeOptions | None = None,
    stop_at: StopAt | None = None,
) -> GenerationResult:
    """One streaming generate() on the shared model (serialised by its lock). Blocking.

    `stop_at`: the caller's own end of the text (see `StopAt`): the text is cut there and
    generation stops at the next token, finish "stop", as at a stop string.

    `prefix_tokens`: the prompt's first so many tokens are a static prefix whose KV cache is kept
    on the loaded model and reused (only for a model whose weights do not change while loaded).
    `decode`: transformers' generate() (None, "hf") or Stiva's own loop (`inference.decode`), which
    makes the same tokens and can feed grammar-forced tokens in one pass, on a static cache, compiled."""
    import torch

    stop_event = stop_event or threading.Event()
    eos = list(eos_ids) if eos_ids is not None else eos_token_ids(loaded)
    streamer = _Streamer(loaded.tokenizer, prompt, set(eos), stop_strings, on_text, stop_at)
    gen_config = _generation_config(loaded, max_new_tokens, temperature, eos)
    input_ids = _prompt_rows(loaded, prompt, 1)
    start = time.monotonic()
    finish = "stop"
    stats = None
    with loaded.lock:
        if stop_event.is_set():
            return GenerationResult("", [], len(prompt), 0, "cancelled", None, 0.0)
        with torch.inference_mode():
            cache = _prefix_cache(loaded, prompt, prefix_tokens)
            if decode is not None and decode.own_loop:
                streamer.put(input_ids)  # the prompt, as generate() hands it first
                stats = run_loop(
                    loaded,
                    prompt,
                    options=decode,
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    logits_processors=logits_processors,
                    eos=set(eos),
                    put=lambda token: streamer.put(torch.tensor([token])),
                    should_stop=lambda: stop_event.is_set() or streamer.stopped,
                    prefix=cache,
                    prefix_tokens=prefix_tokens if cache is not None else 0,
                )
                streamer.end()
            else:
                _hf_generate(loaded, input_ids, cache, gen_config, logits_processors, stop_event, streamer)
    ids = streamer.ids
    if stop_event.is_set():
        finish = "cancelled"
    elif streamer.stopped or (ids and ids[-1] in eos):
        finish = "stop"
    elif len(ids) >= max_new_tokens:
        finish = "length"
    first = None if streamer.first_token_at is None else streamer.first_token_at - start
    return GenerationResult(
        text=streamer.text,
        token_ids=list(ids),
        prompt_tokens=len(prompt),
        completion_tokens=len(ids),
        finish=finish,
        first_token_s=first,
        seconds=time.monotonic() - start,
        forward_passes=None if stats is None else stats.forward_passes,
        forced_tokens=0 if stats is None else stats.forced_tokens,
    )


def _hf_generate(
    loaded: LoadedModel,
    input_ids: Any,
    cache: Any,
    gen_config: Any,
    logits_processors: Sequence[Any],
    stop_event: threading.Event,
    streamer: _Streamer,
) -> None:
    """transformers' generate() with the streamer, the processors and the stop criterion."""
    import torch
    from transformers import LogitsProcessorList, StoppingCriteriaList

    loaded.model.generate(
        input_ids=input_ids,
        **({cache_kwarg(loaded.model): cache} if cache is not None else {}),
        attention_mask=torch.ones_like(input_ids),
        generation_config=gen_config,
        logits_processor=LogitsProcessorList(list(logits_processors)),
        stopping_criteria=StoppingCriteriaList([_StopWhen(stop_event, streamer)]),
        streamer=streamer,
    )


def generate_batch_sync(
    loaded: LoadedModel,
    prompt: Sequence[int],
    n: int,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    logits_processors: Sequence[Any] = (),
    eos_ids: Sequence[int] | None = None,
) -> list[list[int]]:
    """`n` samples of one prompt in one `generate()` (no streaming): each row's new token ids, up
    to and including its end token. Blocking; serialised by the model's lock like generate_sync."""
    return generate_rows_sync(
        loaded,
        [prompt] * n,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        logits_processors=logits_processors,
        eos_ids=eos_ids,
    )


def generate_rows_sync(
    loaded: LoadedModel,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    logits_processors: Sequence[Any] = (),
    eos_ids: Sequence[int] | None = None,
) -> list[list[int]]:
    """One sample of each prompt, all in one `generate()`: prompts of different lengths are padded
    on the left (masked out; positions come from the attention mask), so each row is sampled as it
    would be alone, and the model's weights are read once per token for the whole batch instead of
    once per row (on a CPU the 262k-wide lm_head makes that most of a token's time). Each row's new
    token ids, up to and including its end token. Blocking; serialised by the model's lock."""
    import torch
    from transformers import LogitsProcessorList

    eos = list(eos_ids) if eos_ids is not None else eos_token_ids(loaded)
    gen_config = _generation_config(loaded, max_new_tokens, temperature, eos)
    width = max(len(p) for p in prompts)
    pad = gen_config.pad_token_id if gen_config.pad_token_id is not None else 0
    device = "cuda" if loaded.device == "cuda" else "cpu"
    input_ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], dtype=torch.long, device=device)
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long, device=device)
    with loaded.lock, torch.inference_mode():
        out = loaded.model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            generation_config=gen_config,
            logits_processor=LogitsProcessorList(list(logits_processors)),
        )
    rows = []
    ends = set(eos)
    for row in out[:, width:].tolist():
        cut = next((i for i, token in enumerate(row) if token in ends), None)
        rows.append(row if cut is None else row[: cut + 1])
    return rows


async def generate_async(
    loaded: LoadedModel,
    prompt: Sequence[int],
    *,
    on_text: Callable[[str], None] | None = None,
    stop_event: threading.Event | None = None,
    **kwargs: Any,
) -> GenerationResult:
    """`generate_sync` in a thread; `on_text` runs on the event loop; cancelling stops generation."""
    loop = asyncio.get_running_loop()
    stop_event = stop_event or threading.Event()

    def emit(text: str) -> None:
        if on_text is None:
            return
        try:
            loop.call_soon_threadsafe(on_text, text)
        except RuntimeError:  # the loop is closed
            stop_event.set()

    future = loop.run_in_executor(
        None, lambda: generate_sync(loaded, prompt, stop_event=stop_event, on_text=emit, **kwargs)
    )
    try:
        return await future
    except asyncio.CancelledError:
        stop_event.set()
        raise
