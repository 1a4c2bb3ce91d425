"""Whether two answers agree as math the same way on the main thread and in a worker thread, and
what a comparison costs.

    python -m benchmarks.perf.math_agreement [--items N] [--no-save]

Votes and agreement gates compare final answers with `core.answers.same_final`, math-verify for
math: a script or the routing experiment calls it on the main thread, the executor
(engine/executor.py) in a worker thread under AGREEMENT_DEADLINE_S. Over ZeroEval's math-l5 items
(benchmarks/data/zeroeval.records.jsonl.gz), every pair of models' final answers (kind `math`) is
compared once on the main thread and once in a worker thread, each time with math-verify's cache
cleared (math-verify imported and warmed once before, not timed). It records how many pairs
differ between the two (the goal is 0), the slowest comparison in ms and which pair it was, the
median and the total. Then the same pairs three at a time, as gates over three models, eight
gates at once in eight threads (a bench of concurrency 8): whether any verdict differs, and the
slowest gate's wall time, waiting for the others included, against the executor's deadline. Saves math_agreement.json beside itself.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import statistics
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from benchmarks.harness import HERE, ROOT, machine, save_json

OUT = HERE / "perf" / "math_agreement.json"
RECORDS = ROOT / "benchmarks" / "data" / "zeroeval.records.jsonl.gz"
DOMAIN = "math-l5"
THREADS = 8  # gates at once: `stiva bench --concurrency 8`


def _pairs(limit: int | None) -> tuple[dict, list]:
    """Counts, and every pair of two models' final answers to one item (both readable)."""
    from stiva_tui.core.answers import final_answer

    items: dict[str, dict[str, str]] = defaultdict(dict)
    with gzip.open(RECORDS, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record["domain"] == DOMAIN:
                items[record["id"]][record["model"]] = record["response"]
    chosen = sorted(items)[:limit] if limit else sorted(items)
    counts = {"items": len(chosen), "answers": 0, "pairs": 0, "pairs_unreadable": 0}
    pairs = []
    for item in chosen:
        finals = {model: final_answer(text, "math") for model, text in items[item].items()}
        counts["answers"] += len(finals)
        for a, b in itertools.combinations(sorted(finals), 2):
            counts["pairs"] += 1
            if finals[a] is None or finals[b] is None:
                counts["pairs_unreadable"] += 1
            else:
                pairs.append((finals[a], finals[b]))
    return counts, pairs


def _compare(pairs: list) -> tuple[list[bool], list[float], float]:
    """Each pair's verdict and milliseconds, and the total seconds, with math-verify's cache cleared."""
    from stiva_tui.core import answers

    answers._math_equal.cache_clear()
    verdicts, times = [], []
    started = time.perf_counter()
    for a, b in pairs:
        begun = time.perf_counter()
        verdicts.append(answers.same_final(a, b))
        times.append((time.perf_counter() - begun) * 1e3)
    return verdicts, times, time.perf_counter() - started


def _gates(pairs: list, threads: int) -> tuple[list[bool], dict]:
    """The pairs three at a time (a gate over three models), `threads` gates at once as a bench
    of that concurrency runs them: each pair's verdict, and the slowest gate's wall time (waiting
    for the other threads included) against the executor's deadline."""
    from stiva_tui.core import answers
    from stiva_tui.engine.executor import AGREEMENT_DEADLINE_S

    answers._math_equal.cache_clear()
    gates = [pairs[i : i + 3] for i in range(0, len(pairs), 3)]

    def gate(chunk: list) -> tuple[list[bool], float]:
        begun = time.perf_counter()
        verdicts = [answers.same_final(a, b) for a, b in chunk]
        return verdicts, time.perf_counter() - begun

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        done = list(pool.map(gate, gates))
    walls = [wall for _, wall in done]
    return [v for verdicts, _ in done for v in verdicts], {
        "threads": threads,
        "gates": len(gates),
        "total_s": round(time.perf_counter() - started, 2),
        "slowest_gate_ms": round(max(walls) * 1e3, 1),
        "deadline_s": AGREEMENT_DEADLINE_S,
        "gates_past_deadline": sum(wall > AGREEMENT_DEADLINE_S for wall in walls),
    }


def _summary(pairs: list, verdicts: list[bool], times: list[float], total: float) -> dict:
    seen: set[tuple[str, str]] = set()
    math_times = []  # the first comparison of each distinct pair that reaches math-verify (later ones are cached)
    for (a, b), spent in zip(pairs, times):
        key = (min(a.key, b.key), max(a.key, b.key))
        if "math" in (a.form, b.form) and a.key != b.key and key not in seen:
            seen.add(key)
            math_times.append(spent)
    slowest = max(range(len(times)), key=times.__getitem__) if times else None
    return {
        "agree": sum(verdicts),
        "total_s": round(total, 2),
        "math_verify_median_ms": round(statistics.median(math_times), 2) if math_times else None,
        "slowest_ms": round(times[slowest], 1) if slowest is not None else None,
        "slowest_pair": [pairs[slowest][0].key, pairs[slowest][1].key] if slowest is not None else None,
        "over_1s": sum(t > 1000 for t in times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=None, help="only the first N items (by id)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    from stiva_tui.core.answers import math_equal

    math_equal("\\frac{1}{2}", "0.5")  # math-verify imported and warmed: not timed
    counts, pairs = _pairs(args.items)
    math_pairs = [(a, b) for a, b in pairs if "math" in (a.form, b.form) and a.key != b.key]
    counts["pairs_through_math_verify"] = len(math_pairs)
    counts["distinct_through_math_verify"] = len({tuple(sorted((a.key, b.key))) for a, b in math_pairs})
    print(counts)
    main_verdicts, main_times, main_total = _compare(pairs)
    with ThreadPoolExecutor(max_workers=1) as worker:
        thread_verdicts, thread_times, thread_total = worker.submit(_compare, pairs).result()
    gate_verdicts, gates = _gates(pairs, THREADS)
    differ = [i for i, (x, y) in enumerate(zip(main_verdicts, thread_verdicts)) if x != y]
    differ_concurrent = sum(x != y for x, y in zip(main_verdicts, gate_verdicts))
    figures = {
        "what": __doc__.splitlines()[0],
        "machine": machine(),
        "records": str(RECORDS.relative_to(ROOT)),
        "domain": DOMAIN,
        "kind": "math",
        **counts,
        "pairs_differ": len(differ),
        "differing_pairs": [[pairs[i][0].key, pairs[i][1].key, main_verdicts[i]] for i in differ[:10]],
        "main_thread": _summary(pairs, main_verdicts, main_times, main_total),
        "worker_thread": _summary(pairs, thread_verdicts, thread_times, thread_total),
        "pairs_differ_concurrent": differ_concurrent,
        "concurrent_gates": gates,
    }
    print(json.dumps({k: v for k, v in figures.items() if k != "machine"}, indent=1))
    if not args.no_save:
        print(save_json(OUT, figures))


if __name__ == "__main__":
    main()
