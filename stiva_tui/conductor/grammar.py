"""The grammar of the conductor's three lists, for grammar-constrained decoding (xgrammar).

`lists_grammar(pool_size, max_steps, max_subtask_chars, allow_empty)` gives an EBNF grammar that
accepts exactly the workflows `parse_workflow` accepts, in the canonical three-line form:

    \\nmodel_id = [2, 0]
    subtasks = ["...", "..."]
    access_list = [[], [0]]

The equal length of the three lists is not context-free in general, but with at most `max_steps`
steps it is: one alternative per step count n, each fixing n entries in all three lists. Entry i
of access_list is `[]`, `"all"`, or a strictly increasing list of step numbers below i. Subtasks
are JSON strings of 1..max_subtask_chars characters without `"`, `\\`, control characters, `:`,
`=` and `<`, so no subtask can look like a list label or a think tag to the parser.

Compiled grammars are cached per (tokenizer, pool size, max steps, subtask bound, empty allowed).
xgrammar, which only the `gpu` extra installs, is imported inside the functions only, through
`inference.grammar_mask.import_xgrammar` (GrammarNotInstalled, saying how to add it, where it is
missing); `lists_grammar` and `lists_json_schema` (the remote planners' path) need none of it.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

from ..inference.grammar_mask import import_xgrammar

# The subtask characters (inside a JSON string): no quote, backslash, control character, nor
# ':', '=', '<' (a label or a </think> inside a subtask could fool the free-text parser), nor a
# UTF-16 surrogate: xgrammar takes their 3-byte encodings for characters, and they decode to
# three U+FFFD each, past the subtask's bound (byte-level vocabularies such as Qwen's have them).
SUBTASK_CHAR = r'[^"\\\0-\x1f\x7f:=<\uD800-\uDFFF]'
SUBTASK_FIRST = r'[^ "\\\0-\x1f\x7f:=<\uD800-\uDFFF]'


def _lit(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@lru_cache(maxsize=64)
def lists_grammar(pool_size: int, max_steps: int, max_subtask_chars: int = 400, allow_empty: bool = False) -> str:
    """EBNF for the three lists (starting with a newline, ending with one)."""
    if pool_size < 1:
        raise ValueError("the pool is empty")
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")
    if max_subtask_chars < 1:
        raise ValueError("max_subtask_chars must be at least 1")
    rules: list[str] = []
    alts = []
    if allow_empty:
        alts.append(_lit("model_id = []\nsubtasks = []\naccess_list = []"))
    alts += [f"steps{n}" for n in range(1, max_steps + 1)]
    rules.append(f'root ::= "\\n" ({" | ".join(alts)}) "\\n"')
    rules.append("mid ::= " + " | ".join(_lit(str(i)) for i in range(pool_size)))
    rules.append(
        f'sub ::= "\\"" {SUBTASK_FIRST} {SUBTASK_CHAR}{{0,{max_subtask_chars - 1}}} "\\""'
        if max_subtask_chars > 1
        else f'sub ::= "\\"" {SUBTASK_FIRST} "\\""'
    )
    # access entry i: [] | "all" | [strictly increasing numbers < i]
    for i in range(max_steps):
        options = ['"[]"', _lit('"all"')]
        if i > 0:
            options.append(f'"[" inc{i}_0 "]"')
        rules.append(f"acc{i} ::= " + " | ".join(options))
        # inc{i}_{k}: a non-empty increasing list of numbers in k..i-1
        for k in range(i):
            inc_alts = []
            for j in range(k, i):
                if j + 1 < i:
                    inc_alts.append(f"{_lit(str(j))} ({_lit(', ')} inc{i}_{j + 1})?")
                else:
                    inc_alts.append(_lit(str(j)))
            rules.append(f"inc{i}_{k} ::= " + " | ".join(inc_alts))
    sep = _lit(", ")
    for n in range(1, max_steps + 1):
        mids = f" {sep} ".join(["mid"] * n)
        subs = f" {sep} ".join(["sub"] * n)
        accs = f" {sep} ".join(f"acc{i}" for i in range(n))
        rules.append(f'steps{n} ::= "model_id = [" {mids} "]\\nsubtasks = [" {subs} "]\\naccess_list = [" {accs} "]"')
    return "\n".join(rules) + "\n"


def lists_json_schema(
    pool_size: int, max_steps: int, max_subtask_chars: int = 400, allow_empty: bool = False
) -> dict[str, Any]:
    """The plan as a JSON schema, for a served conductor's structured-output field (vLLM, SGLang):
    one object with the three lists, as `parse_workflow` reads its JSON form. JSON schema cannot tie
    the three lengths together nor bound entry i of access_list by i; the parser checks both and
    the remote conductor's repair retry covers the rare plan that fails them."""
    if pool_size < 1:
        raise ValueError("the pool is empty")
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")
    low = 0 if allow_empty else 1

    def steps(items: dict[str, Any]) -> dict[str, Any]:
        return {"type": "array", "items": items, "minItems": low, "maxItems": max_steps}

    earlier = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": max(0, max_steps - 2)}}
    if max_steps < 2:
        earlier["maxItems"] = 0
    return {
        "type": "object",
        "properties": {
            "model_id": steps({"type": "integer", "minimum": 0, "maximum": pool_size - 1}),
            "subtasks": steps({"type": "string", "minLength": 1, "maxLength": max_subtask_chars}),
            "access_list": steps({"anyOf": [{"type": "string", "enum": ["all"]}, earlier]}),
        },
        "required": ["model_id", "subtasks", "access_list"],
        "additionalProperties": False,
    }


