"""The paper's workflow text format: what parses, what fails, and that nothing else escapes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stiva_tui.core.workflow import (
    Step,
    Workflow,
    WorkflowParseError,
    parse_workflow,
    split_reasoning,
)

PAPER = """I'll have two models draft, then a third check.
model_id = [2, 0, 1]
subtasks = ["Outline an approach", "Solve using the outline", "Check and give the final answer"]
access_list = [[], [0], "all"]"""


def test_paper_format():
    wf = parse_workflow(PAPER, pool_size=3, max_steps=5)
    assert [s.model for s in wf.steps] == [2, 0, 1]
    assert wf.steps[1].subtask == "Solve using the outline"
    assert [s.access for s in wf.steps] == [(), (0,), (0, 1)]
    assert wf.steps[2].access_all and not wf.steps[1].access_all


def test_think_block_is_dropped_even_if_it_holds_lists():
    text = "<think>model_id = [9]\nsubtasks = ['x']\naccess_list = [[]]</think>\n" + PAPER
    assert len(parse_workflow(text, 3)) == 3


def test_unclosed_think_is_an_error():
    with pytest.raises(WorkflowParseError, match="never closed"):
        parse_workflow("<think> still thinking about model choices", 3)


@pytest.mark.parametrize(
    "labels",
    [
        ("model id", "subtasks", "access list"),
        ("model_ids", "subtask", "access"),
        ("Model_ID", "Subtasks", "Access_List"),
        ("**model_id**", "**subtasks**", "**access_list**"),
    ],
)
def test_label_variants(labels):
    m, s, a = labels
    text = f'plan:\n{m} = [0, 1]\n{s} = ["a", "b"]\n{a}: [[], [0]]\nThat is all.'
    wf = parse_workflow(text, 2)
    assert [st.access for st in wf.steps] == [(), (0,)]


def test_json_form_and_trailing_text():
    text = 'Reasoning first.\n```json\n{"model_id": [1], "subtasks": ["Answer {it}"], "access_list": [[]]}\n```\nDone.'
    wf = parse_workflow(text, 2)
    assert wf.steps == (Step(1, "Answer {it}", ()),)


def test_python_literals_with_single_quotes_and_brackets_in_strings():
    text = "model_id = [0, 0]\nsubtasks = ['list [a] here', \"it's fine\"]\naccess_list = [[], [0]]"
    wf = parse_workflow(text, 1)
    assert wf.steps[0].subtask == "list [a] here" and wf.steps[1].subtask == "it's fine"


def test_last_occurrence_wins_over_examples_in_reasoning():
    text = "An example would be model_id = [5] but instead:\n" + PAPER
    assert [s.model for s in parse_workflow(text, 3).steps] == [2, 0, 1]


def test_empty_lists_keep_previous_only_when_allowed():
    text = "The answer is right.\nmodel_id = []\nsubtasks = []\naccess_list = []"
    assert parse_workflow(text, 3, allow_empty=True).is_empty
    with pytest.raises(WorkflowParseError, match="no steps"):
        parse_workflow(text, 3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('model_id = [0, 1]\nsubtasks = ["a"]\naccess_list = [[]]', "differ in length"),
        ('model_id = [3]\nsubtasks = ["a"]\naccess_list = [[]]', "pool has models 0..2"),
        ('model_id = [-1]\nsubtasks = ["a"]\naccess_list = [[]]', "pool has models"),
        ('model_id = ["gpt"]\nsubtasks = ["a"]\naccess_list = [[]]', "must be a model number"),
        ('model_id = [0]\nsubtasks = [""]\naccess_list = [[]]', "is empty"),
        ("model_id = [0]\nsubtasks = [3]\naccess_list = [[]]", "must be a string"),
        ('model_id = [0, 0]\nsubtasks = ["a", "b"]\naccess_list = [[], [1]]', "may only read earlier"),
        ('model_id = [0]\nsubtasks = ["a"]\naccess_list = [[0]]', "first step"),
        ('model_id = [0]\nsubtasks = ["a"]\naccess_list = ["some"]', 'or "all"'),
        (
            'model_id = [0,0,0,0,0,0]\nsubtasks = ["a","a","a","a","a","a"]\naccess_list = [[],[],[],[],[],[]]',
            "at most 5",
        ),
        ('model_id = [0]\nsubtasks = ["a"]', "access_list is missing"),
        ("nothing to see here", "no workflow found"),
        ('model_id = [0\nsubtasks = ["a"]\naccess_list = [[]]', "never closed"),
        ('model_id = [0]\nsubtasks = ["a"]\naccess_list = [[], []]', "differ in length"),
        ("model_id = [0]\nsubtasks = [a b]\naccess_list = [[]]", "not a valid literal"),
    ],
)
def test_invalid_workflows_say_what_and_where(text, message):
    with pytest.raises(WorkflowParseError) as info:
        parse_workflow(text, pool_size=3, max_steps=5)
    assert message in str(info.value)


def test_error_carries_field_and_position():
    with pytest.raises(WorkflowParseError) as info:
        parse_workflow('model_id = [0]\nsubtasks = ["a"]\naccess_list = [[1]]', 3)
    assert info.value.field == "access_list[0]"
    with pytest.raises(WorkflowParseError) as info:
        parse_workflow("xx model_id = [0, 1", 3)
    assert info.value.position == len("xx model_id = ")


def test_round_trip_through_text():
    wf = parse_workflow(PAPER, 3)
    assert parse_workflow(wf.to_text(), 3) == wf
    assert Workflow(wf.steps).shape() == "dag"
    assert parse_workflow("model_id=[0,1,0]\nsubtasks=['a','b','c']\naccess_list=[[],[0],[1]]", 2).shape() == "chain"
    assert parse_workflow("model_id=[0,1,0]\nsubtasks=['a','b','c']\naccess_list=[[],[],[0,1]]", 2).shape() == "fan-in"


def test_reasoning_is_the_text_before_the_last_lists():
    assert split_reasoning(PAPER) == "I'll have two models draft, then a third check."
    assert split_reasoning("<think>hidden</think>Visible.\n" + PAPER.split("\n", 1)[1]) == "Visible."


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_arbitrary_text_raises_only_the_typed_error(text):
    try:
        parse_workflow(text, pool_size=3, max_steps=5)
    except WorkflowParseError:
        pass


_fragments = st.sampled_from(
    [
        "model_id",
        "subtasks",
        "access_list",
        "access",
        "model id",
        "=",
        ":",
        "[",
        "]",
        "{",
        "}",
        "(",
        ")",
        '"',
        "'",
        "\\",
        ",",
        " ",
        "\n",
        "0",
        "1",
        "-1",
        "99",
        '"all"',
        "<think>",
        "</think>",
        "[[",
        "]]",
        "1e999",
        "True",
        "None",
        "'''",
        "[0, 1]",
        '"x"',
        '"0"',
        '" 1 "',
        '"²"',
        '"١"',
        '"\uff11"',
        '"' + "1" * 5000 + '"',  # numbers as strings, not all ASCII digits
    ]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_fragments, max_size=60).map("".join))
def test_workflow_shaped_noise_raises_only_the_typed_error(text):
    try:
        wf = parse_workflow(text, pool_size=2, max_steps=3, allow_empty=True)
    except WorkflowParseError:
        return
    # Whatever parses is valid.
    assert len(wf.steps) <= 3
    for i, step in enumerate(wf.steps):
        assert 0 <= step.model < 2 and all(0 <= j < i for j in step.access)


def test_deep_nesting_is_a_typed_error():
    with pytest.raises(WorkflowParseError):
        parse_workflow("model_id = " + "[" * 5000 + "]" * 5000 + "\nsubtasks=[]\naccess_list=[]", 3)


@pytest.mark.parametrize("number", ["²", "³", "١", "۱", "१", "\uff11", "¹0", "1²", "1" * 5000, "0" * 4999 + "1"])
@pytest.mark.parametrize("where", ["model_id", "access_list"])
def test_a_step_number_that_is_not_plain_ascii_digits_is_the_typed_error(number, where):
    """str.isdigit() accepts "²" (and int() does not), int() accepts "١" and full-width digits, and
    int() refuses more than 4300 digits: a quoted step number is ASCII digits 0-9, or an invalid plan."""
    model_id = json.dumps([0, number if where == "model_id" else 0])
    access = json.dumps([[], [number] if where == "access_list" else []])
    with pytest.raises(WorkflowParseError) as info:
        parse_workflow(f'model_id = {model_id}\nsubtasks = ["a", "b"]\naccess_list = {access}', pool_size=3)
    assert info.value.field == ("model_id[1]" if where == "model_id" else "access_list[1]")
    assert len(str(info.value)) < 200


def test_a_quoted_ascii_step_number_still_counts():
    wf = parse_workflow('model_id = ["2", " 0 "]\nsubtasks = ["a", "b"]\naccess_list = [[], ["0"]]', pool_size=3)
    assert [(s.model, s.access) for s in wf.steps] == [(2, ()), (0, (0,))]
