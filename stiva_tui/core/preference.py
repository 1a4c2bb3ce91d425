"""The user's cost and latency preference for one question: what the conductor is told, and what
training rewards.

    pref = parse_preference("cheap")          # or "best", "balanced", "fast", or a number 0..1
    pref.sentence(workers)                    # the line the conductor prompt gains
    pref.reward(correct_reward, cost / dearest, latency / slowest)

A preference is two weights: how much a plan's cost counts against its answer, and how much its
latency does. The named levels:

    best      cost 0      latency 0      the most accurate answer, whatever it costs
    balanced  cost 0.2    latency 0.05   pay more only where it makes the answer better
    cheap     cost 0.45   latency 0      the cheapest plan that still answers well
    fast      cost 0.05   latency 0.4    the quickest answer: few steps in a row, quick models

No level's weights add up to 0.5, the reward of a valid plan with a wrong answer: under every level a right
answer, however dear or slow, earns more than a wrong one, and among right answers the cheaper (or
quicker) earns more. A number `x` from 0 to 1 is `x` of the way from `best` to `cheap` (cost
weight 0.45 x), with no latency weight.
In training (`stiva train --prefer-levels`), a rollout's reward is the paper's (1 right, 0.5 a valid
plan with a wrong answer, 0 no plan) minus cost weight x the plan's cost relative to the dearest
plan of its group, minus latency weight x its time relative to the slowest: each term in [0, 1],
as GRPO's group-relative advantages want. In the prompt, the preference is one sentence in the
paper's natural-language style, followed by each model's price and typical latency.

Hard caps do not move: the budget and the step limit bound every plan, whatever the preference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["LEVELS", "Preference", "PreferenceError", "parse_preference", "next_level"]


class _Named(Protocol):
    """A pool model as the preference sentence lists it (conductor.base.WorkerInfo is one)."""

    @property
    def id(self) -> str: ...


class PreferenceError(ValueError):
    """A preference that is neither a level name nor a number in [0, 1]."""


@dataclass(frozen=True)
class Preference:
    name: str  # a level, or the number as written ("0.4")
    cost: float  # weight of the plan's relative cost, 0..CHEAP_COST
    latency: float = 0.0  # weight of the plan's relative latency

    def __str__(self) -> str:
        return self.name

    @property
    def thrift(self) -> float:
        """How far from `best` (0) to `cheap` (1) the cost weight lies."""
        return min(1.0, self.cost / CHEAP_COST)

    @property
    def wish(self) -> str:
        """What the user prefers, in words (the prompt's sentence without the price list)."""
        if self.name in _WISHES:
            return _WISHES[self.name]
        if self.thrift <= 0.15:
            return _WISHES["best"]
        if self.thrift >= 0.85:
            return _WISHES["cheap"]
        return (
            f"a balance of accuracy and cost, leaning {'to low cost' if self.thrift > 0.5 else 'to accuracy'}: "
            "pay for a dearer model or an extra step only where it makes the answer better"
        )

    def sentence(self, workers: Sequence[_Named]) -> str:
        """The conductor prompt's preference paragraph: the wish, then each model's price and latency
        (`workers` are `WorkerInfo`s, numbered as in the prompt)."""
        lines = [
            f"The user prefers {self.wish}. Each model's price (USD per million input/output tokens) "
            "and typical latency:"
        ]
        for i, worker in enumerate(workers):
            lines.append(f"{i}: {worker.id} - {price_text(worker)}, {latency_text(worker)}")
        return "\n".join(lines)

    def reward(self, base: float, relative_cost: float, relative_latency: float) -> float:
        """The training reward under this preference (relative values in [0, 1])."""
        return base - self.cost * relative_cost - self.latency * relative_latency


_WISHES = {
    "best": "the most accurate answer, whatever it costs",
    "balanced": (
        "a balance of accuracy and cost: pay for a dearer model or an extra step only where it makes the answer better"
    ),
    "cheap": "the cheapest plan that still answers well: as few steps as possible, on the cheapest models that can do them",
    "fast": "a fast answer: as few steps in a row as possible, on the quickest models that can do them",
}

# The paper's reward scale, which the levels' weights are set against: 1 for a right answer, 0.5
# for a valid plan with a wrong one, 0 for no plan (train/rollout.py; graded pairs, train/votes.py).
REWARD_CORRECT = 1.0
REWARD_VALID = 0.5
REWARD_INVALID = 0.0
CHEAP_COST = 0.45  # below REWARD_VALID (0.5): a right answer always beats a wrong one

LEVELS: dict[str, Preference] = {
    "best": Preference("best", 0.0, 0.0),
    "balanced": Preference("balanced", 0.2, 0.05),
    "cheap": Preference("cheap", CHEAP_COST, 0.0),
    "fast": Preference("fast", 0.05, 0.4),
}

# The order a toggle walks: no preference stated, then the levels.
CYCLE: tuple[str | None, ...] = (None, "best", "balanced", "cheap", "fast")


def parse_preference(value: object) -> Preference | None:
    """A level name, a number in [0, 1] (0 best .. 1 cheap), or None/"" for no preference."""
    if value is None or (isinstance(value, str) and not value.strip()) or value == "none":
        return None
    if isinstance(value, Preference):
        return value
    if isinstance(value, bool):
        raise PreferenceError(f"preference {value!r}: use {', '.join(LEVELS)} or a number from 0 (best) to 1 (cheap)")
    if isinstance(value, (int, float)):
        number = float(value)
        text = f"{number:g}"
    else:
        text = str(value).strip().lower()
        if text in LEVELS:
            return LEVELS[text]
        try:
            number = float(text)
        except ValueError:
            raise PreferenceError(
                f"preference {value!r}: use {', '.join(LEVELS)} or a number from 0 (best) to 1 (cheap)"
            ) from None
    if not 0.0 <= number <= 1.0 or number != number:
        raise PreferenceError(f"preference {value!r}: a number must be from 0 (best) to 1 (cheap)")
    return Preference(text, round(number * CHEAP_COST, 6), 0.0)


def next_level(current: str | None) -> str | None:
    """The level after `current` in the toggle's cycle (a number goes back to no preference)."""
    try:
        index = CYCLE.index(current)
    except ValueError:
        return None
    return CYCLE[(index + 1) % len(CYCLE)]


def price_text(worker: object) -> str:
    """A model's price as the prompt gives it; what `worker` lacks counts as unknown (0, "openai")."""
    price_in, price_out = getattr(worker, "price_in", 0.0), getattr(worker, "price_out", 0.0)
    if not price_in and not price_out:
        return "free (local)" if getattr(worker, "kind", "") == "embedded" else "price unknown"
    return f"${price_in:g}/${price_out:g}"


def latency_text(worker: object) -> str:
    latency = getattr(worker, "latency_s", None)
    if latency is None:
        return "latency unknown"
    return f"~{latency:.1f} s a call" if latency >= 1 else f"~{latency:.2f} s a call"
