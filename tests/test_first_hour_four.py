"""The first hour, round four (issue 58, part 5): what a new user met on a fresh clone, checked
with the real `stiva` against real HTTP providers on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stiva_tui.store import Store
from tests.support.cli import run_stiva
from tests.test_cli import answering_config
from tests.test_votes import history_with_every_kind_of_vote, record_plan_run, session


def at(columns: int = 80, **extra: str) -> dict[str, str]:
    """This test's environment (read now: conftest's STIVA_HOME and keyring), `columns` wide."""
    return {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "COLUMNS": str(columns), **extra}


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.fixture
def config(fake, tmp_path):
    return answering_config(fake, tmp_path / "c.toml")


# --- lines within 80 columns -----------------------------------------------------------------------


def test_the_continue_hint_fits_80_columns_and_its_command_runs_as_printed(config, stiva_home):
    first = run_stiva("ask", "Remember 7.", "--config", str(config), home=stiva_home, env=at())
    assert first.returncode == 0, first.stderr
    assert _widest(first.stderr) <= 80, first.stderr
    hint = [line for line in first.stderr.splitlines() if line.startswith("continue it: ")]
    assert len(hint) == 1, first.stderr
    words = hint[0].removeprefix("continue it: ").split()
    assert words[:3] == ["stiva", "ask", "--continue"] and len(words[3]) == 36, hint
    again = run_stiva("ask", "And again?", "--config", str(config), "--continue", words[3], home=stiva_home, env=at())
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
    result = run_stiva("votes", home=stiva_home, env=at())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1 compare session · 1 voted"), result.stdout
    assert _widest(result.stdout) <= 80, result.stdout
    assert "a-very-long-model-name-2026" in result.stdout and "b-very-long-model-name" in result.stdout


def test_stiva_votes_with_every_kind_of_vote_fits_80_and_40_columns(stiva_home):
    with Store.open() as store:
        history_with_every_kind_of_vote(store)
    for columns in (80, 40):
        result = run_stiva("votes", home=stiva_home, env=at(columns))
        assert result.returncode == 0, result.stderr
        assert _widest(result.stdout) <= columns, result.stdout
        words = result.stdout.split()
        for said in ("6 compare sessions", "2 usable preference pairs", "same plan 1", "stiva train dpo"):
            assert said in " ".join(words), result.stdout


# --- wordings that tell the truth ------------------------------------------------------------------


def test_a_fallback_among_free_models_is_not_called_the_priciest():
    from stiva_tui.engine.fallback import choose_fallback
    from stiva_tui.pool.embedded import embedded_pool_model
    from stiva_tui.pool.types import PoolModel

    free = [
        embedded_pool_model(),
        PoolModel(id="local/gemma-3-270m", provider="local", model="gemma-3-270m"),
        PoolModel(id="local/qwen", provider="local", model="qwen"),
    ]
    chosen = choose_fallback(free, "What is 2 + 2?")
    assert chosen.model == "local/gemma-3-270m"
    assert "priciest" not in chosen.reason and "free" in chosen.reason, chosen.reason
    priced = [*free, PoolModel(id="p/dear", provider="p", model="dear", price_in=1.0, price_out=2.0)]
    assert choose_fallback(priced, "Q").reason.startswith("fallback: p/dear, the priciest model")


def test_stiva_models_names_no_key_file_that_does_not_exist(stiva_home, monkeypatch):
    from stiva_tui import keys

    config = stiva_home / "config.toml"
    config.write_text("[discovery]\nenabled = false\n")
    no_keyring = at(300, PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
    listing = run_stiva("models", "--config", str(config), env=no_keyring)
    assert listing.returncode == 0, listing.stderr
    said = " ".join(listing.stdout.split())
    assert not keys.keys_file().exists()
    assert "read from the private file" not in said, said
    assert (
        "keys: none stored yet (no keyring works here); "
        f"a key saved now goes to the private file {keys.keys_file()} (created then)"
    ) in said, said
    assert (
        json.loads(run_stiva("models", "--json", "--config", str(config), env=no_keyring).stdout)["keys"]["read_from"]
        == []
    )
    # once a key is saved there, the file is named as where keys are read
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    keys.reset_backend()
    keys.set_key("openai", "sk-file-0000000000000000AAAA")
    assert keys.keys_file().exists()
    again = " ".join(run_stiva("models", "--config", str(config), env=no_keyring).stdout.split())
    assert f"keys: read from the private file {keys.keys_file()}" in again, again


# --- the router hint's report ----------------------------------------------------------------------


def _recorded(tmp_path: Path) -> Path:
    """40 items, two models: big (right but on every fifth, dear), small (right on the first 20, cheap)."""
    rows = []
    for index in range(40):
        question = f"What is {index} + {index}?"
        rows.append(
            {"id": f"q{index}", "question": question, "model": "big", "response": f"{2 * index}",
             "correct": index % 5 != 0, "cost_usd": 0.01}
        )  # fmt: skip
        rows.append(
            {"id": f"q{index}", "question": question, "model": "small", "response": "1",
             "correct": index < 20, "cost_usd": 0.001}
        )  # fmt: skip
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _hint(text: str, prefix: str) -> list[str]:
    """The command after `prefix` (as test_truthful_hints reads it: folded over lines that end in a
    backslash where it is too long), without its first word, `stiva`."""
    from tests.test_truthful_hints import _hint as hint

    return hint(text, prefix)


def test_the_router_hints_bench_says_one_aiq_per_system_and_the_routers_own_train_items(tmp_path, stiva_home):
    config = tmp_path / "c.toml"
    config.write_text("[discovery]\nenabled = false\n")
    imported = run_stiva("bench", "import", str(_recorded(tmp_path)), "--config", str(config), env=at(100))
    assert imported.returncode == 0, imported.stderr
    argv = _hint(imported.stdout, "next: ")
    bench_id, suite = argv[argv.index("--pool") + 1].removeprefix("replay:"), argv[1]
    folder = tmp_path / "r"
    trained = run_stiva(
        "train", "router", suite, "--pool", f"replay:{bench_id}", "--split", "train", "--out", str(folder),
        "--config", str(config), env=at(100),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    items = int(trained.stdout.split(" models, ", 1)[1].split(" items", 1)[0])
    assert items > 0
    argv = _hint(trained.stdout, "bench it: ")
    assert "--split" in argv  # the hint benches the held-out items
    benched = run_stiva(*argv, env=at(100))
    assert benched.returncode == 0, benched.stderr
    text = " ".join(benched.stdout.split())
    # one AIQ per system, the items said once, the router's train items from its files
    assert text.count("single models") == 1 and "single models alone" not in text, benched.stdout
    assert text.count("AIQ") == 1, benched.stdout
    heldout = json.loads(run_stiva(*argv, "--json", env=at(100)).stdout)["routing"]["heldout_items"]
    assert f"AIQ on these {heldout} held-out items: single models" in text, benched.stdout
    assert f"router:{folder} from {items} train items (its router.json)" in text, benched.stdout
    assert "routed by 0" not in text and "rather than --split" not in text, benched.stdout
    assert max(len(line) for line in benched.stdout.splitlines()) <= 100
    # the whole suite, with knn and best-single: the held-out items named against the table's
    whole = argv[: argv.index("--split")] + argv[argv.index("--split") + 2 :]
    whole[whole.index("--systems") + 1] += ",knn,best-single"
    report = run_stiva(*whole, env=at(100))
    assert report.returncode == 0, report.stderr
    said = " ".join(report.stdout.split())
    assert f"AIQ on the {heldout} held-out items (of the 40 above): single models" in said, report.stdout
    assert said.count("AIQ") == 1 and said.count("single models") == 1, report.stdout
    assert f"knn and best-single from this bench's {40 - heldout} train items" in said, report.stdout
    routing = json.loads(run_stiva(*whole, "--json", env=at(100)).stdout)["routing"]
    assert routing["router_items"] == {f"router:{folder}": items} and routing["unavailable"] is None


# --- recorded benches: latency not recorded, names folded at separators ----------------------------

LONG_NAMES = ["zero-one-ai/Yi-34B-Chat", "mistralai/mixtral-8x7b-chat", "meta/code-llama-instruct-34b-chat"]


def _recorded_without_latency(tmp_path: Path, latency: float | None = None) -> Path:
    rows = []
    for index in range(12):
        for j, model in enumerate(LONG_NAMES):
            row = {"id": f"q{index}", "question": f"What is {index} + {index}?", "model": model,
                   "response": f"{2 * index}", "correct": (index + j) % 3 != 0, "cost_usd": 0.001 * (j + 1)}  # fmt: skip
            if latency is not None:
                row["latency_s"] = latency
            rows.append(row)
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_a_bench_of_answers_recorded_without_latency_says_not_recorded(tmp_path, stiva_home):
    imported = run_stiva("bench", "import", str(_recorded_without_latency(tmp_path)), env=at())
    assert imported.returncode == 0, imported.stderr
    argv = _hint(imported.stdout, "next: ")
    data = json.loads(run_stiva(*argv, "--json", env=at()).stdout)
    assert all(row["latency_p50_s"] is None and row["latency_p95_s"] is None for row in data["systems"])
    shown = run_stiva(*argv, env=at())
    assert shown.returncode == 0, shown.stderr
    assert "0.0s" not in shown.stdout and "p50, p95: not recorded" in shown.stdout, shown.stdout
    report = Path(shown.stderr.split(" · report in ", 1)[1].split()[0]) / "report.md"
    assert "p50, p95: not recorded." in report.read_text()


def test_answers_recorded_with_a_latency_keep_it(tmp_path, stiva_home):
    imported = run_stiva("bench", "import", str(_recorded_without_latency(tmp_path, 1.5)), env=at())
    argv = _hint(imported.stdout, "next: ")
    data = json.loads(run_stiva(*argv, "--json", env=at()).stdout)
    direct = [row for row in data["systems"] if row["system"].startswith("direct:")]
    assert direct and all(row["latency_p50_s"] > 0 for row in direct), direct
    assert "not recorded" not in run_stiva(*argv, env=at()).stdout


def test_the_system_row_of_items_with_no_latency_has_none():
    from stiva_tui.bench.report import system_row
    from stiva_tui.store.records import BenchItemRecord

    untimed = [BenchItemRecord(system="direct:a", item_id=str(i), status="graded", correct=True) for i in range(3)]
    assert system_row("direct:a", untimed).latency_p50_s is None
    timed = [*untimed, BenchItemRecord(system="direct:a", item_id="t", status="graded", latency_s=2.0)]
    assert system_row("direct:a", timed).latency_p95_s > 0


@pytest.mark.parametrize("columns", [80, 60])
def test_model_names_fold_at_their_separators_not_inside_a_word(tmp_path, stiva_home, columns):
    imported = run_stiva("bench", "import", str(_recorded_without_latency(tmp_path)), env=at(columns))
    argv = _hint(imported.stdout, "next: ")
    shown = run_stiva(*argv, env=at(columns))
    assert shown.returncode == 0, shown.stderr
    cells = [line.split("  ")[0].strip() for line in shown.stdout.splitlines()]
    for name in LONG_NAMES:
        short = name.split("/", 1)[1]  # the shortened name: the model alone
        start = next(i for i, cell in enumerate(cells) if cell and short.startswith(cell))
        whole, lines = "", []
        for cell in cells[start:]:
            whole += cell
            lines.append(cell)
            if whole == short:
                break
        assert whole == short, (short, shown.stdout)
        # every line but the last ends at a separator: no word is cut
        assert all(line[-1] in "-/:+>," for line in lines[:-1]), (lines, shown.stdout)


# --- the slow lane's model cache ------------------------------------------------------------------


def test_the_slow_lanes_model_cache_is_in_the_repository_ignored_by_git(monkeypatch):
    """The slow lane left 544 MB in the user's ~/.cache/stiva/test-models."""
    import subprocess

    from tests.conftest_model import stable_model_cache_dir

    monkeypatch.delenv("STIVA_TEST_MODEL_CACHE", raising=False)
    root = Path(__file__).resolve().parent.parent
    cache = stable_model_cache_dir()
    assert cache.is_relative_to(root) and not cache.is_relative_to(Path.home() / ".cache"), cache
    ignored = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "-q", str(cache / "gemma" / "model.safetensors")], check=False
    )
    assert ignored.returncode == 0, "git would see the converted model"
    monkeypatch.setenv("STIVA_TEST_MODEL_CACHE", "~/elsewhere")
    assert stable_model_cache_dir() == Path.home() / "elsewhere"


