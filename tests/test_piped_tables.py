"""Tables that fit (issue 52, part 5): piped at 80 columns (COLUMNS=80, not a terminal), no line is
wider than 80 and no row's name is cut with "…": `stiva models` kept no right border and cut its
descriptions, `stiva bench` showed every model as `direct…` (and `stiva bench offline` its
conductor as `conduct…`), `stiva history` its dates as `2026-…`. What cannot fit is folded or
shortened (a model's name without its provider, the date without its year), never cut."""

from __future__ import annotations

import json
import os
import re

import pytest

from stiva_tui.bench.report import build_report
from stiva_tui.store.records import BenchItemRecord
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply
from tests.support.pool import write_lab_config
from tests.test_cli import PLAN

LONG = ("anthropic/claude-3-5-sonnet-20241022", "openai/gpt-4o-2024-08-06")


def _piped(width: int = 80) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "LINES"}
    return {**environment, "COLUMNS": str(width)}


def _fits(text: str, width: int = 80) -> None:
    wide = [line for line in text.splitlines() if len(line) > width]
    assert not wide, "\n".join(wide)


@pytest.fixture
def config(fake, tmp_path):
    """cond plans on w1 and w2 (PLAN); two more models with long ids, as catalogs name them."""
    fake.default("cond", Reply(PLAN, usage=(50, 20)))
    for name in ("w1", "w2", *LONG):
        fake.default(name, Reply("The answer is 4.", usage=(10, 3)))
    models = [
        ("cond", 1.0, 1.0),
        ("w1", 2.0, 4.0),
        "w2",
        *({"id": m, "price_in": 3.0, "price_out": 15.0} for m in LONG),
    ]
    return write_lab_config(tmp_path / "c.toml", fake.base_url, models)


def test_models_piped_at_80_columns_keeps_every_border_id_and_word(stiva_home):
    listing = run_stiva("models", "--no-discovery", "--json", env=_piped())
    shown = run_stiva("models", "--no-discovery", env=_piped())
    assert shown.returncode == 0, shown.stderr
    _fits(shown.stdout)
    assert "…" not in shown.stdout
    table = [line for line in shown.stdout.splitlines() if line.startswith(("│", "┃"))]
    assert table and all(line.endswith(("│", "┃")) for line in table)  # the right border, on every row
    words = shown.stdout.split()
    models = json.loads(listing.stdout)["models"]
    for model in models:
        assert model["id"] in words, model["id"]  # whole, on a line of its own
        for word in model["description"].split():
            assert word in shown.stdout, (model["id"], word)  # no word of a description lost
    # the footer: the conductor's line and where keys are read, every word of them
    footer = " ".join(shown.stdout.split("┘")[-1].split())
    assert footer.startswith("conductor: ") and "keys: read from" in footer and "a key saved now goes to" in footer
    # where there is room, the description has a column of its own again
    wide = run_stiva("models", "--no-discovery", env=_piped(200))
    assert "description" in wide.stdout.splitlines()[2]


def _system_cells(table: str) -> list[str]:
    """The system column's text, row by row, folded lines joined (the narrow table: the system,
    then numbers; a line with nothing after the system's part continues the row above)."""
    rows: list[str] = []
    body = table.split("─\n", 1)[1]
    for line in body.splitlines():
        if not line.strip():
            break
        started = re.match(r"^(\S+)\s{2,}[\d—]", line)
        if started:
            rows.append(started.group(1))
        elif rows and len(line.split()) == 1:
            rows[-1] += line.strip()
        else:
            break
    return rows


def test_bench_piped_at_80_columns_names_every_system_whole_or_short(config, stiva_home, tmp_path):
    suite = tmp_path / "s.jsonl"
    suite.write_text(
        "\n".join(
            json.dumps({"id": f"q{i}", "question": f"What is {i} + 2?", "answer": str(i + 2), "grader": "numeric"})
            for i in range(2)
        )
    )
    systems = ",".join(["conductor", *(f"direct:{m}" for m in ("w1", "w2", *LONG)), "oracle", "random"])
    bench = run_stiva("bench", str(suite), "--systems", systems, "--config", str(config), env=_piped())
    assert bench.returncode == 0, bench.stderr
    _fits(bench.stdout)
    assert "…" not in bench.stdout
    report = json.loads(
        run_stiva("bench", str(suite), "--systems", systems, "--config", str(config), "--json", env=_piped()).stdout
    )
    from stiva_tui.bench.names import short_names

    names = [row["system"] for row in report["systems"]]
    assert f"direct:{LONG[0]}" in names and "conductor" in names
    short = short_names(names)
    assert short[f"direct:{LONG[0]}"] == "claude-3-5-sonnet-20241022"  # the provider and direct: left out
    assert _system_cells(bench.stdout) == [short[name] for name in names]
    assert "a model alone is its direct: system" in " ".join(bench.stdout.split())


