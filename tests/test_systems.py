"""One grammar of system names (runtime/systems.py): `stiva ask --baseline`, a compare column and
`stiva bench --systems` accept and refuse the same names, and read each one as the same system.

Each row is run through the three front ends as a user reaches them: `stiva ask` in-process through
the CLI's entry point on a real HTTP provider (accepted names are asked for real and their recorded
trace is read), the compare screen's reading of a column (`column_system` on the runtime's pool),
and the bench's (`parse_systems` as `stiva bench` calls it, then `resolve_systems` as its runner
does, on the same pool; refused names through `stiva bench` itself). The one difference is written
in the table: a compare column also names a pool model by its bare id."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from stiva_tui.bench.systems import resolve_systems
from stiva_tui.config import load_config
from stiva_tui.runtime import Runtime
from stiva_tui.runtime.systems import System, SystemNameError, column_system, parse_systems
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply

PLAN = 'One call.\nmodel_id = [1]\nsubtasks = ["Answer it."]\naccess_list = [[]]'
# A bench of two direct systems besides the name under test, so that oracle and random can be measured.
BESIDE = "direct:w2,direct:w3"

# (name, the system each front end records its runs as), accepted by all three
ACCEPTED = [
    ("conductor", "conductor"),
    ("conductor-mini", "conductor-mini"),
    ("conductor:base", "conductor:base"),
    ("conductor@cheap", "conductor"),
    ("conductor-mini@0.4", "conductor-mini"),
    ("moa", "moa"),
    ("self-moa", "self-moa"),
    ("self-moa:w1", "self-moa"),
    ("direct:w1", "direct:w1"),
    (" direct:w1 ", "direct:w1"),
    ("chain:w1>w2", "chain:w1>w2"),
    ("chain:w1 > w1", "chain:w1>w1"),
]
# (name, what the one-line refusal says), refused by all three with the same message
REFUSED = [
    ("nope", "unknown system 'nope'"),
    ("direct:", "unknown system 'direct:'"),
    ("conductor:tuned", "unknown system 'conductor:tuned'"),
    ("w1:base", "unknown system 'w1:base'"),
    ("chain:w1", "a chain names two or more models"),
    ("chain:w1>zz", "zz is not in the pool"),
    ("moa@cheap", "only a conductor system"),
    ("conductor@cheapest", "conductor@cheapest: preference"),
    ("adapter:/no/such/folder", "holds no LoRA adapter"),
]
# measured by a bench only: the bench accepts them, ask and compare refuse them with one message
BENCH_ONLY = ["direct:*", "oracle", "random"]
# a pool model by its bare id: a compare column's name only
COMPARE_ONLY = [("w1", "direct:w1")]


@pytest.fixture
def setup(fake, tmp_path, stiva_home):
    fake.default("cond", Reply(PLAN, usage=(20, 10)))
    for name in ("w1", "w2", "w3"):
        fake.default(name, Reply(f"{name} says 4.", usage=(5, 3)))
    models = "".join(
        f'[[models]]\nid = "{n}"\nprovider = "lab"\nmodel = "{n}"\nprice_in = 1.0\nprice_out = {p}\n'
        for n, p in (("cond", 1.0), ("w1", 1.0), ("w2", 2.0), ("w3", 3.0))
    )
    config = tmp_path / "c.toml"
    config.write_text(f"""catalog = false
