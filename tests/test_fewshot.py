"""The base-model prompts: worker and conductor few-shot completions, stops, echo stripping."""

from __future__ import annotations

import re

import pytest

from stiva_tui.conductor.base import PlanRequest, PreviousRound, WorkerInfo, is_simple_question
from stiva_tui.conductor.fewshot import base_conductor_prefix, base_conductor_prompt
from stiva_tui.core.workflow import parse_workflow
from stiva_tui.engine.executor import step_prompt
from stiva_tui.inference.generation import render_completion
from stiva_tui.pool.client import PoolWorker
from stiva_tui.pool.embedded import (
    BASE_WORKER_MAX_TOKENS,
    BASE_WORKER_PREFIX,
    BASE_WORKER_STOPS,
    base_worker_prompt,
    clean_base_answer,
    embedded_pool_model,
)
from stiva_tui.pool.types import PoolModel, StepInput

EMBEDDED = WorkerInfo("local/gemma-3-270m", "tiny, offline", "embedded")
GPT = WorkerInfo("gpt-5", "strongest reasoning")
CLAUDE = WorkerInfo("claude", "careful writer")
ONE_STEP = parse_workflow('model_id = [0]\nsubtasks = ["Name the capital."]\naccess_list = [[]]', 1)
CHAIN = parse_workflow(
    'model_id = [0, 1, 0]\nsubtasks = ["Draft it.", "Draft again.", "Pick the better draft."]\n'
    "access_list = [[], [], [1]]",
    2,
)


def test_a_one_step_worker_prompt_is_the_examples_then_the_question():
    prompt = base_worker_prompt(StepInput("What is the capital of France?", ONE_STEP, 0, {}))
    text = render_completion(prompt.messages)
    assert text.startswith(BASE_WORKER_PREFIX)
    assert text.endswith("\n\nQuestion: What is the capital of France?\nAnswer:")
    assert "Task:" not in text  # a one-step plan's subtask is the question itself
    assert prompt.stop == BASE_WORKER_STOPS == ("\n",) and prompt.max_tokens == BASE_WORKER_MAX_TOKENS
    assert prompt.finish is clean_base_answer
    # no chat roles: a base model continues plain text
    assert not re.search(r"(?m)^(User|Assistant|System):", text)


def test_a_later_step_reads_only_its_access_list_on_one_line_each():
    outputs = {0: "first draft\nwith two lines", 1: "second draft"}
    prompt = base_worker_prompt(StepInput("Name a colour.\nJust one.", CHAIN, 2, outputs))
    case = prompt.messages[-1]["content"]
    assert case.splitlines() == [
        "Question: Name a colour. Just one.",
        "Note: second draft",
        "Task: Pick the better draft.",
        "Answer:",
    ]
    assert "first draft" not in render_completion(prompt.messages)


def test_the_conversation_goes_before_the_question():
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello\nthere"}]
    case = base_worker_prompt(StepInput("And you?", ONE_STEP, 0, {}, turns)).messages[-1]["content"]
    assert case.splitlines() == ["Earlier question: Hi", "Earlier answer: Hello there", "Question: And you?", "Answer:"]
    long = [{"role": "user", "content": f"question {i} " + "x" * 100} for i in range(20)]
    case = base_worker_prompt(StepInput("Last?", ONE_STEP, 0, {}, long)).messages[-1]["content"]
    assert "question 19" in case and "question 0 " not in case and len(case) < 900  # the newest kept


@pytest.mark.parametrize(
    "raw, clean",
    [
        (" Paris is the capital of France.", "Paris is the capital of France."),
        ("Answer: Paris.", "Paris."),
        ("A: Paris.", "Paris."),
        ("Paris. Question: What is the capital of Spain?", "Paris."),
        ("Paris.\nQuestion: next", "Paris."),
        ("Rome. User: thanks", "Rome."),
        ("Rome. model_id = [0]", "Rome."),
        ("Rome. Task: answer", "Rome."),
        ("The answer is 5.", "The answer is 5."),  # "answer" inside a sentence is not a marker
        ("The answer: 5.", "The answer: 5."),
        ("Use a note: it helps.", "Use a note: it helps."),
    ],
)
def test_echoes_of_the_prompt_are_stripped(raw, clean):
    assert clean_base_answer(raw) == clean


