"""Graders: is an answer to a suite item right, and what was taken from it to decide.

`grade(item, text)` is synchronous: pure text matching for `numeric`, `exact`, `contains` and
`choice`; math-verify for `math`; the sandbox (a child process, waited for) for `code`.
`grade_async(item, text)` is what a runner calls: it never blocks the event loop, runs `math` in a
process pool (math-verify's timeouts use SIGALRM, which only works on a process's main thread) and
`code` in the sandbox without a thread. `judge` items are graded by a model the runner calls:
`judge_prompt` builds its messages and `parse_judge_reply` reads the verdict; `grade` refuses them.

How each grader reads an answer (the "extracted" part of a `Grade`):

- numeric: the content of the last `\\boxed{...}`; else the first number after the last "answer
  is" / "answer:" / "answer ="; else the last number in the text. A stated answer (boxed, after
  "answer is", a JSON field) that is an expression ("2\\sqrt{73}-6\\sqrt{2}") is wrong: it is read
  as votes and gates read it (core/answers.py), never as one of its numbers. Thousands commas ("1,234"),
  decimals, a sign, exponents, fractions ("3/4", "\\frac{3}{4}") and percent signs are read; a
  sentence's final period is not a decimal point; digits glued to letters ("CO2", "x2") are not
  numbers. A reference written as an integer ("976371285", "1,000", "25%") is matched only by the
  same value, however written ("976371285.0" and "9.76371285e8" too; 976371000 never); any other
  reference ("2.5", "3/4", "1e-3"), or an item with its own `tolerance`, by a number within that
  relative tolerance (default 1e-6).
- exact: the final answer, read and compared as votes and gates read `exact` answers
  (core/answers.py): a JSON "answer" field, else the last `\\boxed{}` or "the (final) answer is" /
  "Answer:" line, else the last non-blank line; NFKC, LaTeX text and fractions unwrapped, markdown
  `*`/`_`, surrounding quotes (straight or curly), `$` and punctuation (.,;:!?) removed, casefolded,
  whitespace collapsed; a number is compared as its value ("1,000" is 1000). The reference is read
  the same way.
- contains: any `|`-separated reference alternative occurs in the normalised answer as whole
  words: "Paris" matches "The capital is Paris."; "4" matches "2 + 2 = 4." but not "42", "4.5"
  or "-4". It does not notice an answer that names several candidates.
- choice: the letter the answer commits to, read as votes and gates read `choice` answers
  (core/answers.py, given the item's options): a JSON "answer" field; a `\\boxed{C}` (or
  `\\boxed{\\text{C}}`); an answer that is the letter ("C", "(c)", "**C**"); else "answer is (C)" /
  "Answer: C" / "answer: **C**" (the last such); else a final line that is the letter ("C", "(C)",
  "C.", "C) text"); else a final answer equal to one option's text; else the last "(C)" or "**C**"
  in the last 400 characters. Only letters of the item's options count, and never a letter inside a
  word.
- math: math-verify parses the reference (wrapped in `$...$` when it has no delimiters) and the
  answer (a boxed answer preferred) and compares them symbolically.
- code: the last ```python block (or, when there is none, the last plain ``` block; an unclosed
  final block counts), run in the sandbox (`stiva_tui.sandbox`: OS isolation, whole-run limits)
  against the item's tests; correct only when all pass. stdout is compared here (`same_output`:
  expected integers exactly, floats within 1e-6); functional results cross as encoded plain values
  and are compared here (`same_value`, likewise); assert-style tests run in a
  sandbox of their own that calls the candidate's functions through pipes. Raises
  `SandboxUnavailable` where no isolation can be had and `sandbox.unsafe` is not set.
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
import re
import threading
import unicodedata
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ..core.answers import final_answer, same_final
from ..sandbox import (
    SandboxResult,
    SandboxSettings,
    run_code_async,
    run_functional_async,
    run_sync,
    run_with_tests_async,
)
from .numbers import extract_number, integer_reference, parse_number, reference_value, written_value
from .suite import CodeTests, SuiteItem, answer_key, recorded_answer_line

__all__ = [
    "DEFAULT_CODE_TIMEOUT_S",
    "DEFAULT_TOLERANCE",
    "MATH_HARD_TIMEOUT_S",
    "Grade",
    "GraderError",
    "JudgeRequired",
    "extract_code",
    "extract_number",
    "grade",
    "grade_async",
    "judge_prompt",
    "parse_judge_reply",
    "parse_number",
    "same_output",
    "same_value",
    "shutdown_graders",
]

DEFAULT_TOLERANCE = 1e-6
DEFAULT_CODE_TIMEOUT_S = 10.0
MATH_HARD_TIMEOUT_S = 30.0
"""Past this a math grade is abandoned and its worker killed: math-verify's own 5 s alarms do not
interrupt sympy stuck inside C code."""
_MATH_WORKERS = 2


@dataclass(frozen=True, slots=True)
class Grade:
    """A verdict. `extracted` is what was read from the answer (a number, a letter, a code block);
    `detail` says why it is wrong, or anything a reader should know, in a line or a few."""

    correct: bool
    extracted: str
    detail: str | None = None


class GraderError(Exception):
    """An item this module cannot grade as asked."""


class JudgeRequired(GraderError):
    """`judge` items are graded by a pool model: use `judge_prompt` and `parse_judge_reply`."""


def grade(item: SuiteItem, answer_text: str, *, sandbox: SandboxSettings | None = None) -> Grade:
    """Grade `answer_text` against `item`, synchronously.

    `code` waits for sandbox runs; `math` runs math-verify in this process when called on the main
    thread (its SIGALRM timeouts need it) and in the grader process pool otherwise. From async
    code call `grade_async` instead. Raises `JudgeRequired` for `judge` items."""
    if item.grader == "judge":
        raise JudgeRequired(f"item {item.id!r} is graded by a judge model, not by grade()")
    if item.grader == "math":
        if threading.current_thread() is threading.main_thread():
            return Grade(*_math_verdict(item.answer, answer_text))
        pool = _math_pool()
        try:
            return Grade(*pool.submit(_math_verdict, item.answer, answer_text).result(MATH_HARD_TIMEOUT_S))
        except FutureTimeout:
            _discard_pool(pool)
            return Grade(False, "", f"math grading took longer than {MATH_HARD_TIMEOUT_S:.0f} s")
    if item.grader == "code":
        return _grade_code(item, answer_text, sandbox)
    return _TEXT_GRADERS[item.grader](item, answer_text)


async def grade_async(item: SuiteItem, answer_text: str, *, sandbox: SandboxSettings | None = None) -> Grade:
    """`grade` for an event loop: `math` in the grader process pool, `code` in the sandbox, both
    awaited; the text graders inline (they are fast). Raises `JudgeRequired` for `judge` items."""
    if item.grader == "judge":
        raise JudgeRequired(f"item {item.id!r} is graded by a judge model, not by grade_async()")
    if item.grader == "math":
        return await _grade_math_in_pool(item.answer, answer_text)
    if item.grader == "code":
        return await _grade_code_async(item, answer_text, sandbox)
    return _TEXT_GRADERS[item.grader](item, answer_text)


# --- numeric -------------------------------------------------------------------------------------


def _grade_numeric(item: SuiteItem, text: str) -> Grade:
    reference = parse_number(item.answer)
    if reference is None:  # validated at load; kept for items built by hand
        raise GraderError(f"item {item.id!r}: reference {item.answer!r} is not a number")
    stated = final_answer(text, "number")  # the one reader votes and gates use (core/answers.py)
    if stated is not None and stated.form == "math":  # "2\sqrt{73}-6\sqrt{2}" is not the number 2
        return Grade(False, stated.key, f"expected the number {item.answer}, the answer is an expression")
    found = extract_number(text)
    if found is None:
        return Grade(False, "", "no number in the answer")
    read, value = found
    whole = integer_reference(item.answer) if item.tolerance is None else None
    if whole is not None:  # an integer is right only when equal: 976371000 is not 976371285
        correct = written_value(read) == whole
    else:
        tolerance = item.tolerance if item.tolerance is not None else DEFAULT_TOLERANCE
        exact_read, exact_reference = written_value(read), reference_value(item.answer)
        if exact_read is not None and exact_reference is not None:  # exact values: 1e400 is not 7e500
            gap = abs(exact_read - exact_reference)
            scale = max(abs(exact_read), abs(exact_reference))
            correct = gap <= Fraction(tolerance) * scale or gap <= Fraction(1, 10**12)
        else:
            correct = math.isclose(value, reference, rel_tol=tolerance, abs_tol=1e-12)
    return Grade(correct, read, None if correct else f"expected {item.answer}, read {read}")


# --- exact and contains --------------------------------------------------------------------------


def _grade_exact(item: SuiteItem, text: str) -> Grade:
    """The answer's final answer against the reference's, both read as votes read `exact` answers."""
    read, expected = final_answer(text, "exact"), final_answer(item.answer, "exact")
    correct = same_final(read, expected)
    shown = str(read) if read is not None else ""
    return Grade(correct, shown, None if correct else f"expected {str(expected)!r}")


def _normalize_words(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("**", "").replace("`", "")
    return " ".join(text.casefold().split())


def _grade_contains(item: SuiteItem, text: str) -> Grade:
    haystack = _normalize_words(text)
    alternatives = [_normalize_words(a) for a in item.answer.split("|") if a.strip()]
    for alternative in alternatives:
        if re.search(_whole_words(alternative), haystack):
            return Grade(True, alternative)
    return Grade(False, "", f"none of {' | '.join(alternatives)} appears as a whole word")


def _whole_words(phrase: str) -> str:
    """A pattern for `phrase` not glued to a letter or digit, nor (for numbers) part of a bigger
    number: "4" is not in "42", "4.5", "3,4" or "-4"."""
    pattern = re.escape(phrase)
    head = r"(?<!\w)" + (r"(?<!\d[.,])(?<!-)" if phrase[:1].isdigit() else "")
    tail = r"(?!\w)" + (r"(?![.,]\d)" if phrase[-1:].isdigit() else "")
    return head + pattern + tail


# --- choice --------------------------------------------------------------------------------------


def _grade_choice(item: SuiteItem, text: str) -> Grade:
    """The letter the answer commits to, read as votes read `choice` answers, among the item's
    options (an answer that is one option's text reads as its letter)."""
    options = item.choices or ()
    letter = final_answer(text, "choice", options=options)
    if letter is None:
        return Grade(False, "", "no option letter found in the answer")
    correct = same_final(letter, final_answer(item.answer, "choice", options=options))
    return Grade(correct, str(letter), None if correct else f"expected {item.answer}")


# --- math ----------------------------------------------------------------------------------------


def _math_verdict(reference: str, text: str) -> tuple[bool, str, str | None]:
    """math-verify's verdict as plain values, so it crosses a process boundary. Top-level, so the
    spawned pool can import it."""
    try:
        from math_verify import parse, verify

        delimited = any(mark in reference for mark in ("$", "\\boxed", "\\(", "\\["))
        wrapped = reference if delimited else f"${reference}$"
        gold = parse(wrapped)
        if not gold:
            return False, "", f"math-verify cannot parse the reference {reference!r}"
        answer = parse(text)
        if not answer:
            return False, "", "no mathematical answer found"
        extracted = answer[1] if len(answer) > 1 and isinstance(answer[1], str) else str(answer[0])
        correct = bool(verify(gold, answer))
        return correct, extracted, None if correct else f"expected {reference}"
    except Exception as error:  # a grader never takes the run down with it
        return False, "", f"math-verify failed: {type(error).__name__}: {error}"


_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def _math_pool() -> ProcessPoolExecutor:
    """The grader process pool, started on first use. "spawn": no copy of the caller's threads,
    locks or event loop, and the same behaviour on every platform."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(
                max_workers=_MATH_WORKERS, mp_context=multiprocessing.get_context("spawn"), initializer=_warm_math
            )
        return _pool


def _warm_math() -> None:
    import math_verify  # noqa: F401  (a few seconds of imports, paid once per worker)


def shutdown_graders(*, wait: bool = True) -> None:
    """Stop the grader process pool, if one was started; the next math grade starts a new one."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=wait, cancel_futures=True)


def _discard_pool(pool: ProcessPoolExecutor) -> None:
    """Kill a pool whose worker is stuck, and forget it. Uses the executor's private `_processes`:
    the public API cannot stop a running task."""
    global _pool
    with _pool_lock:
        if _pool is pool:
            _pool = None
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)


