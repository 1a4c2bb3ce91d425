"""The grammar mask: logits masked to what an xgrammar grammar allows, token by token.

    mask = GrammarMask(compiled_grammar, eos_id)
    mask.accept(token)          # the token generated last
    scores = mask(scores)       # the next token's scores, masked (in place; or the end forced)
    mask.forced()               # the one token the grammar allows next, or None (jump-forward)

- `GrammarMask`: one sequence's grammar state (xgrammar's matcher and bitmask). Once the grammar
  is complete, or a token broke it, only the end token is allowed.
- `apply_bitmask`: xgrammar's masking kernel, falling back to the plain-torch one where the
  default (Triton on CUDA) cannot run.
- `token_tables`: the special tokens and the tokens that open a quote or a bracket, as index
  tensors cached per tokenizer (the conductor's free-reasoning phase masks them).
- `import_xgrammar`, `grammar_missing`: xgrammar comes with the `gpu` extra (pyproject.toml), not
  with a chat install: every xgrammar release requires triton on Linux, about 1 GB that a CPU never
  uses. Where it is missing, each says so in one line, with the command that adds it.

Nothing here knows plans: the conductor's two-phase processor (`conductor.local`) uses it. torch
is imported inside functions only, and xgrammar by `import_xgrammar` only.
"""

from __future__ import annotations

import threading
from typing import Any


class GrammarMaskError(RuntimeError):
    """No masking kernel works on this device; the message says which and why."""


# How the `gpu` extra is added to an install, as `stiva train` says it of the `train` extra.
GPU_EXTRA_HINT = (
    "pipx inject stiva-tui 'stiva-tui[gpu]', or pip install 'stiva-tui[gpu]' in Stiva's virtual environment"
)


class GrammarNotInstalled(ImportError):
    """xgrammar cannot be imported (the `gpu` extra is not installed); the message, one line, says how
    to add it."""


def _not_installed(detail: str) -> str:
    return f"the plan grammar needs xgrammar ({detail}), which the gpu extra installs: {GPU_EXTRA_HINT}"


def grammar_missing() -> str | None:
    """Why no plan grammar can be had here, with how to add it, where xgrammar is not installed;
    None where it is. Imports nothing (a look for the package only), so a check costs nothing."""
    import importlib.util

    try:
        found = importlib.util.find_spec("xgrammar") is not None
    except (ImportError, ValueError):  # a parent that fails, a module without a spec
        found = False
    return None if found else _not_installed("not installed")


def import_xgrammar() -> Any:
    """The xgrammar module: the one import of it in Stiva. GrammarNotInstalled where it cannot be
    imported."""
    try:
        import xgrammar
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError) and exc.name == "xgrammar"
        raise GrammarNotInstalled(_not_installed("not installed" if missing else f"{exc}")) from None
    return xgrammar


class GrammarMask:
    """One sequence's grammar state, and the mask it puts on the next token's scores."""

    def __init__(self, compiled_grammar: Any, eos_id: int):
        xgr = import_xgrammar()

        self.eos_id = eos_id
        self.matcher = xgr.GrammarMatcher(compiled_grammar, override_stop_tokens=[eos_id])
        self.bitmask = xgr.allocate_token_bitmask(1, compiled_grammar.tokenizer_info.vocab_size)
        self.failed = False  # a token the grammar did not allow was accepted (then only the end may follow)
        self.filled = False  # the bitmask holds the mask of the current state

    def accept(self, token: int) -> None:
        """Advance the grammar by the token generated last."""
        self.filled = False
        if not self.matcher.is_terminated() and not self.matcher.accept_token(token):
            self.failed = True

    def _fill(self) -> None:
        if not self.filled:
            self.matcher.fill_next_token_bitmask(self.bitmask)
            self.filled = True

    def forced(self) -> int | None:
        """The next token when the grammar allows exactly one (the end once it is complete or
        broken), else None. The mask it works out is kept for the next call of the mask."""
        if self.matcher.is_terminated() or self.failed:
            return self.eos_id
        self._fill()
        return single_token(self.bitmask)

    def __call__(self, scores: Any) -> Any:
        """`scores` (one row) masked in place to the allowed tokens; a new tensor forcing the end
        once the grammar is complete or broken. GrammarMaskError when no kernel can mask them."""
        import torch

        if self.matcher.is_terminated() or self.failed:
            forced = torch.full_like(scores, float("-inf"))
            forced[:, self.eos_id] = 0.0
            return forced
        self._fill()
        apply_bitmask(scores, self.bitmask.to(scores.device))
        return scores


