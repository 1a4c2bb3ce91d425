"""Writes the built-in `skills` suite (stiva_tui/evals/data/skills.jsonl), run by hand:

    python -m benchmarks.experiments.make_skills    # rewrites the file; a test checks it is up to date

200 items over four domains, 50 each, generated from a fixed seed so the file never drifts:

- `arithmetic` (numeric): multi-digit products, sums and differences;
- `facts` (choice): capitals and chemical symbols, four options each;
- `units` (numeric): length, time, mass and volume conversions;
- `code` (code): small Python functions with asserts; the reference solution is the item's
  `answer`, and `meta.wrong` holds a plausible wrong solution (an off-by-one, a missed case) that
  fails the asserts. The simulated pool answers from both.

Every item has `meta.domain` and `meta.split`: 30 of each domain are `train`, 20 `heldout`
(`stiva bench skills --split heldout`, `stiva train skills --split train`).
"""

from __future__ import annotations

import json
import random

from benchmarks.harness import ROOT

OUT = ROOT / "stiva_tui" / "evals" / "data" / "skills.jsonl"
PER_DOMAIN = 50
TRAIN = 30

CAPITALS = [
    ("France", "Paris"),
    ("Japan", "Tokyo"),
    ("Canada", "Ottawa"),
    ("Australia", "Canberra"),
    ("Brazil", "Brasília"),
    ("Egypt", "Cairo"),
    ("Kenya", "Nairobi"),
    ("Norway", "Oslo"),
    ("Peru", "Lima"),
    ("Spain", "Madrid"),
    ("Italy", "Rome"),
    ("Germany", "Berlin"),
    ("Poland", "Warsaw"),
    ("Portugal", "Lisbon"),
    ("Greece", "Athens"),
    ("Turkey", "Ankara"),
    ("India", "New Delhi"),
    ("China", "Beijing"),
    ("Argentina", "Buenos Aires"),
    ("Chile", "Santiago"),
    ("Sweden", "Stockholm"),
    ("Finland", "Helsinki"),
    ("Ireland", "Dublin"),
    ("Austria", "Vienna"),
    ("Hungary", "Budapest"),
    ("Vietnam", "Hanoi"),
    ("Thailand", "Bangkok"),
    ("Morocco", "Rabat"),
]
ELEMENTS = [
    ("Fe", "iron"),
    ("Au", "gold"),
    ("Ag", "silver"),
    ("Na", "sodium"),
    ("K", "potassium"),
    ("Pb", "lead"),
    ("Sn", "tin"),
    ("Cu", "copper"),
    ("Hg", "mercury"),
    ("Zn", "zinc"),
    ("Ca", "calcium"),
    ("Mg", "magnesium"),
    ("Ne", "neon"),
    ("He", "helium"),
    ("Cl", "chlorine"),
    ("Ni", "nickel"),
    ("Al", "aluminium"),
    ("Si", "silicon"),
    ("P", "phosphorus"),
    ("S", "sulfur"),
    ("W", "tungsten"),
    ("U", "uranium"),
    ("Co", "cobalt"),
    ("Mn", "manganese"),
    ("Ti", "titanium"),
]
UNITS = [  # (from, to, factor, question pattern)
    ("kilometers", "meters", 1000),
    ("meters", "centimeters", 100),
    ("hours", "minutes", 60),
    ("minutes", "seconds", 60),
    ("kilograms", "grams", 1000),
    ("liters", "milliliters", 1000),
    ("feet", "inches", 12),
    ("yards", "feet", 3),
    ("days", "hours", 24),
    ("weeks", "days", 7),
]


def arithmetic(rng: random.Random, i: int) -> dict:
    kind = i % 3
    if kind == 0:
        a, b = rng.randint(12, 99), rng.randint(12, 99)
        return {"question": f"What is {a} × {b}?", "answer": str(a * b)}
    if kind == 1:
        a, b, c = rng.randint(100, 999), rng.randint(100, 999), rng.randint(10, 99)
        return {"question": f"What is {a} + {b} − {c}?", "answer": str(a + b - c)}
    a, b = rng.randint(101, 999), rng.randint(2, 9)
    return {"question": f"What is {a * b} ÷ {b}?", "answer": str(a)}