async def _grade_math_in_pool(reference: str, text: str) -> Grade:
    loop = asyncio.get_running_loop()
    for attempt in (1, 2):
        pool = _math_pool()
        try:
            verdict = await asyncio.wait_for(
                loop.run_in_executor(pool, _math_verdict, reference, text), MATH_HARD_TIMEOUT_S
            )
            return Grade(*verdict)
        except TimeoutError:
            _discard_pool(pool)
            return Grade(False, "", f"math grading took longer than {MATH_HARD_TIMEOUT_S:.0f} s")
        except BrokenProcessPool:
            _discard_pool(pool)  # another grade killed it, or a worker died: one fresh try
            if attempt == 2:
                return Grade(False, "", "the math grader process died")
    raise AssertionError("unreachable")


# --- code ----------------------------------------------------------------------------------------

_PYTHON_TAGS = {"python", "py", "python3", "py3"}


def extract_code(text: str) -> str | None:
    """The last ```python block of `text`; if there is none, the last plain ``` block. A final
    block left open (an answer cut off) counts up to the end. None when there is no such block."""
    blocks: list[tuple[str, list[str]]] = []
    open_block: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if open_block is None:
            if stripped.startswith("```"):
                tag = stripped[3:].strip().split(maxsplit=1)
                open_block = []
                blocks.append(((tag[0] if tag else "").lower(), open_block))
        elif stripped.startswith("```"):
            open_block = None
        else:
            open_block.append(line)
    for wanted in (lambda tag: tag in _PYTHON_TAGS, lambda tag: tag == ""):
        chosen = [body for tag, body in blocks if wanted(tag)]
        if chosen:
            return "\n".join(chosen[-1])
    return None


