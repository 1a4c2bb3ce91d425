"""One reader of final answers for graders, votes and gates (issue 57, part 1): a grader's verdict
on a response and a vote's comparison of that response with the reference are the same judgement.
The numbers and the LaTeX around them are read by one implementation (core/numeric.py), which the
graders (evals/numbers.py) and the votes (core/answers.py) both call."""

from __future__ import annotations

from fractions import Fraction

import pytest

from stiva_tui.core.answers import final_answer
from stiva_tui.evals.numbers import extract_number, parse_number, written_value

# Texts the two readers once read differently: each side handled LaTeX or number forms the other
# did not (\displaystyle, \;, \mathrm on one side; ".5e3" and a decimal under a slash on the other).
NUMBERS = [
    ("\\boxed{\\displaystyle\\frac{3}{4}}", "3/4"),
    ("We get .5e3 grams in all.", "500"),
    ("Each share is 9/4.5 of it", "2"),
    ("\\boxed{5\\;\\mathrm{cm}}", "5"),
    ("The answer is $1{,}000$.", "1000"),
    ("It is \\text{about } 12", "12"),
    ("The answer is \\left(-\\frac{1}{2}\\right)", "-1/2"),
]


@pytest.mark.parametrize(("text", "value"), NUMBERS, ids=[f"number-{i}" for i in range(len(NUMBERS))])
def test_the_grader_and_the_vote_read_the_same_number(text, value):
    found = extract_number(text)
    assert found is not None and written_value(found[0]) == Fraction(value), found
    final = final_answer(text, "number")
    assert final is not None and final.form == "number" and final.key == value, final


@pytest.mark.parametrize(
    ("reference", "value"),
    [("\\displaystyle\\frac{3}{4}", 0.75), ("\\mathrm{12}", 12.0), ("$1{,}000$", 1000.0)],
)
def test_a_numeric_reference_is_read_as_the_vote_reads_it(reference, value):
    assert parse_number(reference) == value