def single_token(bitmask: Any) -> int | None:
    """The token id when xgrammar's (one-row) `bitmask` allows exactly one token, else None (bit
    j of word i stands for token 32 * i + j)."""
    import torch

    words = bitmask.reshape(-1)
    nonzero = torch.nonzero(words)
    if nonzero.shape[0] != 1:
        return None
    index = int(nonzero[0, 0])
    word = int(words[index]) & 0xFFFFFFFF
    if word & (word - 1):
        return None
    return 32 * index + word.bit_length() - 1


# xgrammar's default kernel for CUDA logits is Triton's; where Triton is missing or cannot build,
# the plain-torch kernel does the same masking. The first backend that works is kept per device.
_MASK_BACKENDS = ("auto", "torch_native")
_mask_backend: dict[str, str] = {}


def apply_bitmask(scores: Any, bitmask: Any) -> None:
    """Mask `scores` in place to the tokens allowed by xgrammar's `bitmask`."""
    xgr = import_xgrammar()

    kind = scores.device.type
    known = _mask_backend.get(kind)
    if known is not None:
        xgr.apply_token_bitmask_inplace(scores, bitmask, backend=known)
        return
    error: Exception | None = None
    for backend in _MASK_BACKENDS:
        try:
            xgr.apply_token_bitmask_inplace(scores, bitmask, backend=backend)
        except Exception as exc:  # noqa: BLE001 - no Triton, no C compiler for it, a kernel that failed
            error = error or exc
            continue
        _mask_backend[kind] = backend
        return
    raise GrammarMaskError(f"cannot apply the plan grammar on {kind}: {error}")


_token_tables: dict[int, tuple[Any, Any, Any, int]] = {}
_tables_lock = threading.Lock()


def token_tables(tokenizer: Any, vocab_size: int) -> tuple[Any, Any]:
    """(special-token ids, opener ids): index tensors, cached per tokenizer."""
    import torch

    key = id(tokenizer)
    with _tables_lock:
        found = _token_tables.get(key)
        if found is not None and found[0] is tokenizer and found[3] == vocab_size:
            return found[1], found[2]
        special = torch.zeros(vocab_size, dtype=torch.bool)
        opener = torch.zeros(vocab_size, dtype=torch.bool)
        n = len(tokenizer)
        tokens = tokenizer.convert_ids_to_tokens(list(range(min(n, vocab_size))))
        ids = set(getattr(tokenizer, "all_special_ids", []) or [])
        for tid, added in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).items():
            if getattr(added, "special", False):
                ids.add(int(tid))
        for tid, tok in enumerate(tokens):
            if tok is None:
                special[tid] = True
                continue
            if any(ch in tok for ch in "[\"'") or tok in ("<0x5B>", "<0x22>", "<0x27>"):
                opener[tid] = True
            if tok.startswith("<unused") or tok.startswith("[multimodal]"):
                ids.add(tid)
        for tid in ids:
            if 0 <= tid < vocab_size:
                special[tid] = True
        if vocab_size > n:
            special[n:] = True
        # index tensors: index_fill_ over a few thousand ids, far cheaper than a 262k bool mask
        special_idx = special.nonzero().flatten()
        opener_idx = opener.nonzero().flatten()
        _token_tables[key] = (tokenizer, special_idx, opener_idx, vocab_size)
        return special_idx, opener_idx