def facts(rng: random.Random, i: int) -> dict:
    if i % 2 == 0:
        country, capital = CAPITALS[(i // 2) % len(CAPITALS)]
        others = rng.sample([c for _, c in CAPITALS if c != capital], 3)
        return {
            "question": f"What is the capital of {country}?",
            "choices": [capital, *others],
            "answer": capital,
            "shuffle": True,
        }
    symbol, name = ELEMENTS[(i // 2) % len(ELEMENTS)]
    others = rng.sample([n for _, n in ELEMENTS if n != name], 3)
    return {
        "question": f"Which element has the chemical symbol {symbol}?",
        "choices": [name, *others],
        "answer": name,
        "shuffle": True,
    }


def units(rng: random.Random, i: int) -> dict:
    source, target, factor = UNITS[i % len(UNITS)]
    amount = rng.choice([1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7.5, 8, 9, 12, 15, 20])
    value = amount * factor
    text = f"{value:g}"
    return {"question": f"How many {target} are in {amount:g} {source}?", "answer": text}


def _code_templates(rng: random.Random):
    """(question, right solution, wrong solution, name, list of argument tuples) makers."""
    k = rng.randint(2, 14)
    c = rng.choice("abcdeilnorstu")
    n = rng.randint(3, 14)
    return [
        (
            f"Write a function `sum_div_{k}(xs)` that returns the sum of the integers in the list `xs` that are "
            f"divisible by {k}.",
            f"def sum_div_{k}(xs):\n    return sum(x for x in xs if x % {k} == 0)\n",
            f"def sum_div_{k}(xs):\n    return sum(x for x in xs[1:] if x % {k} == 0)\n",
            f"sum_div_{k}",
            [([k, 1, 2 * k, 5],), ([],), ([3 * k, 7 * k + 1],), ([k, k],)],
        ),
        (
            f"Write a function `count_{c}(s)` that returns how many times the letter '{c}' occurs in the string `s`, "
            "ignoring case.",
            f"def count_{c}(s):\n    return s.lower().count('{c}')\n",
            f"def count_{c}(s):\n    return s.count('{c}')\n",
            f"count_{c}",
            [(f"{c.upper()}x{c}",), ("",), (f"{c}{c}{c}",), ("zzz",)],
        ),
        (
            f"Write a function `take_{n}(xs)` that returns the first {n} elements of the list `xs` in reverse order "
            f"(all of them, reversed, when it has fewer than {n}).",
            f"def take_{n}(xs):\n    return list(reversed(xs[:{n}]))\n",
            f"def take_{n}(xs):\n    return list(reversed(xs[:{n - 1}]))\n",
            f"take_{n}",
            [(list(range(12)),), ([1, 2],), ([],), (list(range(n)),)],
        ),
        (
            f"Write a function `spread_{k}(xs)` that returns the largest minus the smallest integer in the non-empty "
            f"list `xs`, times {k}.",
            f"def spread_{k}(xs):\n    return (max(xs) - min(xs)) * {k}\n",
            f"def spread_{k}(xs):\n    return (max(xs) - xs[0]) * {k}\n",
            f"spread_{k}",
            [([3, 9, 1],), ([5],), ([-2, 4],), ([7, 7, 0],)],
        ),
        (
            f"Write a function `words_over_{n}(s)` that returns the number of words in the string `s` (split on "
            f"whitespace) longer than {n} characters.",
            f"def words_over_{n}(s):\n    return sum(1 for w in s.split() if len(w) > {n})\n",
            f"def words_over_{n}(s):\n    return sum(1 for w in s.split() if len(w) >= {n})\n",
            f"words_over_{n}",
            [("a " + "b" * n + " " + "c" * (n + 1),), ("",), ("x" * (n + 3),), ("hi there",)],
        ),
    ]


def code(rng: random.Random, i: int) -> dict:
    templates = _code_templates(rng)
    question, right, wrong, name, cases = templates[i % len(templates)]
    scope: dict = {}
    exec(right, scope)  # noqa: S102 - our own reference solution, at generation time
    asserts = [f"assert {name}({', '.join(repr(a) for a in args)}) == {scope[name](*args)!r}" for args in cases]
    bad: dict = {}
    exec(wrong, bad)  # noqa: S102
    if all(bad[name](*args) == scope[name](*args) for args in cases):
        raise AssertionError(f"the wrong solution of {name} passes every test")
    return {"question": question, "answer": right, "tests": "\n".join(asserts), "meta": {"wrong": wrong}}


DOMAINS = {
    "arithmetic": (arithmetic, "numeric"),
    "facts": (facts, "choice"),
    "units": (units, "numeric"),
    "code": (code, "code"),
}


def build() -> list[dict]:
    rng = random.Random(20261201)
    items = []
    for domain, (make, grader) in DOMAINS.items():
        seen: set[str] = set()
        for i in range(PER_DOMAIN):
            made = make(rng, i)
            while made["question"] in seen:  # every question once: no held-out item is a train item
                made = make(rng, i)
            seen.add(made["question"])
            item = {"id": f"{domain}-{i + 1:02d}", "grader": grader, **made}
            item["meta"] = {**item.get("meta", {}), "domain": domain, "split": "train" if i < TRAIN else "heldout"}
            items.append(item)
    # the split interleaves domains, so --limit N takes every domain
    return sorted(items, key=lambda it: (it["meta"]["split"] != "train", int(it["id"].rsplit("-", 1)[1]), it["id"]))


def render() -> str:
    header = {
        "_suite": "SIMULATED-POOL suite: arithmetic, facts, units and code, 30 train + 20 held-out items "
        "each (meta.domain, meta.split); made for the sim pool"
    }
    return "\n".join(json.dumps(row, ensure_ascii=False) for row in [header, *build()]) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT} ({PER_DOMAIN * len(DOMAINS)} items)")