def max_lists_bytes(pool_size: int, max_steps: int, max_subtask_chars: int = 400) -> int:
    """An upper bound on the UTF-8 bytes of any text the grammar accepts (a token is >= 1 byte)."""
    n = max_steps
    mid = len(str(pool_size - 1))
    total = 1 + len("model_id = [") + n * mid + (n - 1) * 2 + len("]\n")
    total += len("subtasks = [") + n * (2 + 4 * max_subtask_chars) + (n - 1) * 2 + len("]\n")
    total += len("access_list = [") + (n - 1) * 2 + len("]\n")
    for i in range(n):
        total += max(5, 2 + sum(len(str(j)) + 2 for j in range(i)))
    return total


# --- compiling, per tokenizer --------------------------------------------------------------------

_compilers: dict[tuple, tuple[Any, Any, Any]] = {}  # (id(tokenizer), vocab, stops) -> (tokenizer, info, compiler)
_compiled: dict[tuple, Any] = {}
_lock = threading.Lock()


def tokenizer_info(tokenizer: Any, vocab_size: int | None = None, stop_token_ids: list[int] | None = None) -> Any:
    return _compiler(tokenizer, vocab_size, stop_token_ids)[0]


def _compiler(tokenizer: Any, vocab_size: int | None, stop_token_ids: list[int] | None) -> tuple[Any, Any]:
    xgr = import_xgrammar()

    # the vocabulary width and stop tokens are part of the compiled masks: one compiler per triple
    key = (id(tokenizer), vocab_size, tuple(stop_token_ids or ()))
    with _lock:
        entry = _compilers.get(key)
        if entry is None or entry[0] is not tokenizer:
            info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids)
            compiler = xgr.GrammarCompiler(info, max_threads=2)
            entry = (tokenizer, info, compiler)
            _compilers[key] = entry
    return entry[1], entry[2]


def compiled_lists_grammar(
    tokenizer: Any,
    pool_size: int,
    max_steps: int,
    max_subtask_chars: int = 400,
    allow_empty: bool = False,
    *,
    vocab_size: int | None = None,
    stop_token_ids: list[int] | None = None,
) -> Any:
    """The xgrammar CompiledGrammar of `lists_grammar(...)` for `tokenizer` (cached)."""
    _info, compiler = _compiler(tokenizer, vocab_size, stop_token_ids)
    key = (id(tokenizer), vocab_size, tuple(stop_token_ids or ()), pool_size, max_steps, max_subtask_chars, allow_empty)
    with _lock:
        found = _compiled.get(key)
    if found is not None:
        return found
    compiled = compiler.compile_grammar(lists_grammar(pool_size, max_steps, max_subtask_chars, allow_empty))
    with _lock:
        _compiled[key] = compiled
    return compiled
