"""What masking the pool's keys in a streamed answer costs, per delta, and how much it holds back.

    python -m benchmarks.perf.answer_mask [--no-save]

`keys.AnswerMask` sits between every provider's stream and the events (pool/client.py). For an
answer of ordinary prose, of code (with hex and escapes that begin a key's forms), and of one that
echoes a key in several forms, fed in deltas of 4 and 16 characters with one and three keys
configured: the microseconds a delta (the best of 7 runs; the cores are shared), the characters
held back after each delta (most and mean), and beside them what the client already spends on a
delta (json.loads of an OpenAI stream chunk of that size). Then the first answer's one-off cost,
the patterns compiled when first needed: with fresh caches, an answer of prose, then one that
holds a key. Saves answer_mask.json beside itself.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
import timeit

from benchmarks.harness import HERE, machine, save_json

OUT = HERE / "perf" / "answer_mask.json"
KEYS = [
    "lab.Token_0123456789abcdef",
    "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789" * 4,
    "AIzaSyD-1234567890abcdefghijklmnopqrs",
]
PROSE = "The quick brown fox jumps over the lazy dog, and then some more words follow here.\n" * 10
CODE = "def f(x):\n    return x * 2 + 0x6c61  # 6c 61 62, see %20 and \\u0041\n" * 10


def _echo() -> str:
    import base64

    key = KEYS[0]
    forms = [key, key.upper(), base64.b64encode(key.encode()).decode(), " ".join(key), key[::-1]]
    return ("Your request said: " + " and ".join(forms) + ". ") * 4


def _per_delta(text: str, keys: list[str], size: int) -> dict:
    from stiva_tui.keys import AnswerMask

    pieces = [text[i : i + size] for i in range(0, len(text), size)]

    def run() -> None:
        answer = AnswerMask(keys)
        for piece in pieces:
            answer.feed(piece)
        answer.flush()

    run()
    best = min(timeit.repeat(run, number=5, repeat=7)) / 5
    answer, held = AnswerMask(keys), []
    for piece in pieces:
        answer.feed(piece)
        held.append(len(answer._held))  # what it has not passed on yet (masked text is shorter)
    chunks = [json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces]
    parse = min(timeit.repeat(lambda: [json.loads(c) for c in chunks], number=5, repeat=7)) / 5
    return {
        "us_per_delta": round(best / len(pieces) * 1e6, 2),
        "json_loads_us_per_delta": round(parse / len(pieces) * 1e6, 2),
        "held_most": max(held),
        "held_mean": round(statistics.fmean(held), 2),
    }


def _first_use(keys: list[str]) -> dict:
    from stiva_tui import keys as module

    best = {"prose_ms": float("inf"), "then_a_key_ms": float("inf")}
    for _ in range(5):
        for cache in (module._form_checks, module._forms, module._secret_pattern):
            cache.cache_clear()
        re.purge()
        started = time.perf_counter()
        answer = module.AnswerMask(keys)
        answer.feed(PROSE + CODE)
        answer.flush()
        middle = time.perf_counter()
        answer = module.AnswerMask(keys)
        answer.feed(f"echo: {keys[-1]} done")
        answer.flush()
        ended = time.perf_counter()
        best["prose_ms"] = min(best["prose_ms"], (middle - started) * 1e3)
        best["then_a_key_ms"] = min(best["then_a_key_ms"], (ended - middle) * 1e3)
    return {name: round(value, 1) for name, value in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    figures: dict = {"what": __doc__.splitlines()[0], "machine": machine(), "keys_chars": [len(k) for k in KEYS]}
    streamed = []
    for label, text in (("prose", PROSE), ("code", CODE), ("echo", _echo())):
        for count in (1, 3):
            for size in (4, 16):
                row = {"text": label, "keys": count, "chars_per_delta": size, **_per_delta(text, KEYS[:count], size)}
                streamed.append(row)
                print(row)
    figures["streamed"] = streamed
    figures["first_use"] = {str(count): _first_use(KEYS[:count]) for count in (1, 3)}
    print(figures["first_use"])
    if not args.no_save:
        print(save_json(OUT, figures))


if __name__ == "__main__":
    main()
