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


# --- a grader's verdict is a vote's comparison with the reference ------------------------------------

ORGANELLES = ("Nucleus", "Ribosome", "Mitochondria", "Golgi apparatus")

# (grader, reference, response, right): right is the verdict both must give. Choice items list
# ORGANELLES; the vote reads with the item's options too (core/answers.py `options`).
VERDICTS = [
    # choice, written the free-text way (no JSON) and every other way
    ("choice", "C", "The answer is (C).", True),
    ("choice", "C", "**C**", True),
    ("choice", "C", "Answer: C. Mitochondria", True),
    ("choice", "C", "\\boxed{C}", True),
    ("choice", "C", '{"answer": "C"}', True),
    ("choice", "C", "Let me think.\nThe powerhouse of the cell.\nC", True),
    ("choice", "C", "\\boxed{\\text{C}}", True),
    ("choice", "C", "c", True),
    ("choice", "C", "Mitochondria", True),  # an option's text
    ("choice", "C", '{"answer": "Mitochondria"}', True),
    ("choice", "C", "The answer is (B).", False),
    ("choice", "C", "The answer is E.", False),  # no option E
    ("choice", "C", "Answer: Apples", False),
    # numeric. One difference is meant and left out: the numeric grader takes a non-integer
    # reference ("0.3333333") within a relative 1e-6 (or an item's tolerance); votes compare values
    # exactly, so two models' 0.3333333 and 1/3 do not agree.
    ("numeric", "18", "The answer is 18 dollars.", True),
    ("numeric", "18", '{"reasoning": "9 * 2", "answer": "18"}', True),
    ("numeric", "1000", "So it is $1{,}000$.", True),
    ("numeric", "0.5", "\\boxed{\\frac{1}{2}}", True),
    ("numeric", "2", "\\boxed{2\\sqrt{73}-6\\sqrt{2}}", False),
    ("numeric", "9007199254740993", '{"answer": 9007199254740992}', False),
    # exact
    ("exact", "Paris", "Paris.", True),
    ("exact", "Paris", "**paris**", True),
    ("exact", "Paris", "**Answer:** Paris", True),
    ("exact", "Paris", '{"answer": "Paris"}', True),
    ("exact", "Paris", "The answer is Paris.\nI hope this helps.", True),
    ("exact", "Paris", "\u201cParis\u201d", True),
    ("exact", "Paris", "I am sure it is \\boxed{\\text{Paris}} and not Lyon", True),
    ("exact", "1000", "1,000", True),
    ("exact", "Paris", "Paris, France", False),
    ("exact", "Paris", "Paris\nActually, no: Lyon", False),
    # math
    ("math", "\\frac{\\sqrt{2}}{2}", "The answer is $\\frac{1}{\\sqrt{2}}$", True),
    ("math", "x^2+1", "\\boxed{1 + x^2}", True),
    ("math", "\\frac{1}{2}", "\\boxed{0.5}", True),
    ("math", "2\\sqrt{73}-6\\sqrt{2}", "\\boxed{4\\sqrt{2}}", False),
]

_KIND = {"choice": "choice", "numeric": "number", "exact": "exact", "math": "math"}


@pytest.mark.parametrize(
    ("grader", "reference", "response", "right"), VERDICTS, ids=[f"{v[0]}-{i}" for i, v in enumerate(VERDICTS)]
)
def test_a_graders_verdict_is_the_votes_comparison_with_the_reference(grader, reference, response, right):
    from stiva_tui.core.answers import same_final
    from stiva_tui.evals.graders import grade
    from stiva_tui.evals.suite import SuiteItem

    options = ORGANELLES if grader == "choice" else None
    item = SuiteItem(id="q", question="Which?", grader=grader, answer=reference, choices=options)
    kind = _KIND[grader]
    vote = same_final(final_answer(response, kind, options=options), final_answer(reference, kind, options=options))
    assert grade(item, response).correct is right
    assert vote is right