def test_the_engine_sends_the_base_prompt_to_the_embedded_model_only():
    embedded = embedded_pool_model()
    hosted = PoolModel(id="gpt-5", provider="openai", model="gpt-5")
    worker = PoolWorker()
    base = step_prompt(worker, embedded, StepInput("What is 2 + 2?", ONE_STEP, 0, {}))
    chat = step_prompt(worker, hosted, StepInput("What is 2 + 2?", ONE_STEP, 0, {}))
    assert (
        base.finish is clean_base_answer and base.stop == ("\n",) and base.messages[-1]["content"].endswith("Answer:")
    )
    assert chat.finish is None and chat.stop == () and chat.max_tokens is None
    # the one step of a one-step plan gets the question itself, the subtask only as guidance
    assert (
        chat.messages[-1]["content"].startswith("What is 2 + 2?")
        and "<overall_task>" not in chat.messages[0]["content"]
    )
    two = parse_workflow('model_id = [0, 0]\nsubtasks = ["Draft it.", "Check it."]\naccess_list = [[], [0]]', 1, 5)
    assert (
        "<overall_task>"
        in step_prompt(worker, hosted, StepInput("What is 2 + 2?", two, 1, {0: "4"})).messages[0]["content"]
    )


def _examples(text: str) -> list[str]:
    return [block for block in text.split("\n\n") if block.startswith("Question:") and "model_id" in block]


@pytest.mark.parametrize(
    "workers, max_steps", [([EMBEDDED], 1), ([GPT, CLAUDE, EMBEDDED], 2), ([EMBEDDED, GPT], 2), ([GPT], 5)]
)
def test_conductor_examples_parse_and_name_only_models_of_the_pool(workers, max_steps):
    prefix = base_conductor_prefix(workers, max_steps)
    examples = _examples(prefix)
    assert len(examples) >= 3
    for block in examples:
        lists = block.split("\n", 1)[1]
        workflow = parse_workflow(lists, len(workers), max_steps)  # the grammar's canonical form
        assert all(0 <= step.model < len(workers) for step in workflow.steps)
        # subtasks are instructions, within the grammar's alphabet (no ':', '=', '<', quotes)
        assert all(not re.search(r'[:=<"\\]', step.subtask) for step in workflow.steps)
    if max_steps == 1:
        assert all("model_id = [" in b and ", " not in b.split("model_id = [")[1].split("]")[0] for b in examples)
    if any(w.kind != "embedded" for w in workers):  # the examples prefer a real model to the 270M
        strong = next(i for i, w in enumerate(workers) if w.kind != "embedded")
        assert f"model_id = [{strong}]" in prefix


def test_the_conductor_prompt_ends_at_the_question_and_has_no_rules_to_copy():
    request = PlanRequest("What is the capital of France?", [GPT, EMBEDDED], max_steps=2)
    text = base_conductor_prompt(request)
    assert text.endswith("\n\nQuestion: What is the capital of France?")
    assert "0: gpt-5 - strongest reasoning" in text and "1: local/gemma-3-270m - tiny, offline" in text
    assert "model number for step 0" not in text and "Rules" not in text


def test_a_later_round_shows_the_previous_answer():
    first = parse_workflow('model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]', 1)
    request = PlanRequest(
        "Capital of Australia?", [GPT], max_steps=2, round=2, previous=PreviousRound(first, "Sydney.\nI think.")
    )
    text = base_conductor_prompt(request)
    assert "Previous answer: Sydney. I think." in text and text.endswith("Question: Capital of Australia?")


@pytest.mark.parametrize(
    "question, simple",
    [
        ("What is the capital of France?", True),
        ("2+2?", True),
        ("Write a Python function that merges two sorted lists, then review it for bugs and edge cases.", False),
        ("Fix this:\n```\nprint(1\n```", False),
        ("x" * 200, False),
    ],
)
def test_simple_questions(question, simple):
    assert is_simple_question(question) is simple


def test_arithmetic_gets_a_calculator_note_the_model_copies():
    """A 270M model cannot add: the sum comes from a calculator, as a note before the answer
    (and the examples show such a note, so the model copies its result)."""
    case = base_worker_prompt(StepInput("What is 20 + 30?", ONE_STEP, 0, {})).messages[-1]["content"]
    assert case.splitlines() == ["Question: What is 20 + 30?", "Note: calculator: 20 + 30 = 50", "Answer:"]
    assert "Note: calculator: 14 + 29 = 43\nAnswer: 14 + 29 = 43." in BASE_WORKER_PREFIX
    # in a longer plan, the step's own task is what is computed
    chain = parse_workflow(
        'model_id = [0, 0]\nsubtasks = ["Add 2 and 3: 2 + 3.", "Now 4 times 5."]\naccess_list = [[], [0]]', 1
    )
    case = base_worker_prompt(StepInput("Two sums", chain, 1, {0: "5"})).messages[-1]["content"]
    assert "Note: calculator: 4 * 5 = 20" in case.splitlines()
    # no arithmetic, no note
    assert (
        "calculator"
        not in base_worker_prompt(StepInput("What is the capital of Peru?", ONE_STEP, 0, {})).messages[-1]["content"]
    )
