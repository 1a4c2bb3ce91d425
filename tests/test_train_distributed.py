"""`stiva train` as data-parallel processes (torchrun, as `accelerate launch` runs it) on the CPU
with gloo: GRPO and graded DPO on the simulated pool, two processes, the tiny random model.

What must hold: one summary on stdout (the main process's), one log line per step (not one per
process), both processes ending with the same adapter (each process's fingerprint of its LoRA
weights, in distributed.json, equal to that of the adapter file saved), and graded DPO's grading
bench run once (by the main process; before, the second process found it locked and failed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.model_builders import build_random_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_random_model(tmp_path_factory.mktemp("tiny") / "model", "tiny", seed=0)


@pytest.fixture
def sim_home(tmp_path):
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text("[sim]\nlatency_scale = 0.0\n")
    return home


def _suite(tmp_path, items: int = 2):
    """The first arithmetic questions of the skills suite, word for word (the simulated pool answers
    only the questions of its suites)."""
    from stiva_tui.evals.loaders import load_suite

    chosen = [i for i in load_suite("skills").items if i.grader == "numeric"][:items]
    suite = tmp_path / "s.jsonl"
    rows = [{"id": i.id, "question": i.question, "answer": i.answer, "grader": i.grader} for i in chosen]
    suite.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return suite


def _two_processes(home, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """`torchrun --standalone --nproc_per_node 2 -m stiva_tui.cli --pool sim train ARGS` (a free port)."""
    env = {**os.environ, "STIVA_HOME": str(home), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    started = time.monotonic()
    done = subprocess.run(
        [*command, "-m", "stiva_tui.cli", "--pool", "sim", "train", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    return done, time.monotonic() - started


def _check_agreed(out) -> None:
    """Both processes' adapters are the same, and are the one saved."""
    from safetensors.torch import load_file

    from stiva_tui.train.common import adapter_fingerprint

    record = json.loads((out / "distributed.json").read_text())
    assert record["processes"] == 2
    fingerprints = record["adapter_sha256"]
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1], fingerprints
    assert adapter_fingerprint(load_file(str(out / "adapter_model.safetensors"))) == fingerprints[0]


def test_grpo_on_two_processes_logs_each_step_once_and_agrees_on_the_adapter(tiny_model, sim_home, tmp_path):
    out = tmp_path / "adapter"
    done, seconds = _two_processes(
        sim_home,
        "grpo",
        str(_suite(tmp_path)),
        "--base",
        str(tiny_model),
        "--out",
        str(out),
        "--steps",
        "2",
        "--group",
        "2",
        "--batch",
        "1",
        "--plan-steps",
        "1",
        "--subtask-chars",
        "20",
        "--save-every",
        "1",
        "--json",
    )
    print(f"grpo on two processes: {seconds:.1f} s")
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout)  # exactly one JSON object: the main process's
    assert summary["steps"] == 2 and summary["adapter"] == str(out)
    assert summary["cost_usd"] > 0  # both processes' rollouts, summed
    steps = [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2], steps
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if p.name.startswith("checkpoint-")) == [
        "checkpoint-1",
        "checkpoint-2",
    ]
    _check_agreed(out)
    # each process keeps its own spend (written as it goes), so a resumed training's budget counts both
    assert (out / "spend.json").exists() and (out / "spend.rank1.json").exists()
    assert "find_unused_parameters" not in done.stderr  # no DDP chatter


SURE_AND_NEVER = """[sim]
latency_scale = 0.0

[[sim.models]]
name = "sure"
other = 1.0

[[sim.models]]
name = "never"
other = 0.0
"""


def test_graded_dpo_on_two_processes_grades_once_and_agrees_on_the_adapter(tiny_model, sim_home, tmp_path):
    # one model always right, one never: every item gives a graded pair
    (sim_home / "config" / "config.toml").write_text(SURE_AND_NEVER)
    out = tmp_path / "adapter"
    done, seconds = _two_processes(
        sim_home,
        "graded",
        str(_suite(tmp_path, items=4)),
        "--base",
        str(tiny_model),
        "--out",
        str(out),
        "--steps",
        "2",
        "--batch",
        "2",
        "--plan-steps",
        "1",
        "--subtask-chars",
        "20",
        "--save-every",
        "1",
        "--json",
    )
    print(f"graded dpo on two processes: {seconds:.1f} s")
    assert done.returncode == 0, done.stderr[-4000:]
    assert "already running" not in done.stderr
    summary = json.loads(done.stdout)
    assert summary["steps"] == 2 and summary["graded_pairs"] > 0
    steps = [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2], steps
    _check_agreed(out)
