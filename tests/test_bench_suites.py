"""Bench suites: the JSONL format and its errors, content hashes, the seeded shuffle, the built-ins
(every answer of `basic` checked here), and the public-format loaders on small fixture files."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from math import factorial, gcd, lcm, sqrt
from pathlib import Path

import pytest

from stiva_tui.evals import loaders as loaders_module
from stiva_tui.evals.graders import grade
from stiva_tui.evals.loaders import list_builtins, list_formats, load_suite
from stiva_tui.evals.suite import CodeTests, SuiteError, SuiteItem, parse_suite, question_text, shuffled_choices

FIXTURES = Path(__file__).parent / "bench_fixtures"


def write(tmp_path: Path, *lines: object, name: str = "mine.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


NUMERIC = {"id": "n1", "question": "2 + 2?", "answer": "4", "grader": "numeric"}
CHOICE = {
    "id": "c1",
    "question": "Closest planet to the Sun?",
    "grader": "choice",
    "choices": ["Venus", "Mercury", "Mars", "Earth"],
    "answer": "B",
}


# --- the format and its errors -----------------------------------------------------------------


def test_a_suite_file_loads_with_its_description_and_comments(tmp_path):
    path = write(tmp_path, {"_suite": "Two questions"}, NUMERIC, "", {**CHOICE, "_note": "a comment"})
    suite = load_suite(str(path))
    assert (suite.name, suite.description, len(suite)) == ("mine", "Two questions", 2)
    assert [i.id for i in suite] == ["n1", "c1"]
    assert suite.item("c1").choices == ("Venus", "Mercury", "Mars", "Earth")
    with pytest.raises(KeyError):
        suite.item("nope")


def test_a_line_ends_only_at_a_newline_not_at_unicode_line_breaks(tmp_path):
    # JSON leaves U+0085, U+2028 and U+2029 unescaped inside strings (written with ensure_ascii=False,
    # as `stiva bench import` writes its suites); an MMLU question holds U+0085. A CRLF file still reads.
    odd = {**NUMERIC, "question": "a\x85b\u2028c\u2029d\x0be\x1cf?"}
    text = json.dumps(odd, ensure_ascii=False) + "\r\n" + json.dumps(CHOICE, ensure_ascii=False) + "\r\n"
    suite = parse_suite(text, name="odd")
    assert [i.id for i in suite] == ["n1", "c1"]
    assert suite.item("n1").question == odd["question"]


@pytest.mark.parametrize(
    "bad, line, says",
    [
        ({**NUMERIC, "id": "n2", "grader": "fuzzy"}, 2, "unknown grader 'fuzzy'"),
        ({"question": "no id?", "answer": "1", "grader": "numeric"}, 2, "id"),
        ({"id": "n2", "answer": "1", "grader": "numeric"}, 2, "question"),
        ({"id": "n2", "question": "   ", "answer": "1", "grader": "numeric"}, 2, "question is blank"),
        ({**NUMERIC}, 2, "duplicate id 'n1' (first on line 1)"),
        ({"id": "c2", "question": "Which?", "answer": "A", "grader": "choice"}, 2, "needs at least two choices"),
        ({**CHOICE, "id": "c2", "answer": "E"}, 2, "neither a letter A-D"),
        ({**CHOICE, "id": "c2", "choices": ["x", "x"], "answer": "A"}, 2, "distinct"),
        ({"id": "k1", "question": "Write f.", "grader": "code"}, 2, "needs tests"),
        ({"id": "k1", "question": "Write f.", "grader": "code", "tests": {"stdin_stdout": []}}, 2, "no cases"),
        ({**NUMERIC, "id": "n2", "answer": "four"}, 2, "must be one number"),
        ({**NUMERIC, "id": "n2", "answer": ""}, 2, "needs an answer"),
        ({**NUMERIC, "id": "n2", "tolerence": 0.1}, 2, "tolerence: unknown key"),
        ({**NUMERIC, "id": "n2", "tests": "assert True"}, 2, "tests is only for code items"),
        ({**NUMERIC, "id": "n2", "shuffle": "yes"}, 2, "shuffle"),
        ("{not json", 2, "not valid JSON"),
        ("[1, 2]", 2, "must be a JSON object"),
        ({"_suite": "late description"}, 2, "must come first"),
    ],
)
def test_errors_name_the_file_and_line(tmp_path, bad, line, says):
    path = write(tmp_path, NUMERIC, bad)
    with pytest.raises(SuiteError) as caught:
        load_suite(str(path))
    error = caught.value
    assert error.line == line and error.source == str(path)
    assert str(error).startswith(f"{path}:{line}: ")
    assert says in str(error), str(error)


def test_an_empty_suite_and_an_unknown_spec_are_errors(tmp_path):
    with pytest.raises(SuiteError, match="no items"):
        load_suite(str(write(tmp_path, {"_suite": "nothing"})))
    with pytest.raises(SuiteError, match="not a built-in .*basic.*FORMAT:PATH"):
        load_suite("no-such-suite")
    with pytest.raises(SuiteError, match="^inline:1: item 'n1': grader: unknown grader"):
        parse_suite(json.dumps({**NUMERIC, "grader": "fuzzy"}), name="x", source="inline")


def test_items_are_immutable():
    item = SuiteItem.model_validate(NUMERIC)
    with pytest.raises(Exception):
        item.answer = "5"  # type: ignore[misc]
    code = SuiteItem.model_validate(
        {
            "id": "k",
            "question": "f?",
            "grader": "code",
            "tests": {"functional": {"fn_name": "f", "cases": [{"input": [[1]], "output": [1]}]}},
        }
    )
    assert len({item, code, SuiteItem.model_validate(NUMERIC)}) == 2  # hashable, by content


# --- content hash ----------------------------------------------------------------------------------


def test_content_hash_is_stable_and_pinned(tmp_path):
    text = "\n".join(json.dumps(item) for item in (NUMERIC, CHOICE))
    first = parse_suite(text, name="a")
    again = parse_suite(text, name="another name", source="elsewhere")
    assert first.content_hash == again.content_hash
    # Pinned: a runner keys resume state on this, so the hashing itself must not drift. If you
    # change how items are normalised on purpose, update this and say so: old resume state is lost.
    assert first.content_hash == "4e0c82b7c6d74fec38fe1821fb29310e5f9e238e6f8818263127cfb84d1b3ce3"


def test_content_hash_ignores_comments_and_key_order_but_not_content():
    base = parse_suite("\n".join(json.dumps(i) for i in (NUMERIC, CHOICE)), name="a").content_hash
    reordered_keys = json.dumps(dict(reversed(list(NUMERIC.items()))))
    commented = json.dumps({**CHOICE, "_why": "a note"})
    same = parse_suite(f'{{"_suite": "described"}}\n{reordered_keys}\n{commented}', name="b").content_hash
    assert same == base
    letter_as_text = parse_suite(
        "\n".join(json.dumps(i) for i in (NUMERIC, {**CHOICE, "answer": "Mercury"})), name="c"
    ).content_hash
    assert letter_as_text == base  # the same item once normalised
    changed = [
        (NUMERIC | {"answer": "5"}, CHOICE),
        (NUMERIC | {"question": "2 + 2 = ?"}, CHOICE),
        (NUMERIC | {"tolerance": 0.01}, CHOICE),
        (NUMERIC, CHOICE | {"answer": "C"}),
        (CHOICE, NUMERIC),  # order
    ]
    hashes = {parse_suite("\n".join(json.dumps(i) for i in pair), name="d").content_hash for pair in changed}
    assert base not in hashes and len(hashes) == len(changed)


def test_normalised_items_round_trip():
    loaded = load_suite("basic")
    dumped = "\n".join(json.dumps(item.model_dump(mode="json")) for item in loaded)
    again = parse_suite(dumped, name="basic")
    assert again.items == loaded.items and again.content_hash == loaded.content_hash


# --- the seeded shuffle ------------------------------------------------------------------------------


def test_shuffle_is_seeded_by_id_stable_and_idempotent():
    options = ["alpha", "beta", "gamma", "delta"]
    once = shuffled_choices("q-17", options)
    assert once == shuffled_choices("q-17", list(reversed(options)))  # the input order does not matter
    assert shuffled_choices("q-17", once) == once
    orders = {tuple(shuffled_choices(f"q-{n}", options)) for n in range(40)}
    assert len(orders) > 10  # different ids, different orders
    # Pinned, as a resumed run on another machine must see the same order.
    assert once == ["delta", "gamma", "beta", "alpha"]


def test_a_shuffled_item_keeps_its_answer_on_the_right_option():
    data = {
        "id": "gpqa-1",
        "question": "Which is a noble gas?",
        "grader": "choice",
        "shuffle": True,
        "choices": ["Argon", "Oxygen", "Nitrogen", "Chlorine"],
        "answer": "A",
    }
    item = SuiteItem.model_validate(data)
    assert item.choices == tuple(shuffled_choices("gpqa-1", data["choices"]))
    assert item.choices[ord(item.answer) - ord("A")] == "Argon"
    assert SuiteItem.model_validate(item.model_dump()) == item
    text = question_text(item)
    assert f"{item.answer}. Argon" in text
    assert text.splitlines()[-1].startswith("Answer with the letter")
    right = grade(item, f"The answer is ({item.answer}).")
    wrong = grade(item, "The answer is ({}).".format("B" if item.answer != "B" else "C"))
    assert right.correct and not wrong.correct


def test_question_text():
    choice = SuiteItem.model_validate(CHOICE)
    assert question_text(choice) == (
        "Closest planet to the Sun?\n\nA. Venus\nB. Mercury\nC. Mars\nD. Earth\n\n"
        "Answer with the letter of the correct option (A, B, C or D) alone on the last line."
    )
    code = SuiteItem.model_validate({"id": "k", "question": "Write f.", "grader": "code", "tests": "assert f()"})
    assert question_text(code).startswith("Write f.\n\n") and "```python" in question_text(code)
    assert question_text(SuiteItem.model_validate(NUMERIC)) == "2 + 2?"


# --- built-ins -------------------------------------------------------------------------------------


def test_builtins_list_every_jsonl_in_the_data_folder(tmp_path, monkeypatch):
    names = {info.name for info in list_builtins()}
    shipped = Path(loaders_module.__file__).parent / "data"
    assert "basic" in names and names == {path.stem for path in shipped.glob("*.jsonl")}
    write(tmp_path, {"_suite": "Extra"}, NUMERIC, name="extra.jsonl")
    write(tmp_path, CHOICE, name="plain.jsonl")
    (tmp_path / "notes.txt").write_text("not a suite")
    monkeypatch.setattr(loaders_module, "_data_dir", lambda: tmp_path)
    listed = {info.name: info for info in list_builtins()}
    assert set(listed) == {"extra", "plain"}
    assert (listed["extra"].items, listed["extra"].description) == (1, "Extra")
    assert listed["plain"].description == "1 questions graded by choice"
    assert load_suite("extra").items[0].id == "n1"


def test_every_builtin_loads():
    for info in list_builtins():
        suite = load_suite(info.name)
        assert len(suite) == info.items > 0 and suite.name == info.name


def test_basic_has_the_planned_mix():
    counts: dict[str, int] = {}
    for item in load_suite("basic"):
        counts[item.grader] = counts.get(item.grader, 0) + 1
    assert counts["numeric"] >= 25 and counts["choice"] >= 15 and counts["math"] >= 5 and counts["code"] >= 15
    assert 55 <= sum(counts.values()) <= 70


# Every numeric answer of `basic`, computed here independently of the file.
NUMERIC_ANSWERS = {
    "num-mul": 17 * 23,
    "num-add-thousands": 1234 + 5678,
    "num-div": 144 // 12,
    "num-power": 2**10,
    "num-percent": Fraction(15, 100) * 240,
    "num-sqrt": sqrt(169),
    "num-factorial": factorial(7),
    "num-subtract": 1000 - 387,
    "num-pencils": 35 * 12,
    "num-train": 80 * 2.5,
    "num-apples": 3 * (48 // 4),
    "num-rectangle": 12 * 7,
    "num-gauss": sum(range(1, 101)),
    "num-recipe": Fraction(250, 4) * 10,
    "num-linear": 19 - 7,
    "num-mean": Fraction(sum([4, 8, 15, 16, 23, 42]), 6),
    "num-discount": 40 * Fraction(3, 4),
    "num-minutes": 3.5 * 60,
    "num-decimal": 3 / 8,
    "num-temperature": -5 + 12,
    "num-seconds-day": 24 * 60 * 60,
    "num-gcd": gcd(84, 126),
    "num-lcm": lcm(6, 8, 10),
    "num-fuel": Fraction(6, 100) * 350,
    "num-workers": Fraction(5 * 12, 3),
    "num-negatives": (-8) * (-7) + 3,
}

# The text of the right option of every choice item of `basic`.
CHOICE_ANSWERS = {
    "mc-planet": "Mercury",
    "mc-gold": "Au",
    "mc-photosynthesis": "Carbon dioxide",
    "mc-syllogism": "All bloops are lazzies",
    "mc-boiling": "100 °C",
    "mc-austen": "Jane Austen",
    "mc-ocean": "Pacific Ocean",
    "mc-mitochondria": "Mitochondrion",
    "mc-heights": "Lee",
    "mc-sequence": "42",
    "mc-force-unit": "Newton",
    "mc-hydrogen": "Hydrogen",
    "mc-ww2": "1945",
    "mc-modus-tollens": "It is not raining",
    "mc-prime": "29",
}

# For every math item: an equivalent form of the answer (right) and a near miss (wrong).
MATH_ANSWERS = {
    "math-linear": ("x = \\boxed{0.75}", "x = \\boxed{\\frac{4}{3}}"),
    "math-fractions": ("\\boxed{\\frac{5}{6}}", "\\boxed{\\frac{3}{9}}"),
    "math-radical": ("\\boxed{5\\sqrt{2}}", "\\boxed{2\\sqrt{5}}"),
    "math-expand": ("\\boxed{x^2+4x+4}", "\\boxed{x^2+4}"),
    "math-radians": ("\\boxed{\\pi/3}", "\\boxed{\\frac{\\pi}{6}}"),
}


def test_basic_numeric_answers_are_right():
    items = {item.id: item for item in load_suite("basic") if item.grader == "numeric"}
    assert set(items) == set(NUMERIC_ANSWERS)
    for item_id, value in NUMERIC_ANSWERS.items():
        result = grade(items[item_id], f"The answer is {float(value)!r}")
        assert result.correct, (item_id, items[item_id].answer, value)


def test_basic_choice_answers_are_right():
    items = {item.id: item for item in load_suite("basic") if item.grader == "choice"}
    assert set(items) == set(CHOICE_ANSWERS)
    for item_id, text in CHOICE_ANSWERS.items():
        item = items[item_id]
        assert item.choices[ord(item.answer) - ord("A")] == text, item_id
    used = {item.answer for item in items.values()}
    assert used == {"A", "B", "C", "D"}  # the right answer is not always in the same place


def test_basic_math_answers_verify_and_near_misses_do_not():
    items = {item.id: item for item in load_suite("basic") if item.grader == "math"}
    assert set(items) == set(MATH_ANSWERS)
    for item_id, (right, wrong) in MATH_ANSWERS.items():
        assert grade(items[item_id], f"So the answer is ${items[item_id].answer}$.").correct, item_id
        assert grade(items[item_id], right).correct, item_id
        assert not grade(items[item_id], wrong).correct, item_id


# A reference solution and a subtly wrong one for every code item of `basic`: the item's tests must
# pass the first and fail the second, or they do not test what the question asks.
CODE_SOLUTIONS = {
    "code-palindrome": (
        "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]",
        "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalpha()]\n    return t == t[::-1]",
    ),
    "code-fizzbuzz": (
        "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n"
        "        out.append('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else str(i))\n"
        "    return out",
        "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n"
        "        out.append('Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else 'FizzBuzz' if i % 15 == 0 else str(i))\n"
        "    return out",
    ),
    "code-second-largest": (
        "def second_largest(nums):\n    values = sorted(set(nums))\n    return values[-2] if len(values) > 1 else None",
        "def second_largest(nums):\n    values = sorted(nums)\n    return values[-2] if len(values) > 1 else None",
    ),
    "code-vowels": (
        "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)",
        "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s)",
    ),
    "code-flatten": (
        "def flatten(items):\n    out = []\n    for x in items:\n"
        "        out.extend(flatten(x) if isinstance(x, list) else [x])\n    return out",
        "def flatten(items):\n    out = []\n    for x in items:\n"
        "        out.extend(x if isinstance(x, list) else [x])\n    return out",
    ),
    "code-word-frequencies": (
        "import re\ndef word_frequencies(text):\n    counts = {}\n"
        "    for w in re.findall('[a-z]+', text.lower()):\n        counts[w] = counts.get(w, 0) + 1\n    return counts",
        "def word_frequencies(text):\n    counts = {}\n"
        "    for w in text.lower().split():\n        counts[w] = counts.get(w, 0) + 1\n    return counts",
    ),
    "code-is-prime": (
        "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n"
        "    while i * i <= n:\n        if n % i == 0:\n            return False\n        i += 1\n    return True",
        "def is_prime(n):\n    if n < 2:\n        return False\n    return all(n % i for i in range(2, int(n ** 0.5)))",
    ),
    "code-fibonacci": (
        "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
        "def fibonacci(n):\n    a, b = 1, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
    ),
    "code-reverse-words": (
        "def reverse_words(s):\n    return ' '.join(reversed(s.split()))",
        "def reverse_words(s):\n    return ' '.join(reversed(s.split(' ')))",
    ),
    "code-merge-sorted": (
        "def merge_sorted(a, b):\n    out, i, j = [], 0, 0\n    while i < len(a) and j < len(b):\n"
        "        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n"
        "            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]",
        "def merge_sorted(a, b):\n    return sorted(set(a) | set(b))",
    ),
    "code-run-length": (
        "from itertools import groupby\ndef run_length_encode(s):\n"
        "    return ''.join(f'{c}{len(list(g))}' for c, g in groupby(s))",
        "def run_length_encode(s):\n    return ''.join(f'{c}{s.count(c)}' for c in dict.fromkeys(s))",
    ),
    "code-brackets": (
        "def balanced(s):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for c in s:\n"
        "        if c in '([{':\n            stack.append(c)\n        elif c in pairs:\n"
        "            if not stack or stack.pop() != pairs[c]:\n                return False\n    return not stack",
        "def balanced(s):\n    return all(s.count(o) == s.count(c) for o, c in ('()', '[]', '{}'))",
    ),
    "code-roman": (
        "def roman_to_int(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n"
        "    total = 0\n    for i, c in enumerate(s):\n"
        "        if i + 1 < len(s) and v[c] < v[s[i + 1]]:\n            total -= v[c]\n"
        "        else:\n            total += v[c]\n    return total",
        "def roman_to_int(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n"
        "    return sum(v[c] for c in s)",
    ),
    "code-two-sum": (
        "def two_sum(nums, target):\n    seen = {}\n    for j, n in enumerate(nums):\n"
        "        if target - n in seen:\n            return (seen[target - n], j)\n"
        "        seen.setdefault(n, j)\n    return None",
        "def two_sum(nums, target):\n    seen = {}\n    for j, n in enumerate(nums):\n"
        "        if target - n in seen:\n            return (seen[target - n], j)\n"
        "        seen[n] = j\n    return None",
    ),
    "code-chunk": (
        "def chunk(items, size):\n    return [items[i:i + size] for i in range(0, len(items), size)]",
        "def chunk(items, size):\n    return [items[i:i + size] for i in range(0, len(items) - size + 1, size)]",
    ),
}


def test_basic_code_tests_pass_the_reference_and_fail_a_wrong_solution():
    items = {item.id: item for item in load_suite("basic") if item.grader == "code"}
    assert set(items) == set(CODE_SOLUTIONS)
    for item_id, (reference, wrong) in CODE_SOLUTIONS.items():
        right = grade(items[item_id], f"```python\n{reference}\n```")
        assert right.correct, (item_id, right.detail)
        miss = grade(items[item_id], f"```python\n{wrong}\n```")
        assert not miss.correct, item_id


def test_offline_suite_uses_the_graders_it_is_made_for():
    if not (Path(loaders_module.__file__).parent / "data" / "offline.jsonl").is_file():
        pytest.skip("offline.jsonl is written with the offline bench, not with this layer")
    graders = {item.grader for item in load_suite("offline")}
    assert graders <= {"contains", "numeric"}


# --- public-format loaders ---------------------------------------------------------------------------


def test_formats_are_listed():
    assert [(f.name, f.grader) for f in list_formats()] == [
        ("aime", "numeric"),
        ("math500", "math"),
        ("gpqa", "choice"),
        ("livecodebench", "code"),
    ]


def test_aime_jsonl_and_csv():
    suite = load_suite(f"aime:{FIXTURES / 'aime2024.jsonl'}")
    assert suite.name == "aime:aime2024"
    assert [(i.id, i.answer, i.grader) for i in suite] == [
        ("2024-I-1", "24", "numeric"),
        ("2024-I-2", "24", "numeric"),
        ("2024-II-1", "024", "numeric"),
    ]
    assert grade(suite.items[2], "So the answer is $\\boxed{24}$.").correct  # "024" read as 24
    csv_suite = load_suite(f"aime:{FIXTURES / 'aime2025.csv'}")
    assert [(i.id, i.question, i.answer) for i in csv_suite] == [
        ("1", "What is $3 \\times 37$?", "111"),
        ("2", "Find the number of subsets of a 5-element set.", "32"),
    ]


def test_math500():
    suite = load_suite(f"math500:{FIXTURES / 'math500.jsonl'}")
    first = suite.items[0]
    assert (first.id, first.grader, first.answer) == ("test/algebra/1.json", "math", "\\frac{3}{4}")
    assert first.meta == {"subject": "Algebra", "level": 1}
    assert grade(first, "\\boxed{0.75}").correct
    assert not grade(first, "\\boxed{0.7}").correct


def test_gpqa_csv_and_json_shuffle_by_record_id():
    suite = load_suite(f"gpqa:{FIXTURES / 'gpqa_diamond.csv'}")
    photon = suite.item("recAAA111")
    assert photon.question == "Which particle carries\nthe electromagnetic force?"  # a quoted multi-line field
    assert photon.shuffle and set(photon.choices) == {"Photon", "Gluon", "W boson", "Graviton"}
    assert photon.choices == tuple(shuffled_choices("recAAA111", ["Photon", "Gluon", "W boson", "Graviton"]))
    assert photon.choices[ord(photon.answer) - ord("A")] == "Photon"
    assert photon.meta == {"domain": "Physics"}
    letters = [item.answer for item in suite]
    assert letters != ["A", "A", "A"]  # the right option is not left first
    assert load_suite(f"gpqa:{FIXTURES / 'gpqa_diamond.csv'}").content_hash == suite.content_hash
    rows = load_suite(f"gpqa:{FIXTURES / 'gpqa_rows.json'}")
    weber = rows.item("recDDD444")
    assert weber.choices[ord(weber.answer) - ord("A")] == "Weber"


def test_livecodebench_decodes_private_cases_without_unpickling():
    suite = load_suite(f"livecodebench:{FIXTURES / 'livecodebench.jsonl'}")
    summing, two_sum, doubling = suite.items
    assert isinstance(summing.tests, CodeTests) and summing.tests.note is None
    assert [case.input for case in summing.tests.stdin_stdout] == ["3\n1 2 3\n", "2\n10 -4\n", "1\n1000000000\n"]
    assert "standard input" in summing.question
    assert two_sum.tests.functional.fn_name == "twoSum"
    assert [(c.input, c.output) for c in two_sum.tests.functional.cases] == [
        ([[2, 7, 11, 15], 9], [0, 1]),
        ([[3, 2, 4], 6], [1, 2]),
    ]
    assert "class Solution" in two_sum.question
    assert len(doubling.tests.stdin_stdout) == 1 and "never unpickled" in doubling.tests.note
    assert doubling.meta["platform"] == "codeforces"


def test_livecodebench_items_grade_for_real():
    suite = load_suite(f"livecodebench:{FIXTURES / 'livecodebench.jsonl'}")
    summing, two_sum, doubling = suite.items
    adder = "```python\nn = int(input())\nprint(sum(map(int, input().split())))\n```"
    assert grade(summing, adder).correct
    assert not grade(summing, "```python\ninput()\nprint(sum(map(abs, map(int, input().split()))))\n```").correct
    solution = (
        "```python\nclass Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        for i in range(len(nums)):\n            for j in range(i + 1, len(nums)):\n"
        "                if nums[i] + nums[j] == target:\n                    return [i, j]\n```"
    )
    assert grade(two_sum, solution).correct
    doubled = grade(doubling, "```python\nprint(2 * int(input()))\n```")
    assert doubled.correct and "never unpickled" in doubled.detail


def test_loader_errors(tmp_path, monkeypatch):
    broken = tmp_path / "gpqa.csv"
    broken.write_text("Record ID,Question,Correct Answer\nrec1,Why?,Because\n")
    with pytest.raises(SuiteError, match=r"record 1.*no column Incorrect Answer 1 \(the record has: "):
        load_suite(f"gpqa:{broken}")
    with pytest.raises(SuiteError, match="no such file"):
        load_suite(f"aime:{tmp_path / 'missing.jsonl'}")
    with pytest.raises(SuiteError, match="unsupported file type"):
        load_suite(f"aime:{write(tmp_path, NUMERIC, name='aime.txt')}")
    bad_line = write(tmp_path, {"problem": "1+1?", "answer": 2}, {"problem": "no answer"}, name="aime.jsonl")
    with pytest.raises(SuiteError) as caught:
        load_suite(f"aime:{bad_line}")
    assert caught.value.line == 2 and "no column answer / Answer" in str(caught.value)
    parquet = tmp_path / "math.parquet"
    parquet.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(SuiteError, match="Parquet needs pyarrow"):
        load_suite(f"math500:{parquet}")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(SuiteError, match="needs the `datasets` package"):
        load_suite("math500:HuggingFaceH4/MATH-500")


def _hostile_files(tmp_path: Path) -> dict[str, Path]:
    """Small files (under 1 MB each) that broke the loaders with tracebacks."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = {}
    deep = "[" * 100_000 + "]" * 100_000
    files["nested.json"] = tmp_path / "nested.json"
    files["nested.json"].write_text(deep)
    files["nested.jsonl"] = tmp_path / "nested.jsonl"
    files["nested.jsonl"].write_text(
        json.dumps({"problem": "1+1?", "answer": 2}) + "\n" + '{"problem": "deep", "answer": ' + deep + "}\n"
    )
    files["livecodebench nested"] = tmp_path / "lcb.jsonl"
    files["livecodebench nested"].write_text(
        json.dumps({"question_id": "q1", "question_content": "Add.", "public_test_cases": deep}) + "\n"
    )
    files["long.csv"] = tmp_path / "long.csv"
    files["long.csv"].write_text('problem,answer\nWhat is 1+1?,2\n"' + "x" * 300_000 + '",3\n')
    table = pa.table(
        {"problem": [f"What is {i} + {i}?" for i in range(3000)], "answer": [str(2 * i) for i in range(3000)]}
    )
    pq.write_table(table, tmp_path / "good.parquet")
    damaged = bytearray((tmp_path / "good.parquet").read_bytes())
    for offset in range(200, len(damaged) - 200, 997):  # scratches over the data pages
        damaged[offset : offset + 16] = b"\xa5" * 16
    files["damaged.parquet"] = tmp_path / "damaged.parquet"
    files["damaged.parquet"].write_bytes(bytes(damaged))
    files["cut.parquet"] = tmp_path / "cut.parquet"
    files["cut.parquet"].write_bytes(bytes(damaged[: len(damaged) // 2]))
    return files


def test_hostile_suite_files_are_one_line_errors_in_bounded_memory(tmp_path):
    import os

    files = _hostile_files(tmp_path)
    assert all(path.stat().st_size < 1_000_000 for path in files.values())
    expected = {
        "nested.json": "nested too deeply",
        "nested.jsonl": ":2: JSON nested too deeply",
        "livecodebench nested": "nested too deeply",
        "long.csv": ":3: not a usable CSV file: a field longer",
        "damaged.parquet": "not a readable Parquet file",
        "cut.parquet": "not a readable Parquet file",
    }
    stiva = str(Path(sys.executable).parent / "stiva")
    env = {**os.environ, "STIVA_HOME": str(tmp_path / "home")}
    for name, path in files.items():
        fmt = "livecodebench" if name.startswith("livecodebench") else "aime"
        # the real command, measured on its own: wait4 gives this child's peak memory. Its output
        # goes to files, not pipes: waiting on a child that fills a pipe nobody reads never ends.
        err = tmp_path / f"{name}.stderr"
        with open(err, "w") as stderr_file:
            process = subprocess.Popen(
                [stiva, "bench", f"{fmt}:{path}", "--systems", "direct:x"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr_file,
            )
            _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr = err.read_text()
        lines = stderr.strip().splitlines()
        assert process.returncode == 2 and len(lines) == 1 and "Traceback" not in stderr, (name, stderr[-2000:])
        assert expected[name] in lines[0], (name, lines[0])
        assert usage.ru_maxrss < 600 * 1024, (name, usage.ru_maxrss)  # KiB: far below what a blow-up takes
    # the good Parquet file still loads, and a JSONL suite of our own format says the same
    assert len(load_suite(f"aime:{tmp_path / 'good.parquet'}").items) == 3000
    with pytest.raises(SuiteError, match=r"mine.jsonl:1: JSON nested too deeply"):
        load_suite(str(write(tmp_path, '{"id": ' + "[" * 5000 + "]" * 5000 + "}")))


def test_hub_targets_pass_config_and_split_to_datasets(monkeypatch):
    calls = []

    class FakeDatasets:
        @staticmethod
        def load_dataset(name, config, split):
            calls.append((name, config, split))
            return [{"problem": "1+1?", "answer": "2", "unique_id": "u1"}]

    monkeypatch.setitem(sys.modules, "datasets", FakeDatasets)
    suite = load_suite("math500:HuggingFaceH4/MATH-500")
    assert suite.name == "math500:HuggingFaceH4/MATH-500" and suite.items[0].id == "u1"
    load_suite("math500:someone/gpqa-like:diamond@validation")
    assert calls == [("HuggingFaceH4/MATH-500", None, "test"), ("someone/gpqa-like", "diamond", "validation")]


# --- import hygiene ----------------------------------------------------------------------------------


def test_bench_imports_neither_textual_nor_torch_nor_math_verify():
    code = (
        "import sys\nimport stiva_tui.evals.suite, stiva_tui.evals.graders, stiva_tui.evals.loaders, "
        "stiva_tui.sandbox\n"
        "print(','.join(m for m in ('textual', 'torch', 'math_verify', 'sympy', 'datasets') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
