"""Compare-mode votes as preference pairs of workflows (`stiva votes`, `stiva train --from-votes`).

Every system compare mode runs is a workflow in the paper's format, so a vote "X's answer was
better than Y's" on question q says: for q, X's plan is preferred over Y's plan.

- `direct:MODEL` (a bench's name) or `MODEL` (compare mode names a pool model's column by its
  id): one step on MODEL ("Answer the question.", reads nothing), with or without its run's trace;
- `moa`, `self-moa[:MODEL]`, a bench's `chain:A>B`: the DAG its run executed, read from the run's trace;
- `conductor`, `conductor-mini`, `adapter:DIR`: the plan of the run's first round, from its trace
  (a later round is a revision made with the first answer in view: another prompt, left out);
- `branch:N`, a run's branch (engine/fork.py) beside the run in compare's columns: the plan it ran,
  the forked step on its new model, from its trace.

A plan's steps are named by model id (the model a step was given before any fallback), never by
index, since the pool may be listed in another order (or have other models) when training.

What a vote yields:

- a winner: one pair (chosen = the winner's plan, rejected = that system's plan) for every other
  system of the session;
- a tie ("all equally good"): no pair, there is no preference to learn;
- "all wrong": no pair: there is no chosen plan (DPO needs one). The vote still counts as a vote;
- a pair is left out, with its reason, when either plan cannot be rebuilt: a system name this
  module cannot read a plan for (`oracle`, `random`, `workflow`), an entry whose run was never written or is deleted (no
  trace), a trace with no plan or no step models, or two plans that are the same.

A graded bench gives pairs too (`graded_pairs`, `stiva train --from-votes --bench ID`), by the
rule of a voter who knows the answers: on each item, every system that was right is preferred over
every system that was wrong, and of two right ones the cheaper is preferred over the dearer; two
wrong ones, or two right ones at the same cost, give none. So the user's own votes and a graded
suite train one adapter in one run. Several benches of one suite (graded again under other
sampling: a simulated pool's other seeds, a real pool at a temperature) are pooled by item and
compared by mean grade, which de-noises what one sample per model says; `best_only` keeps only
each item's best system over the others. Graded under preference levels (`levels`, `stiva train
--from-votes --bench ID --prefer-levels best,cheap`), each item gives pairs per level, by the
reward GRPO's `--prefer-levels` trains with (core/preference.py): the expected reward of the arm's
mean grade (1 right, 0.5 a wrong answer) minus the level's weights times its mean cost relative to
the item's dearest arm and its mean latency relative to the slowest. Each pair states its level,
so the prompt it is trained under says "prefer LEVEL" and one adapter serves every level.

`pair_texts` then renders a pair for one training pool and step limit (a model outside the pool
or a plan over the limit leaves it out there), in the exact text the plan grammar writes.

Nothing here imports torch or Textual: the TUI's leaderboard and `stiva votes` count pairs fast.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..core.preference import REWARD_CORRECT, REWARD_VALID, Preference
from ..core.trace import Trace
from ..core.workflow import Step, Workflow
from ..runtime.systems import is_conductor_system

DIRECT_SUBTASK = "Answer the question."
MOA_SYSTEMS = ("moa", "self-moa")
# Systems with no plan of their own: bench's derived `oracle` and `random`, and a replayed `workflow`
NO_PLAN_SYSTEMS = ("oracle", "random", "workflow")

# Why a pair is left out (the keys `stiva votes` counts)
NO_TRACE = "no trace"
NO_PLAN = "no plan in the trace"
NO_MODELS = "trace lacks step models"
UNKNOWN_SYSTEM = "unknown system"
SAME_PLAN = "same plan"
NOT_IN_POOL = "model not in the pool"
OVER_LIMIT = "more steps than the limit"


@dataclass(frozen=True)
class NamedPlan:
    """A workflow whose steps name their models by id (`models[i]` is step i's model)."""

    models: tuple[str, ...]
    subtasks: tuple[str, ...]
    access: tuple[tuple[int, ...] | str, ...]  # each step's earlier steps, or "all"

    def __len__(self) -> int:
        return len(self.models)

    def workflow(self, pool: Sequence[str]) -> Workflow:
        """The `Workflow` with model indices into `pool` (KeyError naming a model not in it)."""
        index = {model: i for i, model in enumerate(pool)}
        steps = []
        for i, (model, subtask, access) in enumerate(zip(self.models, self.subtasks, self.access)):
            if model not in index:
                raise KeyError(model)
            every = access == "all"
            steps.append(Step(index[model], subtask, tuple(range(i)) if every else tuple(access), access_all=every))
        return Workflow(tuple(steps))

    def describe(self) -> str:
        """A short line: `alpha → beta` for a chain, `alpha + beta → gamma` for a fan-in."""
        if len(self) == 1:
            return self.models[0]
        return " + ".join(self.models[:-1]) + " → " + self.models[-1]


@dataclass(frozen=True)
class VotePair:
    """One preference pair from one vote: on `question`, `chosen` was preferred over `rejected`."""

    session_id: str
    question: str
    chosen_system: str
    rejected_system: str
    chosen: NamedPlan
    rejected: NamedPlan
    # The cost and latency preference the pair was graded under (a level of core/preference.py,
    # `graded_pairs(levels=...)`), which its prompt states; None: none stated (a vote, or the plain rule).
    preference: str | None = None


@dataclass(frozen=True)
class LeftOut:
    """A pair a vote would have given, left out; `rejected_system` None: the whole vote."""

    session_id: str
    chosen_system: str | None
    rejected_system: str | None
    reason: str


@dataclass
class VoteHarvest:
    """What the history's votes come to."""

    sessions: int = 0  # compare sessions read
    votes: Counter = field(default_factory=Counter)  # vote kind -> sessions
    pairs: list[VotePair] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    graded: int = 0  # of `pairs`, those from graded benches (the rest are the votes')

    @property
    def voted(self) -> int:
        return sum(self.votes.values())

    def by_pair(self) -> list[dict[str, Any]]:
        """Per (chosen system, rejected system): usable pairs and those left out, by reason."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}

        def row(chosen: str, rejected: str) -> dict[str, Any]:
            return rows.setdefault(
                (chosen, rejected),
                {"chosen": chosen, "rejected": rejected, "votes": 0, "pairs": 0, "left_out": Counter()},
            )

        for pair in self.pairs:
            entry = row(pair.chosen_system, pair.rejected_system)
            entry["votes"] += 1
            entry["pairs"] += 1
        for gone in self.left_out:
            if gone.chosen_system is None or gone.rejected_system is None:
                continue
            entry = row(gone.chosen_system, gone.rejected_system)
            entry["votes"] += 1
            entry["left_out"][gone.reason] += 1
        out = [{**r, "left_out": dict(sorted(r["left_out"].items()))} for r in rows.values()]
        out.sort(key=lambda r: (-r["pairs"], -r["votes"], r["chosen"], r["rejected"]))
        return out

    def as_json(self) -> dict[str, Any]:
        whole = Counter(g.reason for g in self.left_out if g.rejected_system is None)
        return {
            "sessions": self.sessions,
            "voted": self.voted,
            "votes": {kind: self.votes.get(kind, 0) for kind in ("winner", "tie", "all_wrong")},
            "pairs": len(self.pairs),
            "left_out": dict(sorted(Counter(g.reason for g in self.left_out).items())),
            "votes_without_pairs": dict(sorted(whole.items())),
            "by_pair": self.by_pair(),
        }


# --- reading the history ------------------------------------------------------------------------


def system_plan(system: str, trace: Trace | None) -> NamedPlan | str:
    """The plan `system` ran (from `trace` where it needs one), or the reason it cannot be told.

    Compare mode names a pool model's column by the model's id (`w1`), a bench by `direct:w1`:
    both are one step on that model."""
    name = system.strip()
    kind, colon, rest = name.partition(":")
    if kind == "direct" and colon and rest.strip():
        return NamedPlan((rest.strip(),), (DIRECT_SUBTASK,), ((),))
    if (
        is_conductor_system(name)
        or name in MOA_SYSTEMS
        or (colon and kind in ("adapter", "self-moa", "chain", "branch"))
    ):
        return NO_TRACE if trace is None else trace_plan(trace)
    if not name or name in NO_PLAN_SYSTEMS:
        return UNKNOWN_SYSTEM
    # a pool model's id, as compare mode names its column (ids may hold a colon: `llama3:8b`)
    if trace is not None and trace.mode != "direct":
        return UNKNOWN_SYSTEM  # a name that is no model: its run was no direct call
    return NamedPlan((name,), (DIRECT_SUBTASK,), ((),))


def trace_plan(trace: Trace) -> NamedPlan | str:
    """The first round's plan of a run, with each step's model (before any fallback)."""
    rounds = [r for r in trace.rounds if r.workflow is not None and r.workflow.model_id]
    if not rounds:
        return NO_PLAN
    first = min(rounds, key=lambda r: r.round)
    lists = first.workflow
    assert lists is not None
    steps = {s.index: s for s in first.steps}
    models = []
    for i in range(len(lists.model_id)):
        step = steps.get(i)
        model = step.first_model if step is not None else None
        if not model:
            return NO_MODELS
        models.append(model)
    access: list[tuple[int, ...] | str] = []
    for i, entry in enumerate(lists.access_list):
        access.append("all" if entry == "all" else tuple(int(j) for j in entry if isinstance(j, int) and 0 <= j < i))
    if len(access) != len(models) or len(lists.subtasks) != len(models):
        return NO_PLAN
    return NamedPlan(tuple(models), tuple(str(s) for s in lists.subtasks), tuple(access))


def session_pairs(session) -> tuple[list[VotePair], list[LeftOut]]:
    """The pairs of one compare session (`store.records.CompareSession`) and those left out."""
    kind = session.vote_kind or ("winner" if session.winner else None)
    if kind is None:
        return [], []
    if kind == "tie":
        return [], [LeftOut(session.id, None, None, "tie")]
    if kind == "all_wrong":
        return [], [LeftOut(session.id, None, None, "all wrong")]
    entries = {e.system: e for e in session.entries}
    winner = entries.get(session.winner)
    others = [e for e in session.entries if e.system != session.winner]
    if winner is None or not others:
        return [], [LeftOut(session.id, session.winner, None, "nothing to compare with")]
    chosen = system_plan(winner.system, winner.trace)
    pairs: list[VotePair] = []
    left: list[LeftOut] = []
    for other in others:
        rejected = system_plan(other.system, other.trace)
        if isinstance(chosen, str) or isinstance(rejected, str):
            reason = chosen if isinstance(chosen, str) else rejected
            left.append(LeftOut(session.id, winner.system, other.system, str(reason)))
        elif _same(chosen, rejected):
            left.append(LeftOut(session.id, winner.system, other.system, SAME_PLAN))
        else:
            pairs.append(VotePair(session.id, session.question, winner.system, other.system, chosen, rejected))
    return pairs, left


def read_votes(store, limit: int = 100_000) -> VoteHarvest:
    """Every voted compare session of the history, as pairs (see the module's docstring)."""
    harvest = VoteHarvest()
    for summary in store.list_compare_sessions(limit=limit):
        harvest.sessions += 1
        kind = summary.vote_kind or ("winner" if summary.winner else None)
        if kind is None:
            continue
        harvest.votes[kind] += 1
        pairs, left = session_pairs(store.get_compare_session(summary.id))
        harvest.pairs += pairs
        harvest.left_out += left
    return harvest


def graded_pairs(
    store, *bench_ids: str, best_only: bool = False, levels: Sequence[Preference] = ()
) -> tuple[list[VotePair], list[LeftOut]]:
    """The pairs graded benches give (see the module's docstring): right over wrong, then the
    cheaper right over the dearer. Each of `bench_ids` is a whole id (`store.resolve_bench`).

    Several benches of one suite (the same items graded again, under other sampling) are pooled:
    an item's question, answered by one system with one plan, is one arm with a mean grade over
    its samples and a mean cost, and `a` is preferred over `b` when its mean grade is higher, or
    equal and above 0 at a lower cost. One sample each is the single bench's rule. With
    `best_only`, only the item's best arms (none preferred over them) are chosen, each over every
    arm below it: one consistent pick per question rather than every ordering of the others,
    whose single samples are mostly noise. With `levels`, the rule is each level's reward (see the
    module's docstring), and every pair names the level it was graded under."""
    items: dict[str, dict[tuple[str, NamedPlan | str], _Arm]] = {}
    questions: dict[str, str] = {}  # an item's question, from the first bench whose runs still hold it
    traces: dict[str, Trace | None] = {}

    def trace(record) -> Trace | None:
        if record.run_id and record.run_id not in traces:
            try:
                traces[record.run_id] = store.get_trace(record.run_id)
            except Exception:  # noqa: BLE001 - a deleted run: no trace, said as such
                traces[record.run_id] = None
        return traces.get(record.run_id or "")

    for bench_id in bench_ids:
        by_item: dict[str, list] = {}
        for record in store.bench_items(bench_id):
            if record.status == "graded":
                by_item.setdefault(record.item_id, []).append(record)
        for item_id, records in by_item.items():
            if not questions.get(item_id):
                questions[item_id] = next((t.question for t in map(trace, records) if t is not None and t.question), "")
            arms = items.setdefault(item_id, {})
            for record in records:
                plan = system_plan(record.system, trace(record))
                arm = arms.setdefault((record.system, plan), _Arm(record.system, plan))
                arm.grades.append(bool(record.correct))
                arm.costs.append(record.cost_usd)
                arm.latencies.append(record.latency_s)

    source_ids = "+".join(bench_ids)
    pairs: list[VotePair] = []
    left: list[LeftOut] = []
    for item_id, by_arm in items.items():
        source, question = f"bench:{source_ids}:{item_id}", questions[item_id]
        arms = list(by_arm.values())
        for level in levels or (None,):
            over = _rule(arms, level)
            tops = [a for a in arms if not any(over(b, a) for b in arms)] if best_only else arms
            for a in tops:
                for b in arms:
                    if not over(a, b):
                        continue
                    if isinstance(a.plan, str) or isinstance(b.plan, str):
                        left.append(
                            LeftOut(source, a.system, b.system, a.plan if isinstance(a.plan, str) else str(b.plan))
                        )
                    elif not question:
                        left.append(LeftOut(source, a.system, b.system, NO_TRACE))
                    elif _same(a.plan, b.plan):
                        left.append(LeftOut(source, a.system, b.system, SAME_PLAN))
                    else:
                        pairs.append(
                            VotePair(
                                source,
                                question,
                                a.system,
                                b.system,
                                a.plan,
                                b.plan,
                                None if level is None else str(level),
                            )
                        )
    return pairs, left


def _rule(arms: Sequence["_Arm"], level: Preference | None):
    """`over(a, b)`: whether arm a is preferred over arm b on one item, by the plain rule (`level`
    None) or by `level`'s reward, relative to the item's dearest and slowest arms."""
    if level is None:
        return lambda a, b: a.preferred_over(b)
    dearest = max(a.cost for a in arms)
    slowest = max(a.latency for a in arms)

    def reward(arm: "_Arm") -> float:
        return level.reward(
            float(REWARD_VALID + (REWARD_CORRECT - REWARD_VALID) * arm.grade),
            arm.cost / dearest if dearest > 0 else 0.0,
            arm.latency / slowest if slowest > 0 else 0.0,
        )

    rewards = {id(a): reward(a) for a in arms}
    return lambda a, b: rewards[id(a)] > rewards[id(b)] + 1e-9


@dataclass
class _Arm:
    """One system's plan on one item of graded benches: its grades and costs, one per sample."""

    system: str
    plan: NamedPlan | str  # a reason string: no plan can be rebuilt
    grades: list[bool] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    @property
    def grade(self) -> Fraction:
        return Fraction(sum(self.grades), len(self.grades))

    @property
    def cost(self) -> float:
        return sum(self.costs) / len(self.costs)

    @property
    def latency(self) -> float:
        return sum(self.latencies) / len(self.latencies)

    def preferred_over(self, other: "_Arm") -> bool:
        return self.grade > other.grade or (self.grade == other.grade > 0 and self.cost < other.cost)


def usable_pairs(store) -> int:
    """How many preference pairs the history's votes give (the leaderboard's figure)."""
    return len(read_votes(store).pairs)


def _same(a: NamedPlan, b: NamedPlan) -> bool:
    return (
        a.models == b.models
        and a.access == b.access
        and [_norm(s) for s in a.subtasks] == [_norm(s) for s in b.subtasks]
    )


def _norm(text: str) -> str:
    return " ".join(text.split()).rstrip(".").casefold()


# --- rendering for training ---------------------------------------------------------------------


def grammar_subtask(text: str, max_chars: int) -> str:
    """`text` as the plan grammar can write it: no quote, backslash, control character, ':', '='
    or '<', no leading space, at most `max_chars` characters, never empty."""
    kept = "".join(
        ch if ord(ch) >= 0x20 and ch != "\x7f" else " "
        for ch in text
        if ch not in '"\\:=<' and not 0xD800 <= ord(ch) <= 0xDFFF
    )
    kept = " ".join(kept.split())
    kept = kept[:max_chars].rstrip() or DIRECT_SUBTASK[:max_chars]
    return kept


def plan_text(plan: NamedPlan, pool: Sequence[str], max_steps: int, max_subtask_chars: int) -> str:
    """The completion the conductor writes for `plan` under the grammar (prompt style compact or
    base: no reasoning): a newline, the three lists, a newline. ValueError with the reason when the
    plan cannot be written for this pool and step limit."""
    if len(plan) > max_steps:
        raise ValueError(OVER_LIMIT)
    clipped = NamedPlan(plan.models, tuple(grammar_subtask(s, max_subtask_chars) for s in plan.subtasks), plan.access)
    try:
        workflow = clipped.workflow(pool)
    except KeyError:
        raise ValueError(NOT_IN_POOL) from None
    lists = workflow.to_lists()
    text = "\n".join(f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in lists.items())
    return "\n" + text + "\n"


@dataclass(frozen=True)
class PairText:
    """A pair rendered for one training pool: the question, and the two completions."""

    question: str
    chosen: str
    rejected: str
    chosen_system: str
    rejected_system: str
    preference: str | None = None  # the level its prompt states (VotePair.preference)


def pair_texts(
    pairs: Iterable[VotePair], pool: Sequence[str], max_steps: int, max_subtask_chars: int
) -> tuple[list[PairText], Counter]:
    """The pairs that can be written for `pool` and the step limit, and why the others cannot."""
    out: list[PairText] = []
    skipped: Counter = Counter()
    for pair in pairs:
        try:
            chosen = plan_text(pair.chosen, pool, max_steps, max_subtask_chars)
            rejected = plan_text(pair.rejected, pool, max_steps, max_subtask_chars)
        except ValueError as exc:
            skipped[str(exc)] += 1
            continue
        if chosen == rejected:  # the same once subtasks are clipped to the grammar's bound
            skipped[SAME_PLAN] += 1
            continue
        out.append(PairText(pair.question, chosen, rejected, pair.chosen_system, pair.rejected_system, pair.preference))
    return out, skipped
