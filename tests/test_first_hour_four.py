"""The first hour, round four (issue 58, part 5): what a new user met on a fresh clone, checked
with the real `stiva` against real HTTP providers on 127.0.0.1."""

from __future__ import annotations

import os

import pytest

from stiva_tui.store import Store
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply
from tests.test_cli import PLAN, write_config
from tests.test_votes import history_with_every_kind_of_vote, record_plan_run, session

AT_80 = {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "COLUMNS": "80"}


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.fixture
def config(fake, tmp_path):
    fake.default("cond", Reply(PLAN, usage=(50, 20)))
    fake.default("w1", Reply("the combined answer", usage=(10, 3)))
    fake.default("w2", Reply("draft two", usage=(12, 2)))
    return write_config(tmp_path / "c.toml", fake.base_url)


# --- lines within 80 columns -----------------------------------------------------------------------


def test_the_continue_hint_fits_80_columns_and_its_command_runs_as_printed(config, stiva_home):
    first = run_stiva("ask", "Remember 7.", "--config", str(config), home=stiva_home, env=AT_80)
    assert first.returncode == 0, first.stderr
    assert _widest(first.stderr) <= 80, first.stderr
    hint = [line for line in first.stderr.splitlines() if line.startswith("continue it: ")]
    assert len(hint) == 1, first.stderr
    words = hint[0].removeprefix("continue it: ").split()
    assert words[:3] == ["stiva", "ask", "--continue"] and len(words[3]) == 36, hint
    again = run_stiva("ask", "And again?", "--config", str(config), "--continue", words[3], home=stiva_home, env=AT_80)
    assert again.returncode == 0, again.stderr
    assert f"conversation {words[3]}" in again.stderr and _widest(again.stderr) <= 80


def test_stiva_votes_fits_80_columns_and_counts_one_session_as_one(stiva_home):
    with Store.open() as store:
        q = "What is 2 + 2?"
        record_plan_run(
            store, "d1", q, "direct:an-uncommonly-long-provider/a-very-long-model-name-2026", [("x", "A", ())]
        )
        record_plan_run(
            store, "d2", q, "direct:another-uncommonly-long-provider/b-very-long-model-name", [("y", "A", ())]
        )
        session(
            store,
            q,
            {
                "direct:an-uncommonly-long-provider/a-very-long-model-name-2026": "d1",
                "direct:another-uncommonly-long-provider/b-very-long-model-name": "d2",
            },
            "direct:an-uncommonly-long-provider/a-very-long-model-name-2026",
        )
    result = run_stiva("votes", home=stiva_home, env=AT_80)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1 compare session · 1 voted"), result.stdout
    assert _widest(result.stdout) <= 80, result.stdout
    assert "a-very-long-model-name-2026" in result.stdout and "b-very-long-model-name" in result.stdout


def test_stiva_votes_with_every_kind_of_vote_fits_80_and_40_columns(stiva_home):
    with Store.open() as store:
        history_with_every_kind_of_vote(store)
    for columns in (80, 40):
        result = run_stiva("votes", home=stiva_home, env={**AT_80, "COLUMNS": str(columns)})
        assert result.returncode == 0, result.stderr
        assert _widest(result.stdout) <= columns, result.stdout
        words = result.stdout.split()
        for said in ("6 compare sessions", "2 usable preference pairs", "same plan 1", "stiva train dpo"):
            assert said in " ".join(words), result.stdout
