"""Where only the embedded 270M answers, a code question gets one line saying it cannot write code."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from stiva_tui.runtime.sessions import OFFLINE_CODE_NOTE, Sessions, asks_for_code


@pytest.mark.parametrize(
    ("question", "code"),
    [
        ("Write a Python function that reverses a list.", True),
        ("Fix this:\n```\nfor i in range(10) print(i)\n```", True),
        ("Implement binary search.", True),
        ("What is the capital of France?", False),
        ("How many legs does a spider have?", False),
    ],
)
def test_a_code_question_is_told_by_its_words(question, code):
    assert asks_for_code(question) is code


def test_the_note_comes_only_when_the_embedded_model_is_the_whole_pool():
    embedded = SimpleNamespace(kind="embedded", id="embedded")
    hosted = SimpleNamespace(kind="openai", id="openai/gpt-5")
    offline = Sessions(SimpleNamespace(models=[embedded]))
    assert offline._offline_notes("Write a Python function that adds two numbers.") == [OFFLINE_CODE_NOTE]
    assert offline._offline_notes("What is the capital of France?") == []
    assert Sessions(SimpleNamespace(models=[embedded, hosted]))._offline_notes("Write a Python function.") == []


def test_stiva_ask_says_the_note_on_stderr():
    from rich.console import Console

    from stiva_tui.cli.ask import present

    console = Console(stderr=True, record=True, width=200)
    done = {"warnings": [], "notes": [OFFLINE_CODE_NOTE], "status": "finished", "answer": "x", "fallback_notes": [],
            "totals": [1, 1, False, 0.0, 0.1], "conversation_id": None, "live": False, "trace": None,
            "trouble": None, "error": ""}  # fmt: skip
    present(done, console, json_trace=False)
    assert "note: the offline model (Gemma-3 270M) cannot write code" in console.export_text()
