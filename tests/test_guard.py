"""The plan guard (conductor/guard.py) judges subtasks, not wording: sensible subtasks that share
few words with the question pass (a method, a bug hunt, another language, a paraphrase of the
question), a subtask copied from the planner's worked examples is caught, and so is a reworded copy."""

from __future__ import annotations

import pytest

from stiva_tui.conductor.guard import degenerate
from stiva_tui.core.workflow import Step, Workflow

LOOP = (
    "This should add up every number in the list, but the total comes out too small:\n"
    "```python\ntotal = 0\nfor i in range(1, len(xs)):\n    total += xs[i]\n```\nWhat is going on?"
)

HUMANEVAL = (
    'def by_length(arr):\n    """Sort the integers between 1 and 9, reverse them, and name each digit.\n'
    "    >>> by_length([2, 1, 1, 4, 5, 8, 2, 3])\n    ['Eight', 'Five', 'Four', 'Three', 'Two', 'Two', 'One', 'One']\n"
    '    >>> by_length([12, -1])\n    []\n    """\n'
)


def one(subtask: str) -> Workflow:
    return Workflow((Step(0, subtask, ()),))


@pytest.mark.parametrize(
    "question, subtask",
    [
        ("Is 97 prime?", "Test divisibility by 2, 3, 5 and 7."),
        (LOOP, "Identify the bug, explain the off-by-one, propose corrected code."),
        ("Was ist die Hauptstadt von Frankreich?", "Nenne die Hauptstadt Frankreichs."),
        ("Wie viele Beine hat eine Spinne?", "Beantworte die Frage kurz und auf Deutsch."),
        ("Quelle est la capitale de la France ?", "Réponds à la question en français, brièvement."),
        ("What is the capital of France?", "Recall the French seat of government."),
        ("Is 1,001 divisible by 7?", "Divide 1001 by 7 and check the remainder."),
        ("Tell me 12 times 3.", "Compute 12 times 3."),  # the example, on its own kind of question
        ("Wie heißt die Hauptstadt Österreichs?", "Nenne die Hauptstadt Österreichs und erkläre kurz."),
        ("東京の人口は何人ですか？", "Give the population of Tokyo, the capital of Japan."),
        ("What is the capital of Italy?", "Name the capital of Italy."),  # the example on its own question
    ],
)
def test_sensible_subtasks_pass(question, subtask):
    assert degenerate(one(subtask), question) is None


@pytest.mark.parametrize(
    "question, subtask, caught",
    [
        # copied word for word from the planner's own worked examples
        ("What is the capital of France?", "Compute 12 times 3.", "copied from the planner's own examples"),
        ("Is 97 prime?", "Compute 12 times 3.", "copied from the planner's own examples"),
        (HUMANEVAL, "Compute 12 times 3.", "copied from the planner's own examples"),
        ("2 + 2 = ?", "Explain the migration of monarch butterflies.", "shares nothing"),
        ("Sort a list in Python.", "Write a short poem about the sea.", "copied from the planner's own examples"),
        # reworded copies of an example, for a question about something else
        ("What is the capital of France?", "Give the capital city of Italy.", "copied from the planner's own examples"),
        ("Is 97 prime?", "Calculate 12 multiplied by 3.", "copied from the planner's own examples"),
        ("What is the boiling point of water?", "Tell how many legs spiders have.", "copied from the planner's"),
        ("Sort a list in Python.", "Compose a brief poem about the sea.", "copied from the planner's own examples"),
        # about something else entirely, or nothing
        ("What is the capital of France?", "Explain the migration of monarch butterflies.", "shares nothing"),
        ("Is 97 prime?", "Describe the history of the Roman aqueducts.", "shares nothing"),
        ("What is the capital of France?", "", "empty"),
    ],
)
def test_garbage_subtasks_are_caught(question, subtask, caught):
    why = degenerate(one(subtask), question)
    assert why is not None and caught in why, why


def test_a_later_step_that_reads_an_earlier_one_passes():
    plan = Workflow((Step(0, "Recall the French seat of government.", ()), Step(1, "Check step 1's answer.", (0,))))
    assert degenerate(plan, "What is the capital of France?") is None


def test_the_conversation_counts_as_what_was_asked():
    earlier = [{"role": "user", "content": "Tell me about monarch butterflies."}, {"role": "assistant", "content": "…"}]
    assert degenerate(one("Explain the migration of monarch butterflies."), "And where do they go?", earlier) is None


SORT = "Write a Python function that sorts a list of words by their length."


def judged(subtask: str, drafts: int = 2) -> Workflow:
    """`drafts` steps that answer the question, then a step that reads them all: `subtask`."""
    steps = [Step(0, "Write the function.", ()) for _ in range(drafts)]
    return Workflow((*steps, Step(1, subtask, tuple(range(drafts)))))


@pytest.mark.parametrize(
    "subtask, drafts",
    [
        ("Pick the better of the answers of step 0 and step 1.", 2),
        ("Pick the better of the answers of step 1 and step 2.", 2),  # steps counted from 1
        ("Choose the best answer among steps 0, 1 and 2.", 3),
        ("Vote: give the answer most of steps 0-2 agree on.", 3),
        ("Judge which of answer 1 and answer 2 is correct and return it.", 2),
        ("Merge the drafts of step 0 and step 1 into one answer.", 2),
        ("Compare responses #1 and #2 and give the stronger one.", 2),
        ("Return the majority answer of steps 0, 1, 2.", 3),
        ("Check step 1's answer and fix it.", 1),
        ("Wähle die bessere Antwort aus Schritt 0 und Schritt 1.", 2),
    ],
)
def test_a_merge_vote_or_judge_step_may_name_earlier_steps_by_number(subtask, drafts):
    assert degenerate(judged(subtask, drafts), SORT) is None


@pytest.mark.parametrize(
    "question, subtask, caught",
    [
        # a topic of its own, whatever steps it names
        (SORT, "Explain the migration of monarch butterflies using step 0 and step 1.", "shares nothing"),
        ("What is the capital of France?", "Rank the planets by distance from step 0 and step 1.", "shares nothing"),
        # numbers no step of this plan has are numbers, not references
        ("What is the capital of France?", "Compare step 12 and step 40 of the recipe.", "shares nothing"),
        ("What is the capital of France?", "Multiply 4817 by 9932 and 7731, then add answer 0.", "shares nothing"),
        # a copied example stays copied with step numbers around it
        (SORT, "Write a short poem about the sea, then pick the better of step 0 and step 1.", "step 3's subtask"),
        ("Is 97 prime?", "Compute 12 times 3 from step 0.", "copied from the planner's own examples"),
    ],
)
def test_step_numbers_do_not_excuse_a_step_about_something_else(question, subtask, caught):
    why = degenerate(judged(subtask), question)
    assert why is not None and caught in why, why
