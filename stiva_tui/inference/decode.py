"""Stiva's own greedy/sampling decode loop: the fast paths `generate_sync` can take instead of
transformers' `generate()`.

    DecodeOptions()                                   # "hf": transformers' generate() (the default)
    DecodeOptions("eager")                            # this loop, a DynamicCache, one forward per token
    DecodeOptions("eager", jump_forward=True)         # + the tokens the grammar forces, fed in one forward
    DecodeOptions("static") / DecodeOptions("compiled", jump_forward=True)
                                                      # a StaticCache; "compiled": the one-token decode
                                                      # step under torch.compile (CUDA graphs on CUDA)

Every mode makes the same tokens as `generate()` at temperature 0 (tests/test_fast_decode.py):
the logits processors see the same ids and scores, and a forced token is the one token the mask
allows, which greedy decoding would pick anyway. Jump-forward asks each processor for
`forced_token(input_ids)` (the conductor's plan processor answers it from xgrammar's mask); a
processor without that method turns it off.

torch and transformers are imported inside functions only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DECODE_MODES = ("hf", "eager", "static", "compiled")


@dataclass(frozen=True)
class DecodeOptions:
    """How `generate_sync` decodes. `mode`: "hf" (transformers' generate), "eager" (Stiva's loop),
    "static" (Stiva's loop on a StaticCache), "compiled" (that, the decode step under
    torch.compile). `jump_forward`: grammar-forced tokens in one forward pass (not with "hf")."""

    mode: str = "hf"
    jump_forward: bool = False
    # torch.compile's mode for "compiled": None picks "reduce-overhead" (CUDA graphs) on CUDA and
    # the default elsewhere
    compile_mode: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in DECODE_MODES:
            raise ValueError(f"unknown decode mode {self.mode!r}; choose one of {', '.join(DECODE_MODES)}")
        if self.jump_forward and self.mode == "hf":
            raise ValueError('jump_forward needs Stiva\'s decode loop: decode = "eager", "static" or "compiled"')

    @property
    def own_loop(self) -> bool:
        return self.mode != "hf"

    @classmethod
    def parse(cls, text: str) -> "DecodeOptions":
        """ "hf" | "eager" | "static" | "compiled", each optionally "+jump" (e.g. "compiled+jump")."""
        mode, _, extra = text.partition("+")
        if extra not in ("", "jump"):
            raise ValueError(f"unknown decode option {text!r}; e.g. eager, eager+jump, compiled+jump")
        return cls(mode, jump_forward=extra == "jump")

    def label(self) -> str:
        return self.mode + ("+jump" if self.jump_forward else "")


@dataclass
class LoopStats:
    forward_passes: int = 0  # model calls, prefill included
    forced_tokens: int = 0  # tokens fed without a forward pass of their own


def cache_kwarg(model: Any) -> str:
    """The name the model's forward takes its KV cache under: `cache` since transformers 5.2x,
    `past_key_values` before (the GPU image's 5.17)."""
    import inspect

    key = ("cache_kwarg", type(model))
    found = _kwarg_names.get(key)
    if found is None:
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            params = {}
        if "cache" in params:
            found = "cache"
        elif "past_key_values" in params:
            found = "past_key_values"
        else:  # a wrapper (peft) with **kwargs: ask the model it wraps (not kept: it may wrap another)
            inner = getattr(model, "get_base_model", None)
            return cache_kwarg(inner()) if callable(inner) and inner() is not model else "past_key_values"
        _kwarg_names[key] = found
    return found


_kwarg_names: dict = {}


def _bucket(n: int) -> int:
    """The static cache's length for `n` tokens: a power of two (>= 256), so that plans of
    different lengths share one cache and one compiled graph."""
    size = 256
    while size < n:
        size *= 2
    return size


def static_cache(loaded: Any, length: int, prefix: Any | None) -> tuple[Any, int]:
    """The loaded model's StaticCache for `length` tokens (kept per size on the model's device),
    emptied, with `prefix` (a DynamicCache of the prompt's static prefix) copied in. (cache, the
    number of positions it holds). Call under the model's lock."""
    from transformers import StaticCache

    size = _bucket(length)
    caches: dict = loaded.extras.setdefault("static_caches", {})
    cache = caches.get(size)
    if cache is None:
        while len(caches) >= 2:  # the longest plans and the usual ones
            caches.pop(next(iter(caches)))
        cache = StaticCache(config=_text_config(loaded.model), max_cache_len=size)
        caches[size] = cache
    cache.reset()
    held = 0
    if prefix is not None:
        for layer, source in zip(cache.layers, prefix.layers):
            layer.update(source.keys, source.values)
        held = prefix.get_seq_length()
    return cache, int(held)


def _text_config(model: Any) -> Any:
    config = model.config
    return getattr(config, "get_text_config", lambda **_: config)(decoder=True)


def _compiled_step(loaded: Any, mode: str | None) -> Callable:
    """The one-token decode step under torch.compile, compiled once per loaded model."""
    import torch

    key = ("compiled_step", mode)
    step = loaded.extras.get(key)
    if step is None:
        model = loaded.model
        kw = cache_kwarg(model)

        def one_token(ids: Any, positions: Any, cache: Any) -> Any:
            out = model(input_ids=ids, position_ids=positions, use_cache=True, **{kw: cache})
            return out.logits[:, -1, :]

        cuda = next(model.parameters()).device.type == "cuda"
        chosen = mode or ("reduce-overhead" if cuda else "default")
        step = torch.compile(one_token, mode=chosen, fullgraph=False, dynamic=False)
        loaded.extras[key] = step
    return step


def _forced(processors: Sequence[Any], seq: Any) -> int | None:
    """The next token when the (single) processor says it is forced."""
    (processor,) = processors
    return processor.forced_token(seq)


def run_loop(
    loaded: Any,
    prompt: Sequence[int],
    *,
    options: DecodeOptions,
    max_new_tokens: int,
    temperature: float,
    logits_processors: Sequence[Any],
    eos: set[int],
    put: Callable[[int], None],
    should_stop: Callable[[], bool],
    prefix: Any | None,
    prefix_tokens: int,
) -> LoopStats:
    """Decode up to `max_new_tokens` tokens after `prompt`, calling `put` with each new token;
    stop at an end token or when `should_stop()` says so after a token. `prefix`: a fresh cache
    (DynamicCache) of `prompt[:prefix_tokens]`, or None. Call under the model's lock, in
    inference mode."""
    import torch

    model = loaded.model
    device = next(model.parameters()).device
    kw = cache_kwarg(model)
    stats = LoopStats()
    limit = max(1, int(max_new_tokens))
    total = len(prompt) + limit
    if options.mode in ("static", "compiled"):
        cache, held = static_cache(loaded, total, prefix)
    else:
        from transformers import DynamicCache

        cache = prefix if prefix is not None else DynamicCache(config=_text_config(model))
        held = prefix_tokens if prefix is not None else 0
    step = _compiled_step(loaded, options.compile_mode) if options.mode == "compiled" else None
    processors = list(logits_processors)
    jump = options.jump_forward and len(processors) == 1 and hasattr(processors[0], "forced_token")
    seq = torch.empty((1, total), dtype=torch.long)  # the ids the processors see (on the CPU)
    seq[0, : len(prompt)] = torch.tensor(list(prompt), dtype=torch.long)
    length = len(prompt)

    def forward(tokens: Sequence[int], start: int) -> Any:
        stats.forward_passes += 1
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=device)
        positions = torch.arange(start, start + len(tokens), device=device).unsqueeze(0)
        if step is not None and len(tokens) == 1:
            logits = step(ids, positions, cache)
        else:
            logits = model(
                input_ids=ids, position_ids=positions, use_cache=True, logits_to_keep=1, **{kw: cache}
            ).logits[:, -1, :]
        return logits.to(dtype=torch.float32, copy=True)  # as generate() hands the processors

    logits = forward(list(prompt[held:]), held)
    generated = 0
    while True:
        scores = logits
        for processor in processors:
            scores = processor(seq[:, :length], scores)
        if temperature > 0:
            probs = torch.softmax(scores / temperature, dim=-1)
            token = int(torch.multinomial(probs, num_samples=1)[0, 0])
        else:
            token = int(torch.argmax(scores[0]))
        feed = [token]
        seq[0, length] = token
        length += 1
        generated += 1
        put(token)
        if token in eos or should_stop() or generated >= limit:
            break
        ended = False
        while jump and generated < limit:
            forced = _forced(processors, seq[:, :length])
            if forced is None:
                break
            feed.append(forced)
            seq[0, length] = forced
            length += 1
            generated += 1
            stats.forced_tokens += 1
            put(forced)
            if forced in eos or should_stop() or generated >= limit:
                ended = True
                break
        if ended:
            break
        logits = forward(feed, length - len(feed))
    return stats
