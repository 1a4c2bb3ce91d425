"""Catching a degenerate plan before it runs.

A plan whose subtasks are garbage makes the answer worse than one direct call: a small planner
copies its prompt's worked examples ("Compute 12 times 3." for a HumanEval problem), reworded or
not, leaves a subtask empty, or writes one about something else entirely ("Write a short poem about
the sea"). `degenerate(workflow, question)` says why a plan is one of those, or None; the engine
then runs one direct step on its fallback model instead (engine/fallback.py), and the tree says why.

What is judged is a subtask's *specific* words: its words of three letters or more, and its numbers,
less the instruction and function words any subtask may use ("check", "explain", "propose", "the",
German "nenne", "beantworte", French "réponds", a language's name, ...), each compared by a crude
stem (lower case, accents and endings dropped: "corrected" is "correct", "spiders" "spider").

- **Copied:** a subtask that is one of the worked examples' subtasks, word for word or reworded
  (most of the example's specific words, related words counted, make up most of the subtask's),
  while the example's topic is not the question's: some specific word of the example that the
  subtask repeats occurs nowhere in the question, and the subtask's other words are not about
  the question either. "Compute 12 times 3." for "Is 97 prime?" is caught, and so is "Calculate
  12 multiplied by 3."; "Name the capital of Italy." for "What is the capital of Italy?" passes.
- **About something else:** three specific words or more, and none of them related to a word of
  the question or the conversation. Two words are related when equal, when one begins with most
  of the other ("prime", "primality"), or when they begin alike and differ by two letters at most
  ("French", "France"). Numbers count as related to any number of a question that has one ("Test
  divisibility by 2, 3, 5 and 7." for "Is 97 prime?"). Where the question and the subtask are
  written in different scripts, or in one written without spaces (Chinese, Japanese, Thai), this
  is not judged.
- **Empty:** a subtask with no text.

A later step that reads earlier ones ("Check the draft of step 1") is judged the same way, so
generic instructions always pass. Its references to steps by number ("the answers of step 0 and
step 1", "steps 0-2", "response #2", "Schritt 1") are no specific words: a merge, vote or judge
step names earlier steps, not the question's topic. Only numbers that can be the plan's steps
(0 to its length, counted from 0 or 1) are taken as references; "step 12" of a two-step plan is a
number like any other.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

from ..core.workflow import Workflow
from .fewshot import example_subtasks

__all__ = ["degenerate", "specific_words"]

_WORD = re.compile(r"[^\W_]+")  # a run of letters or digits, in any script
_THOUSANDS = re.compile(r"(?<=\d)[,_'](?=\d{3}\b)")  # "1,001" is one number
# Instruction and function words any plan may use, whatever the question: not "specific".
# English, then a few German, French and Spanish ones (written without accents: words are compared
# without them), then languages' names ("answer in German").
_GENERIC_WORDS = """
a an the and or of to in on for with by from as at is are be been being was were it its this that
these those each has have had does did do done
answer answers answering question questions task tasks problem problems step steps subtask final
give write solve solving solution compute calculate work out explain reasoning reason think carefully
check verify review critique improve fix correct refine combine merge compare choose pick best
draft drafts outline plan approach idea ideas summary summarize summarise list short brief clear
previous earlier above response responses output outputs result results given user's user
code function program python implement implementation test tests case cases return returns
then first next finally one two three all any both other others make sure please provide
method methods detail details key point points part parts find identify state say name
about how many much what which who why when where finish finished try attempt again look looks
text word words sentence using use based into more less your you our we can should must not no
yes only just also very well good right wrong new old help helpful concise precise accurate
add sum multiply subtract divide plus minus number total count value evaluate simplify
equation expression describe discuss analyse analyze consider topic information fact facts
recall propose suggest tell compose translate rewrite rephrase determine decide estimate derive
prove show mention include ensure keep focus note start begin end stop get put set see
bug bugs debug error errors issue issues off mistake mistakes fault faulty broken briefly
carry read reply language languages
better worse stronger strongest weaker vote votes majority judge candidate candidates agree agreement
consensus common frequent most select winner among between same consistent differ difference
disagree synthesize synthesise reconcile integrate prefer preferred choice option options version
der die das den dem des ein eine einen einem einer eines und oder ist sind war auf mit von zu zum
zur im an am aus bei fur nach uber unter wie was wer wo wann warum welche welcher welches nicht kein
keine auch nur sehr bitte kurz frage fragen antwort antworte antworten beantworte beantworten nenne
nennen gib gebe geben schreibe schreiben erklare erklaren berechne berechnen prufe prufen uberprufe
fasse zusammen vergleiche finde bestimme schritt schritte ergebnis losung aufgabe sprache
le la les un une des du de et ou est sont en au aux avec pour par sur dans que qui quoi quel quelle
quels quelles comment pourquoi pas ne plus tres reponds repondre reponse explique expliquer donne
donner nomme nommer calcule calculer verifie verifier ecris ecrire resume brievement etape resultat
el los las unos unas es son con por para sobre quien cual como mas muy responde responder respuesta
pregunta explica explicar da dar nombra calcula verifica escribe resumen brevemente paso resultado
english german deutsch french francais spanish espanol italian italiano portuguese dutch
"""
# Scripts written without spaces between words: a "word" there is a whole phrase.
_UNSPACED = {"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN"}
_SUFFIXES = (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ly", ""))


# A reference to earlier steps by number: "step 0 and step 1", "steps 0, 1 and 2", "answers 1-3",
# "response #2", "Schritt 1", "étape 2". The words that name a step's output, then its numbers.
_REF_NOUN = (
    r"(?:steps?|answers?|drafts?|responses?|outputs?|results?|candidates?|attempts?|solutions?|versions?"
    r"|options?|schritte?|[eé]tapes?|pasos?)"
)
_REF_NUMBER = r"(?:#\s*)?\d{1,2}\b(?:'s)?"
_STEP_REF = re.compile(
    rf"\b{_REF_NOUN}\s+(?:no\.?\s*|number\s+)?{_REF_NUMBER}"
    rf"(?:\s*(?:,|and|or|&|to|-|–|vs\.?|versus|und|et|y)\s*(?:{_REF_NOUN}\s+)?{_REF_NUMBER})*",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")


def _without_step_references(text: str, steps: int) -> str:
    """`text` less its references to the plan's steps by number (see the module); a reference
    with a number no step of a plan of `steps` steps has stays."""

    def drop(match: re.Match[str]) -> str:
        numbers = [int(n) for n in _DIGITS.findall(match.group(0))]
        return " " if all(n <= steps for n in numbers) else match.group(0)

    return _STEP_REF.sub(drop, text)


def _plain(text: str) -> str:
    """Lower case, without accents ("Österreichs" is "osterreichs"), "1,001" as "1001"."""
    decomposed = unicodedata.normalize("NFKD", _THOUSANDS.sub("", text).casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _stem(word: str) -> str:
    """A crude stem: "spiders" "spider", "corrected" "correct", "multiplied" "multiply", "rhymes"
    and "rhyme" both "rhym". Only ever compared with another stem made the same way."""
    if word.isdigit():
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + replacement
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _stems(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(_plain(text)) if w.isdigit() or len(w) >= 3]


_GENERIC = frozenset(_stem(w) for w in _GENERIC_WORDS.split() if len(w) >= 3)


def specific_words(text: str) -> set[str]:
    """The stems of `text`'s words that are not generic instructions: what it is about."""
    return {w for w in _stems(text) if w not in _GENERIC}