embedded_worker = false
[conductor]
backend = "remote"
model = "cond"
[discovery]
enabled = false
[workers]
retries = 0
[[providers]]
name = "lab"
base_url = "{fake.base_url}"
{models}""")
    suite = tmp_path / "s.jsonl"
    suite.write_text(json.dumps({"id": "q", "question": "What is 2 + 2?", "answer": "4", "grader": "numeric"}) + "\n")
    pool = asyncio.run(_pool(config))
    return config, suite, pool


async def _pool(config: Path):
    runtime = await Runtime.create(load_config(config), discover=False)
    try:
        return list(runtime.models), runtime.config.moa.aggregator
    finally:
        await runtime.aclose()


def stiva(capsys, *args: str) -> tuple[int, str, str]:
    """The `stiva` command in this process (`run_stiva`): (exit code, stdout, stderr)."""
    result = run_stiva(*args)
    return result.returncode, result.stdout, result.stderr


def on_bench(name: str, pool) -> System:
    models, aggregator = pool
    resolved = resolve_systems(parse_systems([BESIDE, name]), models, aggregator)
    return resolved[-1]


def on_compare(name: str, pool) -> System:
    models, aggregator = pool
    return column_system(name, models, aggregator)


def refusal(capsys, command: list[str]) -> str:
    code, out, err = stiva(capsys, *command)
    assert code == 2 and out == "", (command, code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stiva: "), err
    return lines[0].removeprefix("stiva: ")


@pytest.mark.parametrize("name, recorded", ACCEPTED, ids=[n for n, _ in ACCEPTED])
def test_a_name_every_front_end_accepts_runs_as_the_same_system(setup, capsys, name, recorded):
    config, _, pool = setup
    bench, compare = on_bench(name, pool), on_compare(name, pool)
    assert compare == bench  # the same name, mode and run options
    assert bench.mode is not None and bench.mode.system == recorded
    code, out, err = stiva(capsys, "ask", "What is 2 + 2?", "--baseline", name, "--config", str(config), "--json")
    assert code == 0, err
    trace = json.loads(out)
    assert trace["status"] == "finished" and trace["system"] == recorded
    if "preference" in bench.options:  # conductor@cheap plans under that preference, as the bench's would
        assert trace["rounds"][0]["preference"] == bench.options["preference"]


@pytest.mark.parametrize("name, message", REFUSED, ids=[n for n, _ in REFUSED])
def test_a_name_one_front_end_refuses_every_front_end_refuses_in_the_same_words(setup, capsys, name, message):
    config, suite, pool = setup
    with pytest.raises(SystemNameError) as on_the_bench:
        on_bench(name, pool)
    with pytest.raises(SystemNameError) as in_compare:
        on_compare(name, pool)
    said = str(on_the_bench.value)
    assert message in said and str(in_compare.value) == said
    assert refusal(capsys, ["ask", "Q", "--baseline", name, "--config", str(config)]) == said
    bench_said = refusal(capsys, ["bench", str(suite), "--systems", BESIDE, "--systems", name, "--config", str(config)])
    assert said in bench_said  # the runner's refusals (a chain off the pool) name the bench's resolving


@pytest.mark.parametrize("name", BENCH_ONLY)
def test_what_only_a_bench_measures_ask_and_compare_refuse_alike(setup, capsys, name):
    config, _, pool = setup
    assert on_bench(name, pool).name.startswith(("direct:", name))
    with pytest.raises(SystemNameError) as in_compare:
        on_compare(name, pool)
    said = str(in_compare.value)
    assert "only stiva bench measures it" in said
    assert refusal(capsys, ["ask", "Q", "--baseline", name, "--config", str(config)]) == said


@pytest.mark.parametrize("name, recorded", COMPARE_ONLY)
def test_a_compare_column_names_a_pool_model_by_its_id_and_only_there(setup, capsys, name, recorded):
    config, _, pool = setup
    assert on_compare(name, pool).mode.system == recorded
    with pytest.raises(SystemNameError, match=f"unknown system {name!r}") as on_the_bench:
        on_bench(name, pool)
    assert refusal(capsys, ["ask", "Q", "--baseline", name, "--config", str(config)]) == str(on_the_bench.value)


def test_the_error_of_a_bad_name_does_not_shadow_a_builtin():
    import builtins

    import stiva_tui.bench.systems as bench_systems
    import stiva_tui.runtime.systems as runtime_systems

    for module in (bench_systems, runtime_systems):
        assert not any(
            getattr(module, name, None) is not getattr(builtins, name)
            for name in dir(builtins)
            if not name.startswith("_") and hasattr(module, name)
        ), module
    assert issubclass(SystemNameError, ValueError)


def test_a_model_id_with_an_at_sign_is_a_model_not_a_preference():
    """ZeroEval's "Llama-3.1-405B-Inst@sambanova": the systems that name models keep the "@" in the
    id (the graded trainer's direct:replay:... systems failed on it); a conductor's "@" is still a
    preference, and a bad one is still refused."""
    [direct, self_moa, chain, conductor] = parse_systems(
        ["direct:replay:Llama-3.1-405B-Inst@sambanova", "self-moa:m@host", "chain:a@x>b", "conductor@cheap"]
    )
    assert direct.mode.model == "replay:Llama-3.1-405B-Inst@sambanova"
    assert direct.name == "direct:replay:Llama-3.1-405B-Inst@sambanova"
    assert "m@host" in self_moa.name and chain.name == "chain:a@x>b"
    assert conductor.options == {"preference": conductor.options["preference"]} and conductor.name == "conductor@cheap"
    with pytest.raises(SystemNameError, match="preference"):
        parse_systems(["conductor@nope"])
