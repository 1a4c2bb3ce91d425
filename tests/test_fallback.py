"""A plan that cannot run goes to the best model by evidence (engine/fallback.py): the router's
prediction, then the pool's recorded accuracy in the user's benches, then `[conductor]
fallback_model`, and only then the priciest model. The guard runs on the embedded planner and on a
planner whose plans were replaced in its recent runs, not on every remote planner; a planner that
writes no valid plan still gets the question answered, in one step on that same fallback model.
Against real local HTTP providers, a real history and the real `stiva ask`."""

from __future__ import annotations

import json

from conftest import pool_models

from stiva_tui.conductor.base import Plan
from stiva_tui.conductor.remote import RemoteConductor
from stiva_tui.core import events as ev
from stiva_tui.core.usage import Usage
from stiva_tui.core.workflow import parse_workflow
from stiva_tui.engine.executor import Engine
from stiva_tui.engine.fallback import FallbackEvidence, choose_fallback
from stiva_tui.pool.client import HttpWorker
from stiva_tui.pool.embedded import embedded_pool_model
from stiva_tui.pool.types import PoolModel
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply
from tests.support.pool import write_lab_config

COPIED = 'Plan.\nmodel_id = [1]\nsubtasks = ["Compute 12 times 3."]\naccess_list = [[]]'
QUESTION = "What is the capital of France?"


def model(id_: str, price: float) -> PoolModel:
    return PoolModel(id=id_, provider="p", model=id_, price_in=price, price_out=price)


POOL = [embedded_pool_model(), model("cheap", 0.1), model("mid", 1.0), model("dear", 10.0)]


# --- the choice ------------------------------------------------------------------------------------


def test_without_evidence_the_priciest_real_model_answers():
    chosen = choose_fallback(POOL, QUESTION)
    assert (chosen.model, chosen.rule, chosen.index) == ("dear", "priciest", 3)
    assert chosen.reason.startswith("fallback: dear, the priciest model")
    assert choose_fallback(POOL[:1], QUESTION).model == POOL[0].id  # the embedded model alone: itself


def test_the_configured_fallback_model_comes_before_the_priciest():
    chosen = choose_fallback(POOL, QUESTION, FallbackEvidence(model="mid"))
    assert (chosen.model, chosen.rule, chosen.reason) == ("mid", "config", "fallback: mid, [conductor] fallback_model")
    missing = choose_fallback(POOL, QUESTION, FallbackEvidence(model="gone"))
    assert missing.model == "dear" and "fallback_model gone is not available" in missing.reason


def test_recorded_accuracy_comes_before_the_config_when_two_models_have_enough_items():
    accuracy = {"cheap": (162, 200), "mid": (150, 200), "dear": (19, 19)}  # dear: too few items to count
    chosen = choose_fallback(POOL, QUESTION, FallbackEvidence(accuracy=accuracy, model="mid"))
    assert (chosen.model, chosen.rule) == ("cheap", "benches")
    assert chosen.reason == "fallback: cheap, best recorded accuracy 81% over 200 bench items (next: mid, 75% over 200)"
    # one model's record alone ranks nothing: the config decides
    alone = choose_fallback(POOL, QUESTION, FallbackEvidence(accuracy={"cheap": (162, 200)}, model="mid"))
    assert alone.rule == "config"
    # a model that is not in the pool (a simulated bench's) is not a candidate
    other = choose_fallback(POOL, QUESTION, FallbackEvidence(accuracy={"gpt-x": (99, 100), "mid": (50, 100)}))
    assert other.rule == "priciest"


def test_the_routers_prediction_comes_first_and_a_broken_router_is_passed_over():
    seen = []

    def predict(question, models):
        seen.append((question, list(models)))
        return {"mid": 0.74, "cheap": 0.61, "dear": 0.2, "unknown": 0.99, POOL[0].id: 1.0}

    evidence = FallbackEvidence(predict=predict, accuracy={"cheap": (90, 100), "dear": (50, 100)}, model="dear")
    chosen = choose_fallback(POOL, QUESTION, evidence)
    assert (chosen.model, chosen.rule) == ("mid", "router")
    assert chosen.reason == "fallback: mid, the router's best predicted chance 74% (runner-up cheap 61%)"
    assert seen == [(QUESTION, ["cheap", "mid", "dear"])]  # the embedded model is not offered

    def broken(question, models):
        raise RuntimeError("no head")

    assert (
        choose_fallback(POOL, QUESTION, FallbackEvidence(predict=broken, accuracy=evidence.accuracy)).rule == "benches"
    )
    assert choose_fallback(POOL, QUESTION, FallbackEvidence(predict=lambda q, m: None, model="mid")).rule == "config"


