"""The bench graders: right, wrong and tricky answers for every grader; code answers graded for
real in the sandbox (whose attacks and limits are tested in test_sandbox.py)."""

from __future__ import annotations

import asyncio
import os

import pytest

from stiva_tui.evals import graders
from stiva_tui.evals.graders import (
    Grade,
    JudgeRequired,
    extract_code,
    extract_number,
    grade,
    grade_async,
    judge_prompt,
    parse_judge_reply,
    parse_number,
    shutdown_graders,
)
from stiva_tui.evals.suite import SuiteItem


def item(grader: str, answer: str = "", **extra) -> SuiteItem:
    return SuiteItem.model_validate({"id": "t", "question": "q?", "grader": grader, "answer": answer, **extra})


def fenced(code: str) -> str:
    return f"Here is my solution:\n\n```python\n{code}\n```\n"


# --- numeric -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer_text, correct, extracted",
    [
        ("391", True, "391"),
        ("17 × 23 = 391.", True, "391"),  # a sentence's final period is not a decimal point
        ("The product is 390.", False, "390"),
        ("First 17 × 20 = 340, then 17 × 3 = 51, so 340 + 51 = 391", True, "391"),
        ("The answer is 391, since 17 × 23 = 391 and 400 - 9 = 391.", True, "391"),
        ("The answer is 391. (I checked it 3 times.)", True, "391"),  # the anchor beats the last number
        ("So we get \\boxed{391}. Checking with 2 other methods...", True, "391"),  # boxed beats both
        ("No idea.", False, ""),
        ("CO2 and H2O", False, ""),  # digits glued to letters are not numbers
    ],
)
def test_numeric(answer_text, correct, extracted):
    result = grade(item("numeric", "391"), answer_text)
    assert (result.correct, result.extracted) == (correct, extracted)


@pytest.mark.parametrize(
    "reference, answer_text",
    [
        ("6912", "1,234 + 5,678 = 6,912"),
        ("1234567.5", "It is 1,234,567.5 exactly."),
        ("0.75", "3/4"),
        ("0.75", "\\boxed{\\frac{3}{4}}"),
        ("3/4", "That is 0.75"),
        ("-7", "x = -7"),
        ("-7", "The temperature is \u22127 degrees."),  # a typographic minus
        ("36", "15% of 240 is 36"),
        ("1e-3", "0.001"),
        ("1000", "$1{,}000$"),
    ],
)
def test_numeric_forms(reference, answer_text):
    assert grade(item("numeric", reference), answer_text).correct


def test_numeric_does_not_read_a_range_as_a_negative_number_or_commas_as_one_number():
    assert extract_number("between 5-10 apples")[1] == 10
    assert extract_number("the list 1,2,3")[1] == 3
    assert extract_number("version 3.11") == ("3.11", 3.11)


def test_numeric_tolerance_is_relative_and_set_per_item():
    assert grade(item("numeric", "100.0"), "100.00001").correct  # within 1e-6 relative
    assert not grade(item("numeric", "100.0"), "100.01").correct
    assert not grade(item("numeric", "100"), "100.00001").correct  # an integer is matched exactly
    assert grade(item("numeric", "100", tolerance=0.01), "100.5").correct
    assert not grade(item("numeric", "100", tolerance=0.01), "102").correct


@pytest.mark.parametrize(
    "reference, answer_text, correct",
    [
        ("976371285", "976371000", False),  # a mod-1e9+7 answer off by 285: within 1e-6 relative
        ("976371285", "The answer is 976,371,285.", True),
        ("976371285", "976371285.0", True),  # the same value, however written
        ("976371285", "9.76371285e8", True),
        ("976371285", "976371285.001", False),
        ("1000000000", "1e9", True),
        ("1000000000", "1000000001", False),
        ("123456789012345678901234567890", "123456789012345678901234567891", False),  # past a float's 53 bits
        ("123456789012345678901234567890", "123456789012345678901234567890", True),
        ("-976371285", "-976371000", False),
        ("-976371285", "x = -976371285", True),
        ("2", "8/4", True),
        ("0", "0e99999", False),  # an exponent past 1000 is no exact number
        ("1e9", "1000000100", True),  # a reference written with an exponent is a float: 1e-6 relative
        ("2.5", "2.5000001", True),
    ],
)
def test_numeric_integer_references_are_matched_only_by_the_same_value(reference, answer_text, correct):
    assert grade(item("numeric", reference), answer_text).correct is correct


def test_numeric_integer_reference_keeps_an_items_own_tolerance():
    assert grade(item("numeric", "976371285", tolerance=1e-6), "976371000").correct