# --- --prefer through the warm worker ---------------------------------------------------------------


def test_changing_prefer_keeps_the_warm_worker_and_reaches_the_plan(fake, tmp_path, stiva_home, monkeypatch):
    """`--prefer` started a new worker (a reload of its model: 10 s instead of 0.9 s): it is per
    question, so the worker takes it with the question."""
    import asyncio
    import signal

    from stiva_tui.cli import warm
    from tests.support.warm import warm_pool
    from tests.test_ask_warm import alive, wait_until

    monkeypatch.delenv("STIVA_NO_WARM", raising=False)
    config = warm_pool(fake, tmp_path / "c.toml")
    pids, prompts = [], []
    try:
        for served, prefer in enumerate([None, "cheap", "best", "0.3"], start=1):
            extra = ("--prefer", prefer) if prefer else ()
            result = run_stiva(
                "ask", "What is six times seven?", "--config", str(config), "--json", *extra, home=stiva_home
            )
            assert result.returncode == 0, result.stderr
            state = asyncio.run(warm.worker_status())
            assert state is not None, "no warm worker"
            pids.append(state["pid"])
            assert state["served"] == served and len(set(pids)) == 1, (prefer, pids, state)
            plan_prompt = json.dumps(fake.requests_for("cond")[-1].messages)
            trace = json.loads(result.stdout)
            prompts.append(plan_prompt)
            if prefer is None:
                assert "The user prefers" not in plan_prompt
            else:
                assert f'"preference": "{prefer}"' in json.dumps(trace), trace
        assert "The user prefers the cheapest plan" in prompts[1]  # cheap, as told with the question
        assert len(set(prompts)) == 4  # each preference its own prompt
    finally:
        for pid in set(pids):
            if alive(pid):
                os.kill(pid, signal.SIGTERM)
                wait_until(lambda pid=pid: not alive(pid), 30)