# --- where the guard applies -------------------------------------------------------------------------


class _EmbeddedLike:
    """A planner of the embedded kind that writes a fixed plan (the 270M model itself takes
    minutes to load on two cores; what matters here is the kind the engine sees)."""

    backend = "embedded"
    model = "google/gemma-3-270m"
    quantization = None
    adapter = None
    loaded = True

    def __init__(self, text: str):
        self.text = text

    async def load(self, progress=None):
        return None

    async def plan(self, request, on_delta=None):
        workflow = parse_workflow(self.text, len(request.workers), request.max_steps)
        return Plan(workflow, "Plan.", self.text, Usage(20, 10))

    def describe(self):
        return {"backend": self.backend, "model": self.model}


async def _run(fake, conductor_of, guard_plans=None, evidence=None):
    models = pool_models(fake, "cond", "cheap", "strong")
    models = [models[0], models[1], PoolModel(**{**models[2].__dict__, "price_in": 5.0, "price_out": 20.0})]
    worker = HttpWorker(retries=0)
    events: list = []
    try:
        engine = Engine(models, worker, conductor_of(models, worker), guard_plans=guard_plans, fallback=evidence)
        result = await engine.run(QUESTION, emit=events.append)
    finally:
        await worker.aclose()
    (ready,) = [e for e in events if isinstance(e, ev.WorkflowReady)]
    return result, ready


async def test_the_guard_runs_on_the_embedded_planner_and_picks_the_fallback_by_evidence(fake):
    fake.default("cheap", lambda r: Reply("Paris" if "capital of France" in r.user_text else "36"))
    fake.default("strong", Reply("Paris, from the dear model"))
    evidence = FallbackEvidence(accuracy={"cheap": (81, 100), "strong": (70, 100)})
    result, ready = await _run(fake, lambda models, worker: _EmbeddedLike(COPIED), evidence=evidence)
    assert result.status == "finished" and result.answer == "Paris"
    assert [s.model for s in ready.workflow.steps] == [1]
    assert ready.note.startswith("plan replaced by one step on cheap: step 1's subtask is copied")
    assert "fallback: cheap, best recorded accuracy 81% over 100 bench items" in ready.note
    assert "[Stiva: plan replaced by one step on cheap" in ready.reasoning
    assert not fake.requests_for("strong")


async def test_a_remote_planners_plan_runs_as_written_unless_its_plans_were_rejected_recently(fake):
    fake.default("cond", Reply(COPIED))
    fake.default("cheap", Reply("36"))
    fake.default("strong", Reply("Paris"))
    result, ready = await _run(fake, lambda models, worker: RemoteConductor(models[0], worker))
    # not guarded: the plan ran as the planner wrote it, and the note says what the guard found
    assert result.answer == "36" and [s.model for s in ready.workflow.steps] == [1]
    assert ready.note.startswith("plan flagged by the guard, run as written: step 1's subtask is copied")
    assert "[Stiva: plan flagged by the guard" in ready.reasoning
    result, ready = await _run(fake, lambda models, worker: RemoteConductor(models[0], worker), guard_plans=False)
    assert result.answer == "36" and ready.note == ""  # no guard at all
    result, ready = await _run(fake, lambda models, worker: RemoteConductor(models[0], worker), guard_plans=True)
    assert result.answer == "Paris" and ready.note.startswith("plan replaced by one step on strong")
    assert "fallback: strong, the priciest model" in ready.note


# --- a planner that cannot plan ---------------------------------------------------------------------


def _config(tmp_path, base_url: str, **conductor: str) -> str:
    models = [("cond", 0.1, 0.1), ("w1", 0.5, 1.0), ("w2", 5.0, 20.0)]
    return str(write_lab_config(tmp_path / "c.toml", base_url, models, conductor=conductor))