def test_parse_number_accepts_exactly_one_number():
    assert parse_number("1,000") == 1000
    assert parse_number("\\frac{3}{4}") == 0.75
    assert parse_number("-2.5") == -2.5
    assert parse_number("12 or 13") is None
    assert parse_number("twelve") is None


# --- exact and contains --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer_text, correct",
    [
        ("Paris", True),
        ("paris.", True),
        ('"Paris"', True),
        ("The answer is Paris.", True),
        ("**Answer:** Paris", True),
        ("Let me think about capitals.\nThe French capital.\nParis", True),  # the last line
        ("I am sure it is \\boxed{\\text{Paris}} and not Lyon", True),  # a boxed value wins
        ("Paris, France", False),
        ("Lyon", False),
        ("Paris\nActually, no: Lyon", False),
    ],
)
def test_exact(answer_text, correct):
    assert grade(item("exact", "Paris"), answer_text).correct is correct


@pytest.mark.parametrize(
    "reference, answer_text, correct",
    [
        ("Paris", "The capital of France is Paris.", True),
        ("Paris", "the capital is PARIS", True),
        ("Paris", "Parisian food is good.", False),
        ("4", "2 + 2 = 4.", True),
        ("4", "It is 42.", False),
        ("4", "About 4.5 or so", False),
        ("4", "It is -4.", False),
        ("7|seven", "There are seven days in a week.", True),
        ("24|twenty-four|twenty four", "A day has twenty four hours.", True),
        ("24|twenty-four", "It has 240 minutes.", False),
        ("cow|cows", "Milk comes from **cows**.", True),
    ],
)
def test_contains(reference, answer_text, correct):
    result = grade(item("contains", reference), answer_text)
    assert result.correct is correct
    assert (result.extracted != "") is correct


# --- choice --------------------------------------------------------------------------------------

FOUR = ["Venus", "Mercury", "Mars", "Earth"]


@pytest.mark.parametrize(
    "answer_text, extracted",
    [
        ("The answer is (B).", "B"),
        ("B.", "B"),
        ("**B**", "B"),
        ("Answer: B", "B"),
        ("answer: **B**", "B"),
        ("Mercury orbits closest.\nB", "B"),
        ("B) Mercury", "B"),
        ("\\boxed{B}", "B"),
        ("Mercury", "B"),  # the text of an option
        ("A is wrong and so is C; I'd pick (B) here.", "B"),
        ("The answer is C.", "C"),
        ("A planet closest to the Sun is Mercury, I believe.\nFinal answer: D", "D"),
    ],
)
def test_choice_reads_the_committed_letter(answer_text, extracted):
    result = grade(item("choice", "B", choices=FOUR), answer_text)
    assert result.extracted == extracted
    assert result.correct is (extracted == "B")


def test_choice_ignores_letters_inside_words_and_out_of_range():
    for text in ("A cat sat. Because of that, I pick nothing.", "The answer is E.", "Answer: Apples"):
        result = grade(item("choice", "B", choices=FOUR), text)  # E: there is no option E
        assert result.extracted == "" and not result.correct, (text, result)
    result = grade(item("choice", "B", choices=FOUR), "I cannot decide.")
    assert not result.correct and result.extracted == "" and result.detail


# --- math ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reference, answer_text, correct",
    [
        ("\\frac{3}{4}", "So $x = \\boxed{\\frac{3}{4}}$.", True),
        ("\\frac{3}{4}", "The answer is \\boxed{0.75}", True),
        ("\\frac{3}{4}", "First I tried 1/2, which fails; the solution is \\boxed{3/4}.", True),
        ("\\frac{3}{4}", "\\boxed{\\frac{4}{3}}", False),
        ("5\\sqrt{2}", "$\\boxed{\\sqrt{50}}$", True),
        ("5\\sqrt{2}", "\\boxed{5\\sqrt{3}}", False),
        ("x^2 + 4x + 4", "\\boxed{(x+2)^2}", True),
        ("x^2 + 4x + 4", "\\boxed{x^2+4}", False),
    ],
)
def test_math_with_math_verify(reference, answer_text, correct):
    result = grade(item("math", reference), answer_text)
    assert result.correct is correct, result
    assert result.extracted


def test_math_without_an_answer_is_wrong():
    result = grade(item("math", "\\frac{3}{4}"), "I do not know.")
    assert not result.correct


async def test_math_async_runs_in_the_process_pool_and_shuts_down():
    try:
        right, wrong = await asyncio.gather(
            grade_async(item("math", "\\frac{\\pi}{3}"), "In radians: \\boxed{\\pi/3}"),
            grade_async(item("math", "\\frac{\\pi}{3}"), "\\boxed{\\pi/6}"),
        )
        assert right.correct and not wrong.correct
        pool = graders._pool
        assert pool is not None
        workers = list(pool._processes.values())
        assert workers and all(worker.pid != os.getpid() for worker in workers)
    finally:
        shutdown_graders()
    assert graders._pool is None
    assert all(not worker.is_alive() for worker in workers)


