"""The calculator beside the base worker: arithmetic found in a question, evaluated exactly and
safely, and nothing taken for arithmetic that is not."""

from __future__ import annotations

import pytest

from stiva_tui.core.arithmetic import calculation, format_number


@pytest.mark.parametrize(
    "text, expression, result",
    [
        ("What is 17*23?", "17 * 23", "391"),
        ("What is 10 divided by 2?", "10 / 2", "5"),
        ("What is 9 minus 4?", "9 - 4", "5"),
        ("What is 3 times 4?", "3 * 4", "12"),
        ("What is 100 plus 1?", "100 + 1", "101"),
        ("What is (3 + 4) x 2?", "(3 + 4) * 2", "14"),
        ("What is 10 - 3 - 2?", "10 - 3 - 2", "5"),
        ("What is -3 + 5?", "-3 + 5", "2"),
        ("What is 2^10?", "2 ** 10", "1024"),
        ("What is 12.5 divided by 0.5?", "12.5 / 0.5", "25"),
        ("What is 1/3?", "1 / 3", "0.3333333333"),
        ("What is 6 multiplied by 7?", "6 * 7", "42"),
        ("Compute 5 × 5 ÷ 5 please", "5 * 5 / 5", "5"),
    ],
)
def test_arithmetic_in_words_or_signs_is_evaluated(text, expression, result):
    found = calculation(text)
    assert found is not None and found.expression == expression and found.result == result
    assert found.note == f"calculator: {expression} = {result}"


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of France?",
        "Read pages 10-20 and summarise them.",  # a range, not a difference
        "What happened on 2026-12-01?",  # a date
        "What is 7 / 0?",  # no result
        "What is 9 ** 999?",  # an exponent beyond bounds: not computed
        "What is 10 ** 12 * 10 ** 12?",  # a result beyond bounds
        "What is __import__('os').system('ls') + 1?",  # never evaluated as Python
        "How many legs does a spider have?",
        "Is 7 a prime number?",
    ],
)
def test_no_arithmetic_no_calculation(text):
    assert calculation(text) is None


def test_numbers_read_as_a_person_writes_them():
    assert format_number(5.0) == "5" and format_number(5.25) == "5.25" and format_number(-2) == "-2"