_IMPORT_LINE = re.compile(r"^(?:from\s+[\w.]+\s+import\s+[\w., ()*]+|import\s+[\w., ]+)$")


def prompt_imports(question: str, code: str) -> str:
    """`code` with the import lines of the question's own code put first when the answer lacks
    them, as HumanEval's harness runs prompt + completion: a HumanEval prompt starts with
    `from typing import List`, and an answer that repeats only the function fails on the name."""
    present = {line.strip() for line in code.splitlines()}
    missing = []
    for line in question.splitlines():
        stripped = line.strip()
        if _IMPORT_LINE.match(stripped) and stripped not in present and stripped not in missing:
            missing.append(stripped)
    return "\n".join(missing + [code]) if missing else code


def _grade_code(item: SuiteItem, text: str, sandbox: SandboxSettings | None) -> Grade:
    return run_sync(_grade_code_async(item, text, sandbox))


async def _grade_code_async(item: SuiteItem, text: str, sandbox: SandboxSettings | None) -> Grade:
    """Run the answer's code against the item's tests in the sandbox. Every verdict is decided
    outside the candidate's process: stdout compared here, functional results compared here after
    crossing as encoded values, assert-style tests run in a sandbox of their own."""
    code = extract_code(text)
    if code is None or not code.strip():
        return Grade(False, "", "no Python code block in the answer")
    code = prompt_imports(item.question, code)
    settings = sandbox or SandboxSettings()
    timeout = item.timeout_s or settings.timeout_s
    tests = item.tests
    if isinstance(tests, str):
        tested = await run_with_tests_async(code, tests, timeout_s=timeout, settings=settings)
        return Grade(tested.passed, code, _with_note(item, None if tested.passed else tested.error))
    if tests is None:
        raise GraderError(f"code item {item.id!r} has no tests")
    for index, case in enumerate(tests.stdin_stdout, 1):
        # Keep enough output to compare against a long expected answer.
        limit = max(settings.output_bytes, 2 * len(case.output.encode("utf-8")) + 1024)
        result = await run_code_async(code, stdin=case.input, timeout_s=timeout, settings=settings, output_limit=limit)
        failure = None
        if not result.ok:
            failure = f"case {index}: " + _failure(result, "")
        elif not same_output(result.stdout, case.output):
            failure = f"case {index}: expected {_excerpt(case.output)!r}, got {_excerpt(result.stdout)!r}"
        if failure is not None:
            return Grade(False, code, _with_note(item, failure))
    if tests.functional is not None:
        failure = await _functional(
            code,
            tests.functional.fn_name,
            [(case.input, case.output) for case in tests.functional.cases],
            timeout,
            settings,
        )
        if failure is not None:
            return Grade(False, code, _with_note(item, failure))
    return Grade(True, code, _with_note(item, None))


