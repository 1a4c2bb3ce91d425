"""Open answers: where no final answer can be read (core/answers.py gives None), do two responses
say the same thing?

A chat answer is a paragraph, not "42". Two of them agree here, with no call, where their text is
the same or nearly so: the same words in the same order once case, markdown, punctuation and
spacing are set aside (`compare`). What looks alike but says otherwise never agrees: a pair whose
numbers differ ("3 days" / "4 days"), whose count of negations differs ("is safe" / "is not safe")
or whose polar words differ ("increases" / "decreases") is refused before any similarity is
measured. Paraphrases in other words do not agree by text; `[workflows] open_agreement = "judge"`
asks a pool model about those (engine/executor.py).

The similarity is difflib's `SequenceMatcher.ratio()` over the words (the standard library's
matcher: longest matching blocks, Ratcliff/Obershelp); the threshold was chosen on labelled pairs
written for it (benchmarks/data/open_agreement_pairs.json, measured by
benchmarks/experiments/open_agreement.py, which saves open_agreement.json). The work is bounded:
at most `MAX_WORDS` words of each answer are matched, and at most `MAX_WORK` word matches tried (a
longer or more repetitive answer agrees only with one equal to it once normalised, a linear
check), so a hostile answer cannot hold up the run.

`comparable(question, kind, open_agreement)` is the planner's side of it: whether a vote's or a
cascade's answers to a question can be compared at all (docs/conductor.md, "Open questions").

Imports nothing of Stiva (core).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

__all__ = [
    "MAX_WORDS",
    "THRESHOLD",
    "TextVerdict",
    "agree_all",
    "comparable",
    "compare",
    "expects_final_answer",
    "groups",
    "words",
]

# Chosen on the tune half of benchmarks/data/open_agreement_pairs.json: the least threshold at which
# no pair labelled "disagree" agrees (benchmarks/experiments/open_agreement.json says what it gives).
THRESHOLD = 0.89
# Words of each answer matched at most, and the most matching work allowed (the sum, over one
# answer's words, of how often the other holds each: ~10,000 for 1,000 words of prose, 1,000,000
# for one word said 1,000 times); past either, only answers identical once normalised agree. The
# time a comparison takes is in open_agreement.json's "bound".
MAX_WORDS = 2000
MAX_WORK = 100_000
# Characters of an answer read into words at all; a longer answer agrees only with the very same text.
MAX_CHARS = 40_000
_LONG = "\x00long:"  # the one "word" of an answer over MAX_CHARS: its hash

_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?")
_NEGATIONS = frozenset(
    "not no never none nothing neither nor nobody nowhere without cannot isnt arent wasnt werent dont doesnt didnt "
    "cant couldnt wont wouldnt shouldnt hasnt havent hadnt mustnt neednt".split()
)
# Words whose swap for their opposite keeps the text alike and turns its claim round.
_POLAR = frozenset(
    "true false yes correct incorrect wrong increase increases increased increasing decrease decreases "
    "decreased decreasing more less fewer higher lower larger smaller greater bigger before after above below "
    "maximum minimum positive negative always sometimes possible impossible likely unlikely safe unsafe legal "
    "illegal valid invalid odd even first last win wins lose loses won lost faster slower cheaper dearer "
    "better worse best worst most least north south east west northern southern eastern western hot cold".split()
)
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero - two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if w != "-"  # "one" is as often a pronoun ("the same one") as a number
}


@dataclass(frozen=True)
class TextVerdict:
    """Whether open answers agree by text, their least pairwise similarity, and why, in words."""

    agree: bool
    similarity: float
    reason: str

    def line(self) -> str:
        return f"{'agree' if self.agree else 'differ'} by text ({self.reason})"


def words(text: str) -> list[str]:
    """`text`'s words for comparison: NFKC, case folded, markdown and punctuation dropped, number
    words as digits, thousands commas and the apostrophes of contractions removed. A text over
    MAX_CHARS is one word, its hash: it agrees with the same text only."""
    if len(text) > MAX_CHARS:
        return [_LONG + hashlib.sha256(text.strip().encode("utf-8", "replace")).hexdigest()]
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    text = re.sub(r"n't\b", " not", text.replace("cannot", "can not").replace("won't", "will not"))
    out = []
    for token in _WORD.findall(text):
        if token[0].isdigit():
            token = _number(token)
        else:
            token = _NUMBER_WORDS.get(token, token.replace("'", ""))
        out.append(token)
    return out


def compare(a: str, b: str) -> TextVerdict:
    """Whether two open answers say the same thing by their text (see the module's docstring)."""
    return _compare(words(a), words(b))


def agree_all(texts: Sequence[str]) -> TextVerdict:
    """Whether every pair of `texts` agrees by text: the verdict of the least similar pair (any
    order of `texts` gives the same verdict)."""
    parsed = sorted((words(t) for t in texts), key=lambda w: (len(w), w))
    worst = TextVerdict(True, 1.0, "identical")
    for i in range(len(parsed)):
        for j in range(i + 1, len(parsed)):
            verdict = _compare(parsed[i], parsed[j])
            if not verdict.agree:
                return verdict
            if verdict.similarity < worst.similarity:
                worst = verdict
    return worst


def groups(texts: Sequence[str]) -> list[list[int]]:
    """`texts` grouped by agreement (indices into `texts`, each group sorted), largest first: each
    text joins the first group all of whose members it agrees with, texts taken in the order of
    their words (not the order given), so the grouping does not depend on the order given."""
    parsed = [words(t) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: (parsed[i], i))
    found: list[list[int]] = []
    for i in order:
        for group in found:
            if all(_compare(parsed[i], parsed[j]).agree for j in group):
                group.append(i)
                break
        else:
            found.append([i])
    return sorted((sorted(g) for g in found), key=lambda g: (-len(g), [parsed[i] for i in g]))


def _compare(a: list[str], b: list[str]) -> TextVerdict:
    if a == b:
        return TextVerdict(bool(a), 1.0 if a else 0.0, "identical" if a else "no words")
    if not a or not b:
        return TextVerdict(False, 0.0, "one has no words")
    if a[0].startswith(_LONG) or b[0].startswith(_LONG):
        return TextVerdict(False, 0.0, f"over {MAX_CHARS:,} characters and not the same text")
    numbers_a, numbers_b = _numbers(a), _numbers(b)
    if numbers_a != numbers_b:
        only = sorted((numbers_a - numbers_b) | (numbers_b - numbers_a))[:3]
        return TextVerdict(False, 0.0, f"numbers differ: {', '.join(only)}")
    if _count(a, _NEGATIONS) != _count(b, _NEGATIONS):
        return TextVerdict(False, 0.0, "one negates what the other does not")
    if [w for w in a if w in _POLAR] != [w for w in b if w in _POLAR]:
        return TextVerdict(False, 0.0, "opposite words differ")
    if _swapped(a, b):
        return TextVerdict(False, 0.0, "the same words in another order")
    if len(a) > MAX_WORDS or len(b) > MAX_WORDS:
        return TextVerdict(False, 0.0, f"over {MAX_WORDS} words and not identical")
    held = Counter(b)
    if sum(held[w] for w in a) > MAX_WORK:
        return TextVerdict(False, 0.0, "too repetitive to match and not identical")
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < THRESHOLD or matcher.quick_ratio() < THRESHOLD:
        return TextVerdict(False, round(matcher.quick_ratio(), 3), f"similarity under {THRESHOLD:g}")
    ratio = matcher.ratio()
    agree = ratio >= THRESHOLD
    return TextVerdict(agree, round(ratio, 3), f"similarity {ratio:.2f}" + ("" if agree else f" < {THRESHOLD:g}"))


def similarity(a: str, b: str) -> float:
    """The word similarity of two texts (0..1) with no guard applied: what the benchmark sweeps."""
    wa, wb = words(a), words(b)
    if wa == wb:
        return 1.0 if wa else 0.0
    return SequenceMatcher(None, wa[:MAX_WORDS], wb[:MAX_WORDS], autojunk=False).ratio()


def guarded(a: str, b: str) -> bool:
    """Whether a pair passes the guards (numbers, negations, opposite words) that come before the
    similarity: what the benchmark sweeps the threshold over."""
    wa, wb = words(a), words(b)
    return (
        _numbers(wa) == _numbers(wb)
        and _count(wa, _NEGATIONS) == _count(wb, _NEGATIONS)
        and [w for w in wa if w in _POLAR] == [w for w in wb if w in _POLAR]
        and not _swapped(wa, wb)
    )


def _number(token: str) -> str:
    """A number word as one canonical form: "1,000" and "1000" are one; "2.50" is "2.5"."""
    if "," in token and re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", token):
        token = token.replace(",", "")
    if re.fullmatch(r"\d+\.\d+", token):
        token = token.rstrip("0").rstrip(".")
    if token.isdigit():
        return token.lstrip("0") or "0"
    return token


def _swapped(a: list[str], b: list[str]) -> bool:
    """Whether two words that each text holds once come in the other order ("over-, not
    underwatering" / "under-, not overwatering"; "faster reads, slower writes" / the reverse)."""
    once_a, once_b = Counter(a), Counter(b)
    anchors = {w for w, n in once_a.items() if n == 1 and once_b.get(w) == 1}
    where_b = {w: i for i, w in enumerate(b) if w in anchors}
    order = [where_b[w] for w in a if w in anchors]
    return any(later < earlier for earlier, later in zip(order, order[1:]))


def _numbers(w: list[str]) -> set[str]:
    return {t for t in w if t[0].isdigit()}


def _count(w: list[str], vocabulary: frozenset[str]) -> int:
    return sum(1 for t in w if t in vocabulary)


# --- the planner's side: can a question's answers be compared at all? ---------------------------

_OPTION_LINE = re.compile(r"^\s*[(\[]?[A-Ja-j][).\]:]\s+\S", re.MULTILINE)
_ANSWER_FORM = re.compile(
    r"\\boxed|final answer|\banswer\s*:|\"answer\"|\banswer (?:with|in) (?:only |just )?(?:one|a single|the|a)\b"
    r"|\b(?:only|just) (?:the|a|one) (?:number|letter|word|name|value|integer)\b|\byes or no\b|\btrue or false\b"
    r"|\b(?:reply|respond) with (?:only |just )?(?:one|a|the) (?:word|number|letter)\b|\bone word\b",
    re.IGNORECASE,
)
# a sum: "6 x 7", "6x7", "2^10", "3 - 1" (a minus between spaces: "2-3 minutes" is a range)
_ARITHMETIC = re.compile(r"\d\s*(?:[+*/^×÷x]|\*\*|\s-\s)\s*\(?\s*\d")
_COUNTING = re.compile(r"^\W*(?:how (?:many|much)|what is the (?:sum|product|value|number))\b", re.I)
_SHORT_QUESTION = 300  # characters: a longer question is a task, whatever it counts


def expects_final_answer(question: str) -> bool:
    """Whether `question` asks for a short final answer that answers.py can read: it lists
    lettered options, states an answer format ("final answer", "Answer:", \\boxed, "yes or no",
    "one word"...), or is a short sum or count ("What is 6 x 7?", "How many...?")."""
    text = question[:MAX_CHARS]  # a longer question is a task: its start says what it asks
    if len(_OPTION_LINE.findall(text)) >= 2 or _ANSWER_FORM.search(text):
        return True
    short = len(text.strip()) <= _SHORT_QUESTION
    return short and bool(_ARITHMETIC.search(text) or _COUNTING.search(text))


def comparable(question: str, kind: str, open_agreement: str) -> bool:
    """Whether answers to `question` can be compared by a vote or an agreement gate under the
    setting in force: always where its kind is known (not "auto") or it asks for a short final
    answer; else (an open question) only where a judge compares what text cannot
    (`open_agreement = "judge"`). With "text", two open answers agree only where they are nearly
    the same words, which different models seldom write: a cascade would then pay its dear model
    nearly always, on top of the cheap ones."""
    if kind != "auto" or expects_final_answer(question):
        return True
    return open_agreement == "judge"


# Why a live open question gets one model rather than a vote or a cascade: the tree's note ends so.
OPEN_REASON = (
    'open answers are compared by text (open_agreement = "text"), which only near-identical answers pass: '
    "no vote or cascade"
)