def test_a_planner_that_writes_no_valid_plan_still_gets_the_question_answered(fake, tmp_path, stiva_home):
    fake.default("cond", Reply("I think the answer is a city. model_id = banana"))
    fake.default("w1", Reply("Paris (w1)"))
    fake.default("w2", Reply("Paris (w2)"))
    config = _config(tmp_path, fake.base_url, fallback_model="w1")
    result = run_stiva("ask", QUESTION, "--config", config, "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["status"] == "finished" and trace["answer"] == "Paris (w1)"
    assert len(fake.requests_for("cond")) == 2 and not fake.requests_for("w2")
    (round_,) = trace["rounds"]
    assert "plan replaced by one step on w1: the planner wrote no valid plan after 2 tries" in round_["reasoning"]
    assert "fallback: w1, [conductor] fallback_model" in round_["reasoning"]
    assert [s["model"] for s in round_["steps"]] == ["w1"]
    (asked,) = fake.requests_for("w1")
    assert asked.user_text == QUESTION  # the question itself, not a subtask
    # the failed attempts are paid for, and counted as the planner's
    planner = trace["conductor"]["usage"]
    assert planner["prompt_tokens"] > 0 and planner["completion_tokens"] == 2 * 10  # two tries of 10 words
    assert trace["totals"]["prompt_tokens"] > planner["prompt_tokens"]  # and the step's

    # Without the live view (a pipe), what its plan line would have said is a note on stderr.
    piped = run_stiva("ask", QUESTION, "--config", config, home=stiva_home)
    assert piped.returncode == 0 and piped.stdout.strip() == "Paris (w1)", piped.stderr
    assert "note: plan replaced by one step on w1: the planner wrote no valid plan after 2 tries" in piped.stderr

    # Its plans were replaced in its last runs: from now on its plans are guarded, in a new process too.
    fake.default("cond", Reply(COPIED.replace("[1]", "[2]")))
    again = run_stiva("ask", QUESTION, "--config", config, "--json", home=stiva_home)
    assert again.returncode == 0, again.stderr
    trace = json.loads(again.stdout)
    assert (
        trace["answer"] == "Paris (w1)"
        and "is copied from the planner's own examples" in trace["rounds"][0]["reasoning"]
    )


def test_a_planner_that_fails_uses_the_benches_of_the_history(fake, tmp_path, stiva_home):
    from stiva_tui.store import Store
    from stiva_tui.store.records import BenchItemRecord

    store = Store.open()
    store.open_bench("b1", suite="s", suite_hash="h", systems=["direct:w1", "direct:w2"], config_hash="", items=25)
    for i in range(25):
        store.record_bench_item(
            "b1", BenchItemRecord(system="direct:w1", item_id=str(i), status="graded", correct=i < 20)
        )
        store.record_bench_item(
            "b1", BenchItemRecord(system="direct:w2", item_id=str(i), status="graded", correct=i < 10)
        )
        store.record_bench_item("b1", BenchItemRecord(system="direct:w2", item_id=f"e{i}", status="error"))
    store.close_bench("b1", "finished")
    store.close()
    fake.default("cond", Reply("no plan"))
    fake.default("w1", Reply("Paris (w1)"))
    fake.default("w2", Reply("Paris (w2)"))
    result = run_stiva("ask", QUESTION, "--config", _config(tmp_path, fake.base_url), "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["answer"] == "Paris (w1)"
    assert (
        "fallback: w1, best recorded accuracy 80% over 25 bench items (next: w2, 40% over 25)"
        in (trace["rounds"][0]["reasoning"])
    )


def test_an_unknown_fallback_model_is_a_config_error(fake, tmp_path, stiva_home):
    """`stiva ask` and `stiva models` alike: one line naming the field, exit 2, nothing asked."""
    config = _config(tmp_path, fake.base_url, fallback_model="nope")
    for command in (["ask", QUESTION], ["models"]):
        result = run_stiva(*command, "--config", config, home=stiva_home)
        assert result.returncode == 2, (command, result.stderr)
        assert "conductor.fallback_model: 'nope' is not a model of the pool" in result.stderr, command
        assert "Traceback" not in result.stderr and not fake.requests


async def test_a_later_round_whose_planner_fails_keeps_the_previous_answer(fake):
    from stiva_tui.engine.executor import RunOptions

    fake.script("cond", Reply('One.\nmodel_id = [1]\nsubtasks = ["Name the capital."]\naccess_list = [[]]'))
    fake.script("cond", Reply("garbage"), Reply("more garbage"))
    fake.default("w1", Reply("Paris"))
    models = pool_models(fake, "cond", "w1")
    worker = HttpWorker(retries=0)
    events: list = []
    try:
        result = await Engine(models, worker, RemoteConductor(models[0], worker)).run(
            QUESTION, emit=events.append, options=RunOptions(rounds=2)
        )
    finally:
        await worker.aclose()
    assert result.status == "finished" and result.answer == "Paris"
    ready = [e for e in events if isinstance(e, ev.WorkflowReady)]
    assert len(ready) == 2 and ready[1].keep_previous and ready[1].workflow.is_empty
    assert (
        ready[1].note.startswith("the planner wrote no valid plan after 2 tries") and "previous answer" in ready[1].note
    )
    assert len(fake.requests_for("w1")) == 1


def test_the_config_template_documents_fallback_model():
    from stiva_tui.config import ConductorConfig
    from stiva_tui.config_template import TEMPLATE

    assert ConductorConfig().fallback_model == ""
    assert "fallback_model" in TEMPLATE


async def test_a_planner_is_guarded_for_its_next_runs_after_a_replaced_plan_in_this_process(fake):
    """Without a history, the session's own runs say it: after a plan of its was rejected (flagged,
    replaced, or none written), the guard replaces the plans it rejects in that planner's next
    RECENT_RUNS runs; then they run as written again."""
    from stiva_tui.config import parse_config
    from stiva_tui.runtime import Ask, Runtime
    from stiva_tui.runtime.root import RECENT_RUNS

    models = [
        {"id": n, "provider": "lab", "model": n, "price_in": p, "price_out": p} for n, p in [("cond", 0.1), ("w1", 1.0)]
    ]
    config = parse_config(
        {
            "conductor": {"backend": "remote", "model": "cond"},
            "providers": [{"name": "lab", "base_url": fake.base_url}],
            "models": models,
            "workers": {"retries": 0},
            "discovery": {"enabled": False},
            "catalog": False,
        }
    )
    fine = 'Plan.\nmodel_id = [1]\nsubtasks = ["Name the capital of France."]\naccess_list = [[]]'
    fake.default("w1", lambda r: Reply("36" if "12 times 3" in r.user_text else "Paris"))
    runtime = await Runtime.create(config, with_store=False, discover=False)
    try:

        async def ask(plan_text: str) -> str:
            fake.script("cond", Reply(plan_text))
            outcome = await runtime.sessions.ask(Ask(QUESTION))
            return outcome.result.answer

        assert await ask(COPIED) == "36"  # a remote planner: flagged, and run as written
        assert await ask(COPIED) == "Paris"  # flagged in its last runs: replaced now
        for _ in range(RECENT_RUNS):
            assert await ask(fine) == "Paris"
        assert await ask(COPIED) == "36"  # RECENT_RUNS runs without a rejected plan: run as written again
        assert await ask("no plan") == "Paris"  # no plan: the fallback answers ...
        assert await ask(COPIED) == "Paris"  # ... and the planner's next plans are guarded
    finally:
        await runtime.aclose()


def test_a_piped_ask_on_a_one_model_pool_prints_no_plan_note(fake, tmp_path, stiva_home):
    """A pool of one model plans nothing ("one model in the pool: one step"): that is no news, and a
    pipe's reader gets the answer and its totals, without a note line (only a plan that did not run
    as planned is one)."""
    fake.default("solo", Reply("4"))
    config = write_lab_config(tmp_path / "solo.toml", fake.base_url, ["solo"], embedded_worker=False,
                              conductor={"model": "solo"})  # fmt: skip
    result = run_stiva("ask", "What is 2+2?", "--config", str(config), home=stiva_home)
    assert result.returncode == 0 and result.stdout.strip() == "4", result.stderr
    assert "note:" not in result.stderr, result.stderr