def _with_note(item: SuiteItem, failure: str | None) -> str | None:
    note = item.tests.note if isinstance(item.tests, CodeTests) else None
    return "; ".join(part for part in (failure, note) if part) or None


async def _functional(
    code: str, fn_name: str, cases: list[tuple[list[Any], Any]], timeout: float, settings: SandboxSettings
) -> str | None:
    """None when every case's result equals the expected one; else the first failure."""
    total = min(timeout * len(cases), max(timeout, 60.0))
    result, outcomes = await run_functional_async(
        code, fn_name, [arguments for arguments, _ in cases], timeout_s=total, settings=settings
    )
    by_case = {outcome.case: outcome for outcome in outcomes}
    for index, (arguments, expected) in enumerate(cases):
        outcome = by_case.get(index)
        call = f"case {index + 1}: {fn_name}(*{_excerpt(json.dumps(arguments))})"
        if outcome is None:
            return f"{call}: " + _failure(result, "no result (the program stopped first)")
        if outcome.error is not None:
            return f"{call} raised {outcome.error}"
        got = _plain(outcome.value)
        if not same_value(got, expected):
            return f"{call} returned {_excerpt(_show(got))}, expected {_excerpt(json.dumps(expected))}"
    return None


def _plain(value: Any) -> Any:
    """A crossed value as JSON would hold it: tuples and sets as lists, dict keys as text."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return [_plain(v) for v in sorted(value, key=repr)]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _show(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def same_output(got: str, expected: str) -> bool:
    """Program output equal to the expected output: line by line, spaces around lines and blank
    lines around the output ignored; failing that, token by token, where an expected integer
    ("976371285", "-3") is matched only by the same value ("976371285", "976371285.0", "9.76371285e8")
    and an expected float ("0.5", "1e-3") by a number within 1e-6 of it (relative or absolute)."""

    def lines(text: str) -> list[str]:
        return [row.strip() for row in text.strip().splitlines()]

    if lines(got) == lines(expected):
        return True
    got_tokens, expected_tokens = got.split(), expected.split()
    if len(got_tokens) != len(expected_tokens):
        return False
    return all(a == b or _same_number(a, b) for a, b in zip(got_tokens, expected_tokens))


_INTEGER_TOKEN = re.compile(r"[-+]?\d+")
_DECIMAL_TOKEN = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _same_number(got: str, expected: str) -> bool:
    """One output token equal to the expected one as a number (see `same_output`)."""
    if _INTEGER_TOKEN.fullmatch(expected):
        # Decimal: exact, whatever the size, and an exponent costs nothing ("1e999999" is no big int)
        return bool(_DECIMAL_TOKEN.fullmatch(got)) and Decimal(got) == Decimal(expected)
    try:
        return math.isclose(float(got), float(expected), rel_tol=1e-6, abs_tol=1e-6)
    except ValueError:
        return False


def same_value(got: Any, expected: Any) -> bool:
    """A function's result equal to the expected one, after JSON round-tripping (tuples are
    lists): an expected integer only by an equal number (976371285.0 too, never 976371000), an
    expected float by a number within 1e-6 of it (relative; 1e-9 absolute)."""
    if isinstance(got, bool) or isinstance(expected, bool):
        return got is expected
    if isinstance(got, int | float) and isinstance(expected, int):
        return bool(got == expected)  # Python compares an int and a float exactly
    if isinstance(got, int | float) and isinstance(expected, float):
        try:
            return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9)
        except OverflowError:  # an int past a float's range
            return False
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(same_value(a, b) for a, b in zip(got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(same_value(got[k], expected[k]) for k in got)
    return bool(got == expected)


def _failure(result: SandboxResult, fallback: str) -> str:
    if result.timed_out:
        return "timed out"
    if result.limit:
        return f"stopped at a sandbox limit: {result.limit}"
    if result.returncode is not None and result.returncode < 0:
        said = _tail(result.stderr)
        return f"killed by signal {-result.returncode}" + (f": {said}" if said else "")
    if not result.ok:
        return _tail(result.stderr) or f"exit status {result.returncode}"
    return fallback


def _tail(text: str, limit: int = 400) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    tail = "\n".join(lines[-4:])
    return tail[-limit:]


def _excerpt(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- judge ---------------------------------------------------------------------------------------

_JUDGE_RUBRIC = (
    "You grade an answer to a question against a reference answer. Decide only whether the "
    "candidate's final answer agrees with the reference in meaning; ignore style, length and the "
    "reasoning shown, and do not solve the question yourself. A candidate that gives several "
    "different final answers, or none, is incorrect.\n"
    "Reply with at most two sentences of reasons, then CORRECT or INCORRECT alone on the last line."
)


def judge_prompt(item: SuiteItem, answer: str) -> list[dict[str, str]]:
    """Chat messages asking a judge model whether `answer` is right for `item`."""
    user = (
        f"Question:\n{item.question.strip()}\n\nReference answer:\n{item.answer.strip()}\n\n"
        f"Candidate answer:\n{answer.strip()}"
    )
    return [{"role": "system", "content": _JUDGE_RUBRIC}, {"role": "user", "content": user}]


_VERDICT = re.compile(r"\b(NOT\s+CORRECT|INCORRECT|CORRECT)\b", re.IGNORECASE)


def parse_judge_reply(text: str) -> Grade:
    """The verdict of a judge's reply: the last CORRECT/INCORRECT on its last line; failing that,
    the last one anywhere (noted in `detail`); none at all is a wrong grade with a detail."""
    lines = [line for line in text.splitlines() if line.strip()]
    on_last = _VERDICT.findall(lines[-1]) if lines else []
    found = on_last or _VERDICT.findall(text)
    if not found:
        return Grade(False, "", "the judge's reply has no CORRECT or INCORRECT")
    verdict = "CORRECT" if found[-1].upper() == "CORRECT" else "INCORRECT"
    detail = None if on_last else "the verdict was not on the judge's last line"
    return Grade(verdict == "CORRECT", verdict, detail)


def _grade_recorded(item: SuiteItem, text: str) -> Grade:
    """The score recorded for this very answer (a recorded pool's truth), never a re-grade. The
    extracted answer is the answer's last line (the score is the grade, not an answer)."""
    score = (item.recorded or {}).get(answer_key(text))
    if score is None:
        return Grade(False, "", "not one of the recorded answers to this item, so it has no recorded score")
    detail = None if score >= 0.5 else f"recorded score {score:g}"
    return Grade(score >= 0.5, recorded_answer_line(text), detail)


_TEXT_GRADERS: dict[str, Callable[[SuiteItem, str], Grade]] = {
    "recorded": _grade_recorded,
    "numeric": _grade_numeric,
    "exact": _grade_exact,
    "contains": _grade_contains,
    "choice": _grade_choice,
}