# --- code: extraction and grading ------------------------------------------------------------------


def test_extract_code_takes_the_last_python_block():
    text = (
        "```text\nnot code\n```\n```python\ndef f(): return 1\n```\nand better:\n"
        "```python\ndef f(): return 2\n```\n```\nplain\n```"
    )
    assert extract_code(text) == "def f(): return 2"
    assert extract_code("```\nx = 1\n```") == "x = 1"
    assert extract_code("```python\ndef f():\n    return 3") == "def f():\n    return 3"  # cut off
    assert extract_code("no code here") is None


ADD = item("code", tests="assert add(2, 3) == 5\nassert add(-1, 1) == 0")


def test_code_right_and_wrong():
    right = grade(ADD, fenced("def add(a, b):\n    return a + b"))
    assert right == Grade(True, "def add(a, b):\n    return a + b", None)
    wrong = grade(ADD, fenced("def add(a, b):\n    return a - b"))
    assert not wrong.correct and "AssertionError" in wrong.detail
    assert not grade(ADD, "def add(a, b): return a + b").correct  # no code block


def test_code_demo_under_main_guard_does_not_run_and_an_early_exit_fails():
    with_demo = "def add(a, b):\n    return a + b\n\nif __name__ == '__main__':\n    print(add(int(input()), 1))"
    assert grade(ADD, fenced(with_demo)).correct
    exits_first = "import sys\ndef add(a, b):\n    return 0\nsys.exit(0)"
    result = grade(ADD, fenced(exits_first))
    assert not result.correct and "failed to load: SystemExit" in result.detail


def test_code_stdin_stdout_cases():
    summing = item(
        "code",
        tests={"stdin_stdout": [{"input": "3\n1 2 3\n", "output": "6\n"}, {"input": "2\n10 -4\n", "output": "6"}]},
    )
    assert grade(summing, fenced("n = int(input())\nprint(sum(map(int, input().split())))")).correct
    wrong = grade(summing, fenced("n = int(input())\nprint(sum(map(abs, map(int, input().split()))))"))
    assert not wrong.correct and wrong.detail.startswith("case 2: expected")


@pytest.mark.parametrize(
    "got, expected, same",
    [
        ("976371000", "976371285", False),  # within 1e-6 relative: a float's tolerance, not an integer's
        ("976371285\n", "976371285", True),
        ("976371285.0", "976371285", True),  # the same value, however written
        ("1e9", "1000000000", True),
        ("1000000000", "1e9", True),  # an expected exponent is a float
        ("1000000001", "1000000000", False),
        ("1000000100", "1e9", True),
        ("-976371000", "-976371285", False),
        ("-976371285", "-976371285", True),
        ("+7", "7", True),
        ("12345678901234567890123", "12345678901234567890124", False),  # past a float's 53 bits
        ("1e999999999", "1", False),  # a huge exponent is no huge integer to build
        ("nan", "5", False),
        ("0.3333333", "0.33333333", True),  # floats keep their tolerance
        ("0.5000001", "0.5", True),
        ("0.51", "0.5", False),
        ("1 2 3\n976371285\n5", "1 2 3\n976371285\n5", True),
        ("1 2 3\n976371000\n5", "1 2 3\n976371285\n5", False),  # one wrong line of several
        ("1 2 3\n976371285.0\n5.0000001", "1 2 3\n976371285\n5.0", True),
        ("1 2 3\n976371285", "1 2 3\n976371285\n5", False),
    ],
)
def test_same_output_compares_integers_exactly_and_floats_within_a_tolerance(got, expected, same):
    assert graders.same_output(got, expected) is same


@pytest.mark.parametrize(
    "got, expected, same",
    [
        (976371000, 976371285, False),
        (976371000.0, 976371285, False),
        (976371285.0, 976371285, True),
        (976371285, 976371285, True),
        (-976371000, -976371285, False),
        pytest.param(2**70 + 1, 2**70, False, id="2**70+1"),  # equal as floats: compared as integers
        ([1, 976371000], [1, 976371285], False),
        ({"a": [976371285]}, {"a": [976371285]}, True),
        (0.30000000000000004, 0.3, True),  # floats keep their tolerance
        (1, 1.0000000001, True),
        (1.01, 1.0, False),
        pytest.param(10**400, 1.5, False, id="int-past-a-float's-range"),
        (True, 1, False),
    ],
)
def test_same_value_compares_integers_exactly_and_floats_within_a_tolerance(got, expected, same):
    assert graders.same_value(got, expected) is same


