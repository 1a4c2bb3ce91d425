"""The `stiva` command as a package of commands (stiva_tui/cli/): `stiva train`'s methods, each
taking only its own options; the spellings from before them; the options checked in one place
over the trainers' own defaults; the one signal handler; `python -m stiva_tui.cli`."""

from __future__ import annotations

import ast
import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stiva_tui.cli import parse_args
from tests.support.cli import run_stiva

PACKAGE = Path(__file__).resolve().parent.parent / "stiva_tui"
BASE = ["--base", "embedded", "--out", "adapter"]


def run(capsys, *argv: str) -> tuple[int, str]:
    """`stiva ARGV` in this process (`run_stiva`), for what fails before any model loads: (exit code, stderr)."""
    result = run_stiva(*argv)
    return result.returncode, result.stderr


def parse_error(capsys, *argv: str) -> str | None:
    try:
        parse_args(list(argv))
    except SystemExit as exc:
        assert exc.code == 2
        return capsys.readouterr().err.strip().splitlines()[-1]
    return None


# --- the methods ---------------------------------------------------------------------------------


def test_each_train_method_takes_only_its_own_options(capsys):
    grpo_with_beta = parse_error(capsys, "train", "grpo", "skills", *BASE, "--beta", "0.2")
    assert "unrecognized arguments: --beta 0.2" in grpo_with_beta
    assert "unrecognized arguments: --group 8" in parse_error(capsys, "train", "dpo", *BASE, "--group", "8")
    assert "unrecognized arguments: skills" in parse_error(capsys, "train", "dpo", "skills", *BASE)
    assert "--graded-seeds" in parse_error(capsys, "train", "dpo", *BASE, "--graded-seeds", "2")
    assert "required: SUITE" in parse_error(capsys, "train", "graded", *BASE)
    assert "required: METHOD" in parse_error(capsys, "train")
    graded = parse_args(
        [
            "--pool",
            "sim",
            "train",
            "graded",
            "skills",
            *BASE,
            "--graded-seeds",
            "2",
            "--bench",
            "b1",
            "--sft-weight",
            "1",
        ]
    )
    assert (graded.train_method, graded.suite, graded.seeds, graded.benches, graded.pool) == (
        "graded",
        "skills",
        2,
        ["b1"],
        "sim",
    )


@pytest.mark.parametrize(
    "old, new",
    [
        (["train", "skills", *BASE, "--steps", "3"], ["train", "grpo", "skills", *BASE, "--steps", "3"]),
        (
            ["--pool", "sim", "train", "--from-votes", "--bench", "b1", "--bench-pairs", "best", *BASE],
            ["--pool", "sim", "train", "dpo", "--bench", "b1", "--bench-pairs", "best", *BASE],
        ),
        (
            ["train", "skills", "--split", "train", "--method", "graded-dpo", "--graded-seeds", "2", *BASE],
            ["train", "graded", "skills", "--split", "train", "--graded-seeds", "2", *BASE],
        ),
        (
            ["train", "skills", "--method=grpo", "--pool", "sim", *BASE],
            ["train", "grpo", "skills", "--pool", "sim", *BASE],
        ),
    ],
)
def test_the_spellings_before_the_methods_still_work(old, new):
    assert vars(parse_args(old)) == vars(parse_args(new))


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["skills", "--beta", "0.2"],
            "--beta is DPO's: it goes with --from-votes or --method graded-dpo (now stiva train "
            "dpo or stiva train graded SUITE)",
        ),
        (["skills", "--graded-seeds", "2"], "(stiva train graded SUITE ...)"),
        (["skills", "--from-votes"], "(stiva train grpo SUITE ...)"),
        ([], "(stiva train dpo ..., was --from-votes)"),
        (["skills", "--method", "posh"], "--method takes grpo or graded-dpo, not 'posh'"),
    ],
)
def test_an_old_spelling_that_mixes_methods_says_the_new_one_in_one_line(capsys, argv, said):
    code, err = run(capsys, "train", *argv, *BASE)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_the_docs_spelling_of_a_method_parses_with_its_common_options_anywhere():
    args = parse_args(["train", "--config", "c.toml", "dpo", *BASE, "--pool", "sim"])
    assert (args.command, args.train_method, args.config, args.pool) == ("train", "dpo", "c.toml", "sim")


# --- the options, checked once, over the trainers' defaults ------------------------------------------


