"""How long a one-pass router takes to decide, per question, on this machine's CPU.

    python -m benchmarks.perf.router_decision [--questions 20] [--no-save]

Trains two routers on the same small recorded pool (60 questions: sums and capitals, three
models; what the pool plants does not matter here, only the time), one per representation,
`tfidf` and `embedded` (the embedded Gemma-3 270M's forward pass), then times `Router.decide` on
held-out questions one at a time, after one warm-up: the median and the p95. Saves
router_decision.json beside itself.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import HERE, machine, save_json

OUT = HERE / "perf" / "router_decision.json"
CAPITALS = ["France", "Peru", "Japan", "Kenya", "Chile", "Spain", "Egypt", "Norway", "Canada", "India", "Brazil",
            "Italy", "Ghana", "Nepal", "Cuba", "Iran", "Laos", "Mali", "Oman", "Fiji", "Chad", "Togo", "Iraq",
            "Greece", "Poland", "Sweden", "Mexico", "Turkey", "Vietnam", "Austria"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    from stiva_tui.conductor.router import load_router
    from stiva_tui.core.preference import LEVELS
    from stiva_tui.train.router import Labels, train_router

    rng = random.Random(0)
    items, scores = [], {"math": [], "geo": [], "dear": []}
    for n in range(30):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        items.append((f"sum-{n}", f"What is {a} plus {b}? Add the two numbers."))
        items.append((f"cap-{n}", f"What is the capital city of {CAPITALS[n]}?"))
    for item_id, _ in items:
        scores["math"].append(float(item_id.startswith("sum")))
        scores["geo"].append(float(item_id.startswith("cap")))
        scores["dear"].append(1.0)
    labels = Labels(
        items, list(scores), scores, {"math": 0.001, "geo": 0.001, "dear": 0.1}, dict.fromkeys(scores, 1.0), "-"
    )
    questions = [f"What is the capital city of {c}?" for c in ("Portugal", "Chile", "Peru", "Japan", "Laos")] + [
        f"What is {rng.randint(10, 99)} plus {rng.randint(10, 99)}? Add the two numbers." for _ in range(50)
    ]
    questions = questions[: args.questions]
    figures: dict = {"what": __doc__.splitlines()[0], "questions": len(questions), "machine": machine()}
    with tempfile.TemporaryDirectory() as scratch:
        for features in ("tfidf", "embedded"):
            folder = Path(scratch) / features
            started = time.monotonic()
            summary = train_router(labels, out=folder, features=features, seed=0)
            router = load_router(folder)
            pool = [f"replay:{m}" for m in router.models]
            router.decide("warm up", pool, LEVELS["balanced"])
            times = []
            for question in questions:
                begin = time.perf_counter()
                router.decide(question, pool, LEVELS["balanced"])
                times.append(time.perf_counter() - begin)
            times.sort()
            figures[features] = {
                "decide_median_s": round(statistics.median(times), 4),
                "decide_p95_s": round(times[int(0.95 * (len(times) - 1))], 4),
                "train_s": round(time.monotonic() - started, 1),
                "parameters": summary["parameters"],
            }
            print(features, figures[features], flush=True)
    if not args.no_save:
        save_json(OUT, figures)
        print(f"saved {OUT}")


if __name__ == "__main__":
    main()
