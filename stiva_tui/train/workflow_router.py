"""The trained router's choice of a *workflow* per question (issue 51): one model, an agreement
cascade, or a vote, whichever has the best expected utility under the preference.

    choice = fit_workflow_choice(labels, rows, seed=0, progress=say)   # arrays and settings to save

- **Candidates,** from the train items alone: every single model; lazy votes of three of the six
  models most often right; and agreement cascades whose first stage is two of the six cheapest
  models and whose last stage is one of the three most often right, or one of the two best votes.
  Kept: those no other candidate beats on the train items in both accuracy and cost (the train
  frontier), and every single model.
- **Their outcome on every train item** is computed from the recorded answers, as the replay pool
  would give it (core/replayed.py): right or wrong, cost, latency. That is how the router learns
  when one model suffices, when two cheap models' agreement is trustworthy, and when to pay for a
  vote: each is one candidate's record on questions like the one asked.
- **The estimate** for a question (conductor/router.py `WorkflowChoice.estimate`): over its `k`
  nearest train questions (cosine of the router's representation), each candidate's mean outcome
  weighted by similarity, shrunk toward its mean over all train items by `prior_weight` pseudo
  items. Cascade routing (Dekoninck, Baader and Vechev, ICML 2025) finds that the quality estimate
  decides the gain; shrinkage keeps the choice among ~20 candidates from chasing noise.
- **The settings** (`k`, `prior_weight`) are chosen on a validation draw of the train items (a
  quarter, by a hash of the seed and each item's id: stable, and apart from any held-out or test
  items, which the router never sees): the pair with the best mean utility over the levels best,
  balanced and cheap, the estimate fitted on the other three quarters. The grid, each pair's score
  and the choice are saved in router.json.
- **The fixed-workflow check** (issue 57): at each preference level (the named ones and every tenth
  of the scale), the best fixed workflow at no more cost (the candidate most often right on all the
  train items among those whose mean cost there is no more than the choice's on validation) is
  compared with the choice on the validation quarter. Where the choice is not more accurate, that
  level runs the fixed workflow (`WorkflowChoice.fixed`, saved in router.json).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..conductor.router import KNN_GRID, WorkflowChoice, utility_weights
from ..core.preference import LEVELS, parse_preference
from ..core.replayed import Answer, rank_by_record, replay_workflow
from ..core.workflow import Workflow
from ..runtime.systems import parse_system

__all__ = ["Candidate", "candidate_workflows", "fit_workflow_choice"]

TOP = 6  # the models most often right, that votes and last stages are drawn from
CHEAP = 6  # the cheapest models, that first stages are drawn from
VALIDATION = 0.25
LEVEL_NAMES = ("best", "balanced", "cheap")


@dataclass(frozen=True)
class Candidate:
    name: str  # as `stiva bench --systems` names it: direct:A, vote:A+B+C, cascade:A+B>C
    models: tuple[str, ...]  # model index i of the workflow is models[i] (canonical names)
    workflow: Workflow


def _candidate(name: str) -> Candidate:
    system = parse_system(name)
    mode = system.mode
    if name.startswith("direct:"):
        from ..engine.baselines import direct_workflow

        return Candidate(system.name, (name.removeprefix("direct:"),), direct_workflow())
    return Candidate(system.name, tuple(mode.models), mode.workflow)


def _answers(labels, row: int) -> dict[str, Answer]:
    return {
        m: Answer(labels.finals[m][row], labels.scores[m][row], labels.costs[m][row], labels.latencies[m][row])
        for m in labels.models
    }


def outcomes(labels, candidates: Sequence[Candidate], rows: Sequence[int]):
    """(right, cost, latency): arrays (len(rows), len(candidates)) of each candidate on each item."""
    import numpy as np

    right = np.zeros((len(rows), len(candidates)), np.float32)
    cost = np.zeros_like(right)
    latency = np.zeros_like(right)
    every = range(len(labels.items))  # the labels a router trains on are its train items
    rank = rank_by_record(
        {m: sum(labels.scores[m]) / len(every) for m in labels.models},
        {m: sum(labels.costs[m]) / len(every) for m in labels.models},
    )
    for r, row in enumerate(rows):
        answers = _answers(labels, row)
        for c, candidate in enumerate(candidates):
            outcome = replay_workflow(candidate.workflow, candidate.models, answers, rank, labels.max_calls)
            right[r, c], cost[r, c], latency[r, c] = outcome.correct, outcome.cost_usd, outcome.latency_s
    return right, cost, latency


def candidate_workflows(labels, rows: Sequence[int]):
    """The candidates, chosen on the items `rows` (the train items) alone (see the module
    docstring), and their outcomes on those items: (candidates, right, cost, latency)."""
    import numpy as np

    def mean(values: Sequence[float]) -> float:
        return sum(values[r] for r in rows) / len(rows)

    accuracy = {m: mean(labels.scores[m]) for m in labels.models}
    cost = {m: mean(labels.costs[m]) for m in labels.models}
    top = sorted(labels.models, key=lambda m: (-accuracy[m], cost[m], m))[:TOP]
    cheap = sorted(labels.models, key=lambda m: (cost[m], -accuracy[m], m))[:CHEAP]
    singles = [_candidate(f"direct:{m}") for m in labels.models]
    votes = [_candidate("vote:" + "+".join(t)) for t in itertools.combinations(top, 3)] if len(top) >= 3 else []
    if votes:
        right, _, _ = outcomes(labels, votes, rows)
        votes = [votes[i] for i in np.argsort(-right.mean(0), kind="stable")]
    lasts = [m for m in top[:3]] + ["vote:" + "+".join(v.models) for v in votes[:2]]
    cascades = [
        _candidate(f"cascade:{a}+{b}>{last}")
        for a, b in itertools.combinations(cheap, 2)
        for last in lasts
        if last not in (a, b)
    ]
    everything = singles + votes + cascades
    right, spent, took = outcomes(labels, everything, rows)
    acc, usd = right.mean(0), spent.mean(0)
    kept = [
        i
        for i, candidate in enumerate(everything)
        if candidate.name.startswith("direct:")
        or not any(
            (acc[j] >= acc[i] and usd[j] < usd[i]) or (acc[j] > acc[i] and usd[j] <= usd[i])
            for j in range(len(everything))
        )
    ]
    return [everything[i] for i in kept], right[:, kept], spent[:, kept], took[:, kept]


def fit_workflow_choice(
    labels, rows_repr, *, seed: int = 0, progress: Callable[[str], None] | None = None, candidates=None
) -> tuple[WorkflowChoice, dict[str, Any]]:
    """The workflow choice to save beside the router's head (the candidates, their outcomes on
    every train item, the train items' representation, and the settings chosen on a validation
    draw: see the module docstring), and what the choice of settings saw (the grid, each point's
    score, the validation items). `rows_repr`: the items' representation (n, d). `candidates`:
    `candidate_workflows`' answer for these labels, where it was made already (it does not depend
    on the representation)."""
    import numpy as np

    say = progress or (lambda _: None)
    n = len(labels.items)
    every = list(range(n))
    found, right, cost, latency = candidates if candidates is not None else candidate_workflows(labels, every)
    say(f"workflows: {len(found)} candidates (single models, cascades, votes) on {n} train items")
    order = sorted(every, key=lambda i: _draw(seed, labels.items[i][0]))
    n_val = max(1, int(VALIDATION * n)) if n >= 20 else 0
    val, fit = sorted(order[:n_val]), sorted(order[n_val:])
    unit = _unit_rows(np.asarray(rows_repr, dtype=np.float32))

    def choice_on(items, k: int, prior: float) -> WorkflowChoice:
        return WorkflowChoice(
            names=[c.name for c in found],
            models=[list(c.models) for c in found],
            workflows=[c.workflow for c in found],
            rows=unit[items],
            right=right[items],
            cost=cost[items],
            latency=latency[items],
            k=k,
            prior_weight=prior,
        )

    grid = []
    best: tuple[float, int, float] | None = None
    if n_val:
        on_fit = choice_on(fit, *KNN_GRID[0])
        sims = on_fit.similarities(unit[val])  # once: the settings change only what is made of them
        weights = {level: utility_weights(LEVELS[level], on_fit.dearest, on_fit.slowest) for level in LEVEL_NAMES}
        rows = np.arange(len(val))
        for k, prior in KNN_GRID:
            choice = replace(on_fit, k=k, prior_weight=prior)
            estimates = choice.estimate_rows(sims=sims)
            score = 0.0
            for level in LEVEL_NAMES:
                picks = choice.pick(estimates, weights[level])
                got = right[val][rows, picks].mean()
                spent = cost[val][rows, picks].mean()
                took = latency[val][rows, picks].mean()
                score += float(got - weights[level][0] * spent - weights[level][1] * took) / len(LEVEL_NAMES)
            grid.append({"k": k, "prior_weight": prior, "validation_utility": round(score, 5)})
            if best is None or score > best[0] + 1e-12:
                best = (score, k, prior)
    k, prior = (best[1], best[2]) if best is not None else KNN_GRID[len(KNN_GRID) // 2]
    say(f"workflows: k = {k}, prior weight = {prior}, chosen on {n_val} validation items")
    chosen = choice_on(every, k, prior)
    if n_val:
        on_fit = choice_on(fit, k, prior)
        chosen.fixed = fixed_check(on_fit, on_fit.estimate_rows(sims=sims), val, right, cost)
        runs = [f"{e['level']}: {e['workflow']}" for e in chosen.fixed if e["runs"] == "fixed"]
        say("workflows: fixed workflow at " + ("; ".join(runs) if runs else "no level") + " (checked on validation)")
    return chosen, {"grid": grid, "validation_items": n_val}


def check_levels() -> list:
    """The preferences the fixed-workflow check covers: the named levels, then every tenth between."""
    named = list(LEVELS.values())
    tenths = [parse_preference(f"{x / 10:.1f}") for x in range(1, 10)]
    weights = {(p.cost, p.latency) for p in named}
    return named + [p for p in tenths if p is not None and (p.cost, p.latency) not in weights]


def fixed_check(choice: WorkflowChoice, estimates, val, right, cost) -> list[dict]:
    """Per level of `check_levels`: the best fixed candidate at no more cost than `choice` (fitted
    without the validation items `val`) spends on them, by its accuracy on every train item (ties: the
    cheaper), and whether the choice beats it on `val` (more often right); "runs" says which runs there."""
    import numpy as np

    rows = np.arange(len(val))
    acc_all, usd_all = right.mean(0), cost.mean(0)
    acc_val, usd_val = right[val].mean(0), cost[val].mean(0)
    out = []
    for preference in check_levels():
        picks = choice.pick(estimates, utility_weights(preference, choice.dearest, choice.slowest))
        got = float(right[val][rows, picks].mean())
        spent = float(cost[val][rows, picks].mean())
        affordable = [c for c in range(len(choice.names)) if usd_all[c] <= spent * (1 + 1e-9) + 1e-15]
        entry = {
            "level": preference.name,
            "cost": preference.cost,
            "latency": preference.latency,
            "validation_router": {"accuracy": round(got, 4), "usd_per_1000": round(1000 * spent, 4)},
        }
        if affordable:
            fixed = min(affordable, key=lambda c: (-acc_all[c], usd_all[c], choice.names[c]))
            entry["workflow"] = choice.names[fixed]
            entry["validation_fixed"] = {
                "accuracy": round(float(acc_val[fixed]), 4),
                "usd_per_1000": round(1000 * float(usd_val[fixed]), 4),
            }
            entry["runs"] = "router" if got > float(acc_val[fixed]) + 1e-12 else "fixed"
        else:
            entry["workflow"], entry["runs"] = None, "router"
        out.append(entry)
    return out


def _draw(seed: int, item_id: str) -> str:
    """The validation draw's order: a hash of the seed and the item's id (stable across runs)."""
    return hashlib.sha256(f"{seed}/{item_id}".encode()).hexdigest()


def _unit_rows(rows):
    import numpy as np

    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)