def test_bench_offline_piped_at_80_columns_shows_its_conductor_whole(config, stiva_home):
    """`stiva bench offline` (the built-in suite; here on the lab's conductor, not the 270M)."""
    bench = run_stiva("bench", "offline", "--limit", "2", "--config", str(config), env=_piped())
    assert bench.returncode == 0, bench.stderr
    _fits(bench.stdout)
    assert "…" not in bench.stdout and _system_cells(bench.stdout) == ["conductor"]


def test_a_narrow_table_folds_and_shortens_long_system_names_and_never_cuts_them(capsys, monkeypatch):
    """The names the lead's vote and cascade systems have (`vote:A+B+C`, `cascade:A+B>C`): the
    providers go, the kind and the models that tell them apart stay; what is still too long folds
    after a `+` or a `>`."""
    from stiva_tui.bench.names import fold, short_names
    from stiva_tui.cli.bench import print_table

    systems = [
        "vote:openai/gpt-4o-2024-08-06+anthropic/claude-3-5-sonnet-20241022+google/gemini-1.5-pro-002",
        "cascade:openai/gpt-4o-mini+anthropic/claude-3-5-haiku-20241022>openai/gpt-4o-2024-08-06",
        "direct:openai/gpt-4o-2024-08-06",
        "direct:azure/gpt-4o-2024-08-06",  # the same model at another provider: both keep theirs
        "router:/tmp/some/where/zeroeval-router@cheap",
        "oracle",
    ]
    records = [
        BenchItemRecord(
            system=s, item_id="q1", status="graded", correct=True, answer="4", extracted="4", cost_usd=0.0012
        )
        for s in systems
    ]
    report = build_report("zeroeval", "3f2a9c0d1e2f", systems, ["q1"], records)
    monkeypatch.setenv("COLUMNS", "80")
    print_table(report)
    out = capsys.readouterr().out
    _fits(out)
    assert "…" not in out
    short = short_names(systems)
    assert short[systems[0]] == "vote:gpt-4o-2024-08-06+claude-3-5-sonnet-20241022+gemini-1.5-pro-002"
    assert short[systems[1]] == "cascade:gpt-4o-mini+claude-3-5-haiku-20241022>gpt-4o-2024-08-06"
    assert (short[systems[2]], short[systems[3]]) == ("openai/gpt-4o-2024-08-06", "azure/gpt-4o-2024-08-06")
    assert short[systems[4]] == "router:zeroeval-router@cheap"
    nested = "cascade:openai/gpt-4o-mini+google/gemini-flash>vote:openai/gpt-4o+anthropic/claude-sonnet-4+x/y"
    assert short_names([nested])[nested] == "cascade:gpt-4o-mini+gemini-flash>vote:gpt-4o+claude-sonnet-4+y"
    assert _system_cells(out) == [short[s] for s in systems]
    assert fold(short[systems[0]], 24) == [
        "vote:gpt-4o-2024-08-06+",
        "claude-3-5-sonnet-",
        "20241022+",
        "gemini-1.5-pro-002",
    ]


def test_history_piped_at_80_columns_keeps_the_id_and_the_date_whole(config, stiva_home):
    for question in ("What is the capital of France?", "And how many people live there, give or take?"):
        asked = run_stiva("ask", question, "--config", str(config), "--json")
        assert asked.returncode == 0, asked.stderr
    runs = json.loads(run_stiva("history", "--json").stdout)
    shown = run_stiva("history", env=_piped())
    assert shown.returncode == 0, shown.stderr
    _fits(shown.stdout)
    lines = shown.stdout.splitlines()
    for run, line in zip(runs, lines[1:]):
        # the whole id, then the start as month-day hour:minute, uncut
        start = run["started_at"][5:16].replace("T", " ")
        assert line.startswith(f"{run['id']}  {start}  "), line
    assert "…" not in "".join(line[:50] for line in lines)
    assert "tokens, source and cost left out to fit 80 columns" in shown.stdout
    # where there is room, every column and the year
    wide = run_stiva("history", env=_piped(200))
    assert wide.stdout.splitlines()[0].split() == ["id", "started", "source", "status", "tokens", "cost", "question"]
    assert runs[0]["started_at"][:16].replace("T", " ") in wide.stdout

    # the conversations too: the id (a uuid) and the date whole, the runs column no more dropped unsaid
    found = json.loads(run_stiva("history", "conversations", "--json").stdout)
    shown = run_stiva("history", "conversations", env=_piped())
    _fits(shown.stdout)
    for conversation, line in zip(found, shown.stdout.splitlines()[1:]):
        start = conversation["updated_at"][5:16].replace("T", " ")
        assert line.startswith(f"{conversation['id']}  {start}  "), line
    assert "kind and runs left out to fit 80 columns" in shown.stdout
    wide = run_stiva("history", "conversations", env=_piped(200))
    assert wide.stdout.splitlines()[0].split() == ["id", "updated", "kind", "runs", "status", "title"]