def _script(text: str) -> str | None:
    """The script most of `text`'s letters are written in ("LATIN", "CYRILLIC", "CJK"), or None."""
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            script = name.split(" ", 1)[0] if name else ""
            counts[script] = counts.get(script, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else None


@lru_cache(maxsize=4096)
def _distance(a: str, b: str) -> int:
    """Levenshtein distance (short words only)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def _related(a: str, b: str) -> bool:
    """Whether two stems name the same thing, as far as spelling tells: equal, one the start of
    the other ("prim", "primality"), or alike but for two letters ("french", "franc")."""
    if a == b:
        return True
    if a.isdigit() or b.isdigit() or a[:2] != b[:2]:
        return False
    shorter = min(len(a), len(b))
    common = len(_common_prefix(a, b))
    if common >= 5 or (common >= 4 and common >= shorter - 1):
        return True
    return shorter >= 5 and _distance(a, b) <= 2


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


class _Words:
    """A text's specific words, looked up by relation (indexed by their first two letters)."""

    def __init__(self, words: Iterable[str]):
        self.words = set(words)
        self.numbers = any(w.isdigit() for w in self.words)
        self._by_start: dict[str, list[str]] = {}
        for word in self.words:
            if not word.isdigit():
                self._by_start.setdefault(word[:2], []).append(word)

    def has(self, word: str, *, any_number: bool = False) -> bool:
        """Whether a word related to `word` is here; with `any_number`, any number for a number."""
        if word in self.words:
            return True
        if word.isdigit():
            return any_number and self.numbers
        return any(_related(word, other) for other in self._by_start.get(word[:2], ()))


@lru_cache(maxsize=1)
def _examples() -> tuple[tuple[str, tuple[str, ...], frozenset[str]], ...]:
    """(question, its words, the subtask's specific words) of every worked example's subtask."""
    return tuple(
        (
            " ".join(_WORD.findall(_plain(question))),
            tuple(_WORD.findall(_plain(subtask))),
            frozenset(specific_words(subtask)),
        )
        for question, subtask in example_subtasks()
    )


def _copied(subtask: str, specific: set[str], asked: _Words, normalized_question: str) -> bool:
    """Whether `subtask` is a worked example's subtask, as written or reworded, for a question
    that is not about what the example is about."""
    words = tuple(_WORD.findall(_plain(subtask)))
    for example_question, example_words, example in _examples():
        if example_question == normalized_question or not example:
            continue
        novel = {w for w in example if not asked.has(w)}  # what the example is about and the question is not
        if not novel:
            continue  # the example fits this question ("Compute 12 times 3." for 12 boxes of 3 eggs)
        if words == example_words:
            return True
        if len(example) < 2 or not specific:
            continue
        shared = {w for w in example if any(_related(w, s) for s in specific)}
        own = {s for s in specific if not any(_related(s, w) for w in example)}
        if (
            shared & novel
            and len(shared) >= 0.6 * len(example)
            and len(specific) - len(own) >= 0.5 * len(specific)
            and not any(asked.has(s) for s in own)
        ):
            return True
    return False


def degenerate(workflow: Workflow, question: str, conversation: Sequence[dict] = ()) -> str | None:
    """Why `workflow` should not run for `question` (one line), or None when it may."""
    context = question + "\n" + "\n".join(str(turn.get("content", "")) for turn in conversation)
    asked = _Words(specific_words(context))
    normalized_question = " ".join(_WORD.findall(_plain(question)))
    question_script = _script(context)
    for index, step in enumerate(workflow.steps):
        subtask = step.subtask.strip()
        if not subtask:
            return f"step {index + 1}'s subtask is empty"
        specific = specific_words(_without_step_references(subtask, len(workflow.steps)))
        if _copied(subtask, specific, asked, normalized_question):
            return f"step {index + 1}'s subtask is copied from the planner's own examples: {subtask!r}"
        script = _script(subtask)
        comparable = script not in _UNSPACED and question_script not in _UNSPACED
        comparable = comparable and (script is None or question_script is None or script == question_script)
        # three specific words or more, none related to what was asked (a question of no words is skipped)
        if (
            comparable
            and asked.words
            and len(specific) >= 3
            and not any(asked.has(w, any_number=True) for w in specific)
        ):
            return f"step {index + 1}'s subtask shares nothing with the question: {subtask!r}"
    return None
