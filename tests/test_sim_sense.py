"""The simulated pool makes sense to someone trying it (issue 43, part 5): what a sim: model says to a
question it does not know, its working text, the conductor's reason line, and the app's first screen."""

from __future__ import annotations

import os
import re

from stiva_tui.evals.loaders import load_suite
from stiva_tui.sim.answers import Answerer
from stiva_tui.sim.profiles import default_models
from tests.support.cli import run_stiva

SKILLS = load_suite("skills")


def _working(text: str) -> str:
    return text.split("\n\n", 1)[0]


def test_a_question_outside_the_suite_is_told_what_the_pool_answers_not_that_it_was_not_asked():
    answerer = Answerer(SKILLS.items, seed=0)
    calc = next(m for m in default_models() if m.name == "calc")
    asked = "Write me a haiku about the sea."
    answer = answerer.answer(calc, [{"role": "user", "content": asked}])
    assert not answer.correct and answer.item_id is None
    # the false sentence is gone: the question was in the prompt
    assert "not in my prompt" not in answer.text and "cannot tell what is being asked" not in answer.text
    assert "simulated" in answer.text and "suite" in answer.text
    # it offers a question it does know, word for word, and that question is answered
    offered = [item.question.strip() for item in SKILLS.items if item.question.strip() in answer.text]
    assert offered, answer.text
    again = answerer.answer(calc, [{"role": "user", "content": offered[0]}])
    assert again.item_id is not None


def test_the_working_before_an_answer_never_repeats_itself():
    answerer = Answerer(SKILLS.items, seed=0)
    item = SKILLS.items[0]
    for model in default_models():
        text = _working(answerer.answer(model, [{"role": "user", "content": item.question}]).text)
        sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", text) if s.strip()]
        assert len(sentences) == len(set(sentences)), (model.name, text)
        assert not re.search(r"[a-z] Let me", text), (model.name, text)  # no sentence run into the next
        words = len(text.split())
        assert model.words <= words <= model.words + 15, (model.name, words, text)


def test_the_reason_line_on_the_simulated_pool_says_why_the_embedded_model_plans(stiva_home):
    wide = {**os.environ, "STIVA_HOME": str(stiva_home), "COLUMNS": "300"}  # the line unwrapped
    result = run_stiva("--pool", "sim", "models", env=wide)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("conductor:"))
    assert "config says so" not in line  # the config says nothing: --pool sim chose it
    assert "simulated" in line and "cannot plan" in line and "one step" in line
    # a config that does say so is still said so
    (stiva_home / "c.toml").write_text('[conductor]\nbackend = "embedded"\n')
    said = run_stiva("models", "--config", str(stiva_home / "c.toml"), "--no-discovery", env=wide)
    assert "conductor: embedded: config says so" in said.stdout, said.stdout + said.stderr


def test_questions_to_try_are_suite_questions_one_per_domain():
    from stiva_tui.config import Config
    from stiva_tui.sim.pool import pool_config, questions_to_try

    config = pool_config(Config(), "sim")
    tried = questions_to_try(config, 3)
    assert len(tried) == 3 and len(set(tried)) == 3
    by_question = {item.question.strip(): item for item in SKILLS.items}
    assert all(q in by_question for q in tried)
    assert len({by_question[q].meta["domain"] for q in tried}) == 3
    assert questions_to_try(Config(), 3) == []  # a real pool: nothing to offer


async def _app_on(config):
    from stiva_tui.runtime import Runtime
    from stiva_tui.tui.app import StivaApp

    runtime = await Runtime.create(config, discover=False)

    async def no_load(progress=None):  # never load torch in these tests
        raise RuntimeError("not loading the embedded model in tests")

    runtime.ensure_conductor = no_load
    return runtime, StivaApp(config, runtime=runtime)


async def test_the_first_screen_of_the_simulated_pool_says_what_it_is_and_offers_questions(stiva_home):
    from stiva_tui.config import parse_config
    from stiva_tui.sim.pool import pool_config, questions_to_try, start_sim
    from tests.support.tui import wait_for

    config, server = start_sim(pool_config(parse_config({}), "sim"))
    try:
        runtime, app = await _app_on(config)
        try:
            async with app.run_test(size=(140, 42)) as pilot:
                notice = app.chat_screen.query_one("#notice")
                await wait_for(pilot, lambda: notice.display, what="the notice")
                text = " ".join(str(notice.render()).split())
                assert "imulated pool" in text and "No API keys found" not in text
                assert all(q in text for q in questions_to_try(config, 3)), text
                assert "one step" in text  # why its plans are one step
        finally:
            await runtime.aclose()
    finally:
        server.stop()


async def test_the_first_run_notice_says_creates_only_while_there_is_no_config_file(stiva_home):
    from stiva_tui import paths
    from stiva_tui.config import parse_config
    from tests.support.tui import wait_for

    config = parse_config({"discovery": {"enabled": False}, "catalog": False})
    for exists in (False, True):
        if exists:
            paths.config_file().parent.mkdir(parents=True, exist_ok=True)
            paths.config_file().write_text("# mine\n")
        runtime, app = await _app_on(config)
        try:
            async with app.run_test(size=(140, 42)) as pilot:
                notice = app.chat_screen.query_one("#notice")
                await wait_for(pilot, lambda shown=notice: shown.display, what="the notice")
                text = " ".join(str(notice.render()).split())
                assert ("creates" in text) is (not exists), text
                assert "opens" in text
        finally:
            await runtime.aclose()