def test_options_not_given_are_the_trainers_own_defaults():
    from stiva_tui.cli.train import Dpo, Graded, Grpo
    from stiva_tui.train.dpo import VoteTrainOptions
    from stiva_tui.train.trainer import TrainOptions

    out = Path("adapter")
    assert Grpo.from_args(parse_args(["train", "grpo", "skills", *BASE])).options == TrainOptions(
        base="embedded", out=out
    )
    # DPO's batch stays the command's 2; graded DPO picks each item's best system and shuffles the
    # pool's order by default
    assert Dpo.from_args(parse_args(["train", "dpo", *BASE])).options == VoteTrainOptions(
        base="embedded", out=out, batch=2
    )
    assert Graded.from_args(parse_args(["train", "graded", "skills", *BASE])).options == VoteTrainOptions(
        base="embedded", out=out, batch=2, bench_pairs="best", shuffle_pool=True
    )
    given = Dpo.from_args(
        parse_args(
            [
                "train",
                "dpo",
                *BASE,
                "--bench",
                "b1",
                "--prefer-levels",
                "best, cheap",
                "--plan-steps",
                "1",
                "--beta",
                "0.3",
            ]
        )
    ).options
    assert (given.benches, given.preferences, given.max_steps_per_plan, given.beta) == (
        ("b1",),
        ("best", "cheap"),
        1,
        0.3,
    )


@pytest.mark.parametrize(
    "argv, said",
    [
        (["grpo", "skills", "--temperature", "6"], "--temperature must be above 0 and at most 5 (plans are sampled)"),
        (["grpo", "skills", "--save-every", "0"], "--save-every must be at least 1"),
        (["dpo", "--plan-steps", "0"], "--plan-steps and --subtask-chars must be at least 1"),
        (["dpo", "--beta", "0"], "--beta must be above 0"),
        (["graded", "skills", "--sft-weight", "-1"], "--sft-weight must be 0 or more"),
        (["dpo", "--bench-pairs", "best"], "--bench-pairs says which pairs the graded benches give: add --bench ID"),
    ],
)
def test_each_methods_values_are_checked_before_anything_runs(capsys, argv, said):
    from stiva_tui.cli.common import UsageError
    from stiva_tui.cli.train import OPTIONS

    args = parse_args(["train", *argv, *BASE])
    with pytest.raises(UsageError, match=re.escape(said)):
        OPTIONS[args.train_method].from_args(args)
    code, err = run(capsys, "train", *argv, *BASE)
    assert code == 2 and err == f"stiva: {said}\n"


# --- signals ---------------------------------------------------------------------------------------


def _signal_calls(path: Path) -> list[int]:
    calls = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("signal", "add_signal_handler")
        ):
            calls.append(node.lineno)
    return calls


def test_the_command_line_answers_signals_in_one_place():
    modules = [*PACKAGE.glob("cli*.py"), *PACKAGE.glob("cli/*.py")]
    handling = sorted(p.relative_to(PACKAGE).as_posix() for p in modules if _signal_calls(p))
    assert handling == ["cli/common.py"]


def test_a_training_stops_after_its_step_on_ctrl_c_and_leaves_on_the_second(monkeypatch):
    from rich.console import Console

    from stiva_tui.cli import common

    left: list[int] = []
    monkeypatch.setattr(common.os, "_exit", left.append)
    before = signal.getsignal(signal.SIGINT)
    said = io.StringIO()
    with common.stop_after_step(Console(file=said)) as should_stop:
        assert should_stop() is None
        os.kill(os.getpid(), signal.SIGINT)
        assert should_stop() == "cancelled" and left == []
        assert "stopping after this step" in said.getvalue()
        os.kill(os.getpid(), signal.SIGINT)
        assert left == [common.EXIT_CANCELLED]
    assert signal.getsignal(signal.SIGINT) is before


# --- python -m -------------------------------------------------------------------------------------


def test_python_dash_m_runs_the_command_without_loading_torch():
    code = (
        "import runpy, sys\n"
        "sys.argv = ['stiva', 'train', 'dpo', '--help']\n"
        "try:\n    runpy.run_module('stiva_tui.cli', run_name='__main__')\n"
        "except SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
        "heavy = [m for m in ('torch', 'textual', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "usage: stiva train dpo" in result.stdout and "--sft-weight" in result.stdout
