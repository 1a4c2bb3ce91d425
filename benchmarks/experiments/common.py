"""What the learning experiments share: the product commands they run on the simulated pool and the
built-in `skills` suite, each argument list built here once (`harness.cli_args`), and what they read
back from the run's STIVA_HOME.

    train_args("grpo", adapter, steps, group=4, shuffle_pool=True)   # stiva train grpo skills ...
    train_args("graded", adapter, steps, graded_seeds=8)             # stiva train graded skills ...
    bench_args("heldout", "conductor,moa,direct:*")                  # stiva bench skills ...
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness import cli_args, stiva

SUITE = "skills"


def train_args(method: str, adapter: Path, steps: int, **options: object) -> list[str]:
    """`stiva train METHOD skills` (grpo or graded) on the train split of the simulated pool: the
    embedded model, LoRA on every linear layer, one checkpoint at the end, the summary as JSON.
    `options` add to these or replace them (`pool="sim:3"`, `lora_r=8`, `config=FILE`)."""
    defaults: dict[str, object] = {
        "pool": "sim",
        "split": "train",
        "base": "embedded",
        "out": adapter,
        "steps": steps,
        "lora_targets": "all",
        "save_every": steps,
        "json": True,
    }
    return cli_args("train", method, SUITE, **(defaults | options))


def bench_args(split: str, systems: str, **options: object) -> list[str]:
    """`stiva bench skills` of `systems` on a split of the simulated pool, 4 at once, as JSON."""
    defaults: dict[str, object] = {"pool": "sim", "split": split, "concurrency": 4, "json": True}
    return cli_args("bench", SUITE, **(defaults | options), systems=systems)


def train(env: dict, method: str, adapter: Path, steps: int, *, what: str, **options: object) -> dict:
    """Run `stiva train METHOD` (train_args) and return its summary; exits the script if it fails."""
    done = stiva(*train_args(method, adapter, steps, **options), env=env, what=what, timeout=None)
    return json.loads(done.stdout)


def bench(env: dict, split: str, systems: str, *, what: str = "bench", **options: object) -> dict:
    """Run `stiva bench` (bench_args) and return its report; exits the script if it fails."""
    return json.loads(stiva(*bench_args(split, systems, **options), env=env, what=what, timeout=None).stdout)


def train_log(adapter: Path) -> list[dict]:
    """The adapter's train_log.jsonl, one row a step."""
    return [json.loads(line) for line in (adapter / "train_log.jsonl").read_text().splitlines() if line.strip()]


def graded_accuracy(home: Path, bench_ids: list[str]) -> dict[str, float | None]:
    """Per system of the graded benches `stiva train graded` made (the adapter's manifest names
    them), its accuracy as the bench report gives it, the mean over the benches (one a sim seed)."""
    from stiva_tui.bench.report import system_row
    from stiva_tui.store import Store

    per_system: dict[str, list[float]] = {}
    with Store.open(home / "data" / "stiva.db", reads_only=True) as store:
        for bench_id in bench_ids:
            by_system: dict[str, list] = {}
            for record in store.bench_items(bench_id):
                by_system.setdefault(record.system, []).append(record)
            for system, records in sorted(by_system.items()):
                accuracy = system_row(system, records).accuracy
                if accuracy is not None:
                    per_system.setdefault(system, []).append(accuracy)
    return {system: mean(values) for system, values in per_system.items()}


def mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None