def test_code_that_prints_or_returns_a_near_integer_is_wrong():
    """Graded for real in the sandbox: 976371000 where 976371285 is expected was right before."""
    printed = item("code", tests={"stdin_stdout": [{"input": "", "output": "976371285\n"}]})
    assert grade(printed, fenced("print(976371285)")).correct
    assert not grade(printed, fenced("print(976371000)")).correct
    returned = item("code", tests={"functional": {"fn_name": "f", "cases": [{"input": [], "output": 976371285}]}})
    assert grade(returned, fenced("def f():\n    return 976371285")).correct
    assert not grade(returned, fenced("def f():\n    return 976371000")).correct


def test_code_functional_cases_with_a_solution_class_and_missing_imports():
    two_sum = item(
        "code",
        tests={
            "functional": {
                "fn_name": "twoSum",
                "cases": [
                    {"input": [[2, 7, 11, 15], 9], "output": [0, 1]},
                    {"input": [[3, 2, 4], 6], "output": [1, 2]},
                ],
            }
        },
    )
    right = (
        "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n        for i, n in enumerate(nums):\n"
        "            if target - n in seen:\n                return (seen[target - n], i)\n"
        "            seen[n] = i\n"
    )
    assert grade(two_sum, fenced(right)).correct  # `List` without an import; a tuple for a list
    wrong = grade(two_sum, fenced("def twoSum(nums, target):\n    return [0, 1]"))
    assert not wrong.correct and "case 2" in wrong.detail and "returned [0, 1]" in wrong.detail
    raises = grade(two_sum, fenced("def twoSum(nums, target):\n    return nums[99]"))
    assert not raises.correct and "IndexError" in raises.detail


def test_code_note_of_a_loader_is_repeated_in_every_grade():
    noted = item("code", tests={"stdin_stdout": [{"input": "", "output": "1"}], "note": "private cases skipped"})
    assert grade(noted, fenced("print(1)")).detail == "private cases skipped"
    assert "private cases skipped" in grade(noted, fenced("print(2)")).detail


async def test_code_async_grades_without_blocking_the_loop():
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    slow = item("code", tests="import time\ntime.sleep(0.5)\nassert add(1, 1) == 2")
    result = await grade_async(slow, fenced("def add(a, b):\n    return a + b"))
    task.cancel()
    assert result.correct
    assert ticks >= 20  # the loop kept running while the child slept


# --- judge ---------------------------------------------------------------------------------------


def test_judge_items_are_not_graded_here():
    judged = item("judge", "Photosynthesis turns light into chemical energy.")
    with pytest.raises(JudgeRequired):
        grade(judged, "anything")
    with pytest.raises(JudgeRequired):
        asyncio.run(grade_async(judged, "anything"))
    messages = judge_prompt(judged, "It makes sugar from light.")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "CORRECT" in messages[0]["content"] and "INCORRECT" in messages[0]["content"]
    assert "Photosynthesis turns light" in messages[1]["content"]
    assert "It makes sugar from light." in messages[1]["content"]


@pytest.mark.parametrize(
    "reply, correct, extracted, noted",
    [
        ("The candidate matches the reference.\nCORRECT", True, "CORRECT", False),
        ("It gives a different value.\nINCORRECT", False, "INCORRECT", False),
        ("Close, but the sign is wrong.\n**Incorrect**", False, "INCORRECT", False),
        ("Verdict: correct.", True, "CORRECT", False),
        ("This is NOT CORRECT.", False, "INCORRECT", False),
        ("INCORRECT at first sight, but on reflection CORRECT.\nThanks!", True, "CORRECT", True),
        ("I am not sure.", False, "", True),
    ],
)
def test_parse_judge_reply(reply, correct, extracted, noted):
    result = parse_judge_reply(reply)
    assert (result.correct, result.extracted) == (correct, extracted)
    assert (result.detail is not None) is noted


HUMANEVAL_PROMPT = '''from typing import List


def total(xs: List[int]) -> int:
    """ The sum of xs.
    >>> total([1, 2])
    3
    """
'''


def test_a_humaneval_answer_that_repeats_only_the_function_gets_the_prompts_imports():
    item = SuiteItem(id="he", question=HUMANEVAL_PROMPT, grader="code", tests="assert total([1, 2, 3]) == 6")
    answer = "```python\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```"
    verdict = grade(item, answer)
    assert verdict.correct, verdict.detail  # NameError: List, before the prompt's imports came first
    assert verdict.extracted.splitlines()[0] == "from typing import List"
    # an answer that imports it itself is run as written
    own = "```python\nfrom typing import List\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```"
    assert grade(item, own).extracted.count("from typing import List") == 1
