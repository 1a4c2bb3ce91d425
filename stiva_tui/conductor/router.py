"""A one-pass router (`stiva train --method router`, systems `router:DIR[@LEVEL]`, `[conductor] router`):
Stiva's Fugu Mini. The question's representation, then a small head that predicts each pool
model's chance of a right answer, then one step on the model with the best chance less its cost
and latency under the preference: no plan is written, one forward pass decides.

    router = load_router("router/")                   # RouterError, one line, when it cannot be used
    decision = router.decide(question, pool_ids, preference)
    decision.model, decision.chance, decision.runner_up, decision.untrained

- **Representation** (`features`): `tfidf` (the default), hashed TF-IDF of the question's words
  and character n-grams (core/textvec.py, 8,192 buckets), with no model at all; or `embedded`,
  the embedded Gemma-3 270M's last hidden state mean-pooled over the question's tokens (640
  numbers), one forward pass a question (0.14 s median, 1.3 s p95 on 2 shared cores, where tfidf
  takes 0.2 ms: benchmarks/perf/router_decision.json), so not the default.
- **Head:** one logistic unit per pool model over the representation (640 x models weights for
  `embedded`, 7,051 parameters for 11 models; 8,192 x models for `tfidf`), trained on graded
  answers (train/router.py). Saved as `router.json` (models, costs, settings) and `router.npz`.
- **The preference** weighs as training's rewards do (core/preference.py): utility = chance
  - cost weight x (the model's mean cost per question / the dearest's) - latency weight x (its
  mean latency / the slowest's), over the models the router was trained on that are in the pool.
  A pool model it was not trained on is never picked (`untrained` names them).

- **Workflows** (`WorkflowChoice`, trained by train/workflow_router.py): a router trained on graded
  answers whose final answers are known (`stiva train router`) also chooses, per question, the
  workflow to run: one model, an agreement cascade or a vote, by each candidate's expected
  accuracy, cost and latency over the nearest train questions, under the preference (cost and
  latency relative to the dearest and slowest candidate). Its plan is that workflow; the head's
  chances are what the line shows beside it.
  At a preference level where, on validation, the choice per question did not beat the best fixed
  workflow at no more cost, that level runs the fixed workflow (`WorkflowChoice.fixed`, saved in
  router.json); the line says "fixed workflow: cascade ...".

numpy and torch are imported inside the functions that use them.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.preference import Preference
from ..core.usage import Usage
from ..core.workflow import Step, Workflow, workflow_from_lists
from .base import ConductorError, Plan, PlanRequest
from .router_files import read_router_files

__all__ = [
    "FEATURES",
    "KNN_GRID",
    "Decision",
    "WorkflowChoice",
    "WorkflowDecision",
    "utility_weights",
    "Router",
    "RouterConductor",
    "RouterError",
    "canonical",
    "embed_texts",
    "featurize",
    "load_router",
]

FEATURES = ("embedded", "tfidf")
ROUTER_FILE = "router.json"
WEIGHTS_FILE = "router.npz"
FORMAT = "stiva-router"
VERSION = 1
TFIDF_DIM = 2**13
_EMBED_MAX_TOKENS = 256
_POOL_PREFIXES = ("replay:", "sim:")


class RouterError(Exception):
    """A router that cannot be trained, read or used; the message says why and what to do."""


def canonical(name: str) -> str:
    """A pool model's name as a router knows it: without the replayed or simulated pool's prefix
    (`replay:gpt-4o` is `gpt-4o`, so a router trained on a replay routes the real model's id too)."""
    for prefix in _POOL_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


@dataclass(frozen=True)
class Decision:
    model: str  # the pool id picked
    chance: float  # its predicted chance of a right answer
    utility: float
    runner_up: str | None
    runner_up_chance: float | None
    chances: dict[str, float]  # every candidate's, by pool id
    untrained: tuple[str, ...]  # pool ids the router was not trained on (never picked)
    seconds: float  # the decision's own time (the forward pass included)

    def line(self) -> str:
        """What the tree shows as the router's reasoning."""
        text = f"router: {self.model} ({self.chance:.0%} predicted chance of a right answer)"
        if self.runner_up is not None and self.runner_up_chance is not None:
            text += f"; runner-up {self.runner_up} ({self.runner_up_chance:.0%})"
        if self.untrained:
            text += f"; not trained on {', '.join(self.untrained)}, so never picked"
        return text + f"; decided in {self.seconds * 1000:.0f} ms"


# (k nearest train questions, prior weight in pseudo items) tried on the validation draw
KNN_GRID = ((25, 8.0), (100, 8.0), (100, 32.0), (400, 32.0), (400, 128.0), (1000, 128.0))


def utility_weights(preference: Preference | None, dearest: float, slowest: float) -> tuple[float, float]:
    """(weight per USD, weight per second) of a utility `chance - w_usd * cost - w_s * latency`:
    the preference's weights over the dearest and the slowest candidate's mean, as core/preference.py
    weighs a plan's relative cost and latency."""
    if preference is None:
        return 0.0, 0.0
    return (preference.cost / dearest if dearest > 0 else 0.0, preference.latency / slowest if slowest > 0 else 0.0)


@dataclass(frozen=True)
class WorkflowDecision:
    name: str  # the candidate, as bench names it: direct:A, cascade:A+B>C, vote:A+B+C
    workflow: Workflow  # on pool indices
    chance: float  # its expected chance of a right answer
    cost_usd: float  # its expected cost
    runner_up: str | None
    runner_up_chance: float | None
    untrained: tuple[str, ...]
    seconds: float
    fixed: bool = False  # the level runs one fixed workflow: the router did not beat it on validation

    def line(self) -> str:
        if self.fixed:
            kind, _, rest = self.name.partition(":")
            shown = f"{kind} {rest}" if rest and kind in ("cascade", "vote") else self.name
            return (
                f"router: fixed workflow: {shown} (at this preference the router's choice per question did not "
                f"beat it on validation; {self.chance:.0%} expected right, ${self.cost_usd:.4f} expected cost); "
                f"decided in {self.seconds * 1000:.0f} ms"
            )
        text = (
            f"router: {self.name} ({self.chance:.0%} expected right, ${self.cost_usd:.4f} expected cost, from "
            "its record on similar questions)"
        )
        if self.runner_up is not None and self.runner_up_chance is not None:
            text += f"; runner-up {self.runner_up} ({self.runner_up_chance:.0%})"
        if self.untrained:
            text += f"; not trained on {', '.join(self.untrained)}, so never picked"
        return text + f"; decided in {self.seconds * 1000:.0f} ms"


@dataclass
class WorkflowChoice:
    """Candidate workflows and their record on the train items (train/workflow_router.py)."""

    names: list[str]
    models: list[list[str]]  # per candidate: model index i is models[c][i] (canonical names)
    workflows: list[Workflow]
    rows: Any  # (n, d): the train items' representation, unit rows (numpy, or core.textvec.SparseRows)
    right: Any  # numpy (n, W): each candidate right (1) or wrong (0) on each train item
    cost: Any  # numpy (n, W): USD
    latency: Any  # numpy (n, W): seconds
    k: int
    prior_weight: float
    # Per preference level, whether the router or one fixed workflow runs there (issue 57): each entry
    # {"level", "cost", "latency" (the preference's weights), "runs": "router" | "fixed", "workflow"
    # (the best fixed candidate at no more cost, chosen on the train items), and both's validation
    # accuracy and cost}. Where "runs" is "fixed", that level runs the fixed workflow, not the choice.
    fixed: list = field(default_factory=list)
    _index: Any = None  # the rows' CosineIndex, built on first use

    @property
    def dearest(self) -> float:
        return float(self.cost.mean(0).max()) if self.cost.size else 0.0

    @property
    def slowest(self) -> float:
        return float(self.latency.mean(0).max()) if self.latency.size else 0.0

    def similarities(self, queries):
        """Each query's cosine with every train item: (len(queries), n)."""
        import numpy as np

        from ..core.textvec import CosineIndex

        if self._index is None:
            self._index = CosineIndex(self.rows)
        queries = np.asarray(queries, dtype=np.float32)
        norms = np.linalg.norm(queries, axis=1, keepdims=True)
        return self._index.scores(queries / np.where(norms > 0, norms, 1.0))

    def estimate_rows(self, queries=None, *, sims=None):
        """(chance, cost, latency), each (len(queries), W): each candidate's outcome over the `k`
        nearest train items (cosine; similarity-weighted), shrunk toward its mean over all of them.
        `sims`: the queries' `similarities`, where they are known already (one set, many settings)."""
        import numpy as np

        if sims is None:
            sims = self.similarities(queries)
        k = max(1, min(self.k, sims.shape[1]))
        if k < sims.shape[1]:
            nearest = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        else:
            nearest = np.tile(np.arange(sims.shape[1]), (len(sims), 1))
        weights = np.maximum(np.take_along_axis(sims, nearest, axis=1), 0.0)[..., None]  # (q, k, 1)
        total = weights.sum(1) + self.prior_weight  # (q, 1)
        out = []
        for table in (self.right, self.cost, self.latency):
            prior = table.mean(0)
            out.append(((weights * table[nearest]).sum(1) + self.prior_weight * prior) / total)
        return tuple(out)

    def utilities(self, estimates, weights: tuple[float, float], allowed=None):
        """Each candidate's expected utility for each row of `estimates` under `weights`
        (utility_weights); a hair of cost breaks ties toward the cheaper; -inf where `allowed`,
        a mask (W,), says it may not be picked."""
        import numpy as np

        chance, cost, latency = estimates
        utility = chance - weights[0] * cost - weights[1] * latency - 1e-9 * cost
        return utility if allowed is None else np.where(allowed[None, :], utility, -np.inf)

    def pick(self, estimates, weights: tuple[float, float], allowed=None):
        """The best candidate of each row of `estimates` (its `utilities`' argmax)."""
        return self.utilities(estimates, weights, allowed).argmax(1)

    def fixed_for(self, preference: Preference | None) -> int | None:
        """The candidate that runs on every question at `preference` where the router did not beat
        the best fixed workflow on validation (the entry of `fixed` with the same weights), else None."""
        cost, latency = (preference.cost, preference.latency) if preference is not None else (0.0, 0.0)
        for entry in self.fixed:
            if (
                entry.get("runs") == "fixed"
                and abs(float(entry.get("cost", -1)) - cost) < 1e-9
                and abs(float(entry.get("latency", -1)) - latency) < 1e-9
                and entry.get("workflow") in self.names
            ):
                return self.names.index(entry["workflow"])
        return None

    def choose(self, estimates, preference: Preference | None):
        """Each row's candidate at `preference`, as `Router.decide_workflow` decides: the fixed
        workflow where that level runs one, else `pick` under the preference's weights."""
        import numpy as np

        fixed = self.fixed_for(preference)
        if fixed is not None:
            return np.full(len(estimates[0]), fixed, dtype=np.int64)
        return self.pick(estimates, utility_weights(preference, self.dearest, self.slowest))


@dataclass
class Router:
    """A trained router, read from its folder."""

    folder: Path
    models: list[str]  # canonical names, the head's columns
    features: str
    weights: Any  # numpy (d, m)
    bias: Any  # numpy (m,)
    mean: Any  # numpy (d,): the representation's standardisation
    scale: Any  # numpy (d,)
    cost: dict[str, float]  # mean USD per question, per model (train split)
    latency: dict[str, float]  # mean seconds per question, per model
    vectorizer: dict | None = None  # tfidf: the fitted TextVectorizer's data
    info: dict = field(default_factory=dict)  # what it was trained on, and how
    workflows: WorkflowChoice | None = None  # the per-question workflow choice, where it was trained
    _vec: Any = None

    def represent(self, texts: Sequence[str]):
        return featurize(self.features, texts, vectorizer=self._vectorizer())

    def _vectorizer(self):
        if self.features != "tfidf":
            return None
        if self._vec is None:
            from ..core.textvec import TextVectorizer

            self._vec = TextVectorizer.from_dict(self.vectorizer or {})
        return self._vec

    def predict_rows(self, rows):
        """Chances (n, models) for representations (n, d)."""
        import numpy as np

        z = ((rows - self.mean) / self.scale) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))

    def predict(self, question: str) -> dict[str, float]:
        """Each trained model's predicted chance on `question`, by canonical name."""
        chances = self.predict_rows(self.represent([question]))[0]
        return {name: float(p) for name, p in zip(self.models, chances)}

    def decide(self, question: str, pool: Sequence[str], preference: Preference | None = None) -> Decision:
        """The pool model to ask (`pool`: the pool's ids). RouterError when the router knows none of them."""
        started = time.perf_counter()
        known = {canonical(pool_id): pool_id for pool_id in pool}
        candidates = [name for name in self.models if name in known]
        untrained = tuple(pool_id for pool_id in pool if canonical(pool_id) not in self.models)
        if not candidates:
            raise RouterError(
                f"the router in {self.folder} was trained on {', '.join(self.models)}; none of them is in the pool "
                f"({', '.join(pool) or 'empty'})"
            )
        chances = self.predict(question)
        return self.choose({known[n]: chances[n] for n in candidates}, preference, untrained, started)

    def decide_workflow(
        self, question: str, pool: Sequence[str], preference: Preference | None = None, *, single: bool = False
    ) -> WorkflowDecision:
        """The workflow to run on `question` (`pool`: the pool's ids): the candidate whose models are
        all in the pool with the best expected utility. `single`: one model only, no vote or cascade
        (the question's answers cannot be compared). RouterError when none can run."""
        import numpy as np

        assert self.workflows is not None
        choice = self.workflows
        started = time.perf_counter()
        known = {canonical(pool_id): pool_id for pool_id in pool}
        allowed = np.array([all(m in known for m in models) for models in choice.models])
        if not allowed.any():
            raise RouterError(
                f"the router in {self.folder} chooses among workflows of {', '.join(self.models)}; the pool has none "
                f"of them ({', '.join(pool) or 'empty'})"
            )
        if single:
            one_model = allowed & np.array([len(w.steps) == 1 for w in choice.workflows])
            allowed = one_model if one_model.any() else allowed  # else the engine keeps one model of it
        estimates = choice.estimate_rows(self.represent([question]))
        weights = utility_weights(preference, choice.dearest, choice.slowest)
        utility = choice.utilities(estimates, weights, allowed)[0]
        chance, cost = estimates[0][0], estimates[1][0]
        ranked = [int(i) for i in np.argsort(-utility, kind="stable") if allowed[i]]
        fixed = choice.fixed_for(preference)
        if fixed is not None and allowed[fixed]:  # this level runs one fixed workflow (see `fixed`)
            ranked = [fixed]
        else:
            fixed = None
        best = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        order = list(pool)
        workflow = choice.workflows[best]
        steps = tuple(
            replace(step, model=order.index(known[choice.models[best][step.model]])) for step in workflow.steps
        )
        return WorkflowDecision(
            name=_pool_name(choice.names[best], known),
            workflow=Workflow(steps),
            chance=float(chance[best]),
            cost_usd=float(cost[best]),
            runner_up=_pool_name(choice.names[second], known) if second is not None else None,
            runner_up_chance=float(chance[second]) if second is not None else None,
            untrained=tuple(pool_id for pool_id in pool if canonical(pool_id) not in self.models),
            seconds=time.perf_counter() - started,
            fixed=fixed is not None,
        )

    def choose(
        self,
        chances: dict[str, float],
        preference: Preference | None,
        untrained: tuple[str, ...] = (),
        started: float | None = None,
    ) -> Decision:
        """The best of `chances` (pool id -> chance) under `preference`."""
        utility = self.utilities(chances, preference)
        ranked = sorted(chances, key=lambda pool_id: (-utility[pool_id], -chances[pool_id], pool_id))
        best = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        return Decision(
            model=best,
            chance=chances[best],
            utility=utility[best],
            runner_up=second,
            runner_up_chance=chances[second] if second is not None else None,
            chances=dict(chances),
            untrained=untrained,
            seconds=time.perf_counter() - started if started is not None else 0.0,
        )

    def utilities(self, chances: dict[str, float], preference: Preference | None) -> dict[str, float]:
        if preference is None or (preference.cost == 0 and preference.latency == 0):
            return dict(chances)
        costs = {m: self.cost.get(canonical(m), 0.0) for m in chances}
        latencies = {m: self.latency.get(canonical(m), 0.0) for m in chances}
        dearest, slowest = max(costs.values()) or 1.0, max(latencies.values()) or 1.0
        return {
            m: p - preference.cost * costs[m] / dearest - preference.latency * latencies[m] / slowest
            for m, p in chances.items()
        }

    def save(self) -> None:
        import numpy as np

        self.folder.mkdir(parents=True, exist_ok=True)
        data = {
            "format": FORMAT,
            "version": VERSION,
            "models": self.models,
            "features": self.features,
            "cost_per_question_usd": self.cost,
            "latency_s": self.latency,
            "vectorizer": self.vectorizer,
            **{k: v for k, v in self.info.items() if k != "workflow_settings"},
        }
        arrays = {"weights": self.weights, "bias": self.bias, "mean": self.mean, "scale": self.scale}
        if self.workflows is not None:
            choice = self.workflows
            data["workflows"] = {
                "names": choice.names,
                "models": choice.models,
                "lists": [w.to_lists() for w in choice.workflows],
                "k": choice.k,
                "prior_weight": choice.prior_weight,
                "fixed": choice.fixed,
                **{k: v for k, v in self.info.get("workflow_settings", {}).items()},
            }
            from ..core.textvec import SparseRows, _sparse

            rows: SparseRows = _sparse(choice.rows)
            arrays.update(
                wf_indptr=rows.indptr.astype(np.int64),
                wf_indices=rows.indices.astype(np.int32),
                wf_data=rows.data.astype(np.float32),
                wf_dim=np.array([rows.dim], dtype=np.int64),
                wf_right=np.asarray(choice.right, dtype=np.uint8),
                wf_cost=np.asarray(choice.cost, dtype=np.float32),
                wf_latency=np.asarray(choice.latency, dtype=np.float32),
            )
        scratch = self.folder / f".{WEIGHTS_FILE}.tmp.npz"
        np.savez_compressed(scratch, **arrays)
        scratch.replace(self.folder / WEIGHTS_FILE)
        text = self.folder / f".{ROUTER_FILE}.tmp"
        text.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        text.replace(self.folder / ROUTER_FILE)


_NAME_PARTS = re.compile(r"(direct:|vote:|cascade:|\+|>)")


def _pool_name(name: str, known: dict[str, str]) -> str:
    """A candidate's name (canonical model names) with the pool's ids: `direct:gpt-4o` is `gpt-4o`'s pool id
    alone (`replay:gpt-4o` on a replay); `cascade:a+b>c` names them as the pool does."""
    parts = _NAME_PARTS.split(name)
    if not all(p in known or _NAME_PARTS.fullmatch(p) or not p for p in parts):
        return name
    mapped = "".join(known.get(p, p) for p in parts)
    return mapped.removeprefix("direct:")


def is_router_folder(path: str | Path) -> bool:
    return (Path(path).expanduser() / ROUTER_FILE).is_file()


def load_router(folder: str | Path) -> Router:
    """The router saved in `folder` (RouterError, one line, when it is not one or is damaged)."""
    import numpy as np

    path = Path(folder).expanduser()
    where = path / ROUTER_FILE
    if not where.is_file():
        raise RouterError(
            f"{path}: no {ROUTER_FILE} there; train one with stiva train SUITE --method router --out {path}"
        )
    try:
        data, arrays = read_router_files(where, path / WEIGHTS_FILE)
        weights, bias, mean, scale = (
            np.asarray(arrays[k], dtype=np.float32) for k in ("weights", "bias", "mean", "scale")
        )
    except (OSError, ValueError, KeyError) as exc:
        raise RouterError(f"{path}: not a readable router ({exc}); train it again") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RouterError(f"{where}: not a Stiva router file")
    models = data.get("models")
    features = data.get("features")
    if (
        not isinstance(models, list)
        or features not in FEATURES
        or weights.ndim != 2
        or weights.shape[1] != len(models)
        or bias.shape != (len(models),)
        or mean.shape != (weights.shape[0],)
        or scale.shape != (weights.shape[0],)
    ):
        raise RouterError(f"{path}: its weights do not match its models; train it again")
    info = {
        k: v for k, v in data.items() if k not in ("models", "features", "vectorizer", "format", "version", "workflows")
    }
    workflows = (
        _workflow_choice(path, data.get("workflows"), arrays, [str(m) for m in models]) if "workflows" in data else None
    )
    return Router(
        folder=path,
        models=[str(m) for m in models],
        features=features,
        weights=weights,
        bias=bias,
        mean=mean,
        scale=np.where(scale > 0, scale, 1.0).astype(np.float32),
        cost={str(k): float(v) for k, v in (data.get("cost_per_question_usd") or {}).items()},
        latency={str(k): float(v) for k, v in (data.get("latency_s") or {}).items()},
        vectorizer=data.get("vectorizer"),
        info=info,
        workflows=workflows,
    )


def _workflow_choice(path: Path, data: Any, arrays: Any, models: list[str]) -> WorkflowChoice:
    """The saved workflow choice (RouterError, one line, where it does not match its arrays)."""
    import numpy as np

    damaged = RouterError(f"{path}: its workflow choice is damaged; train it again")
    try:
        names, owners, lists = data["names"], data["models"], data["lists"]
        k, prior = int(data["k"]), float(data["prior_weight"])
        fixed = data.get("fixed") or []
        indptr, indices, values = arrays["wf_indptr"], arrays["wf_indices"], arrays["wf_data"]
        dim = int(arrays["wf_dim"][0])
        right = np.asarray(arrays["wf_right"], dtype=np.float32)
        cost = np.asarray(arrays["wf_cost"], dtype=np.float32)
        latency = np.asarray(arrays["wf_latency"], dtype=np.float32)
    except (KeyError, TypeError, ValueError, IndexError):
        raise damaged from None
    n = len(indptr) - 1
    if (
        not (isinstance(names, list) and isinstance(owners, list) and isinstance(lists, list))
        or not len(names) == len(owners) == len(lists) >= 1
        or right.shape != (n, len(names))
        or cost.shape != right.shape
        or latency.shape != right.shape
        or indptr[-1] != len(indices)
        or len(indices) != len(values)
        or (np.diff(indptr) < 0).any()
        or dim < 1
        or (len(indices) and (int(indices.max()) >= dim or int(indices.min()) < 0))
        or any(not isinstance(o, list) or not set(o) <= set(models) for o in owners)
        or not isinstance(fixed, list)
        or any(not isinstance(e, dict) for e in fixed)
    ):
        raise damaged
    try:
        workflows = [
            workflow_from_lists(spec, pool_size=len(owner), max_steps=len(spec.get("model_id", [])))
            for spec, owner in zip(lists, owners)
        ]
    except Exception:  # noqa: BLE001 - a WorkflowParseError, a non-dict: the file is damaged
        raise damaged from None
    from ..core.textvec import SparseRows

    rows = SparseRows(np.asarray(indptr, np.int64), np.asarray(indices, np.int64), np.asarray(values, np.float32), dim)
    return WorkflowChoice([str(x) for x in names], owners, workflows, rows, right, cost, latency, k, prior, fixed)


# --- representations ---------------------------------------------------------------------------------


def featurize(kind: str, texts: Sequence[str], *, vectorizer=None, progress: Callable[[int, int], None] | None = None):
    """Rows (n, d) of float32: `tfidf` through a fitted vectorizer, `embedded` through the embedded model."""
    import numpy as np

    if kind == "tfidf":
        if vectorizer is None:
            raise RouterError("a tfidf router needs its fitted vectorizer")
        return np.asarray(vectorizer.transform(list(texts)), dtype=np.float32)
    if kind == "embedded":
        return embed_texts(texts, progress=progress)
    raise RouterError(f"unknown representation {kind!r}: use {', '.join(FEATURES)}")


_embedded_cache: dict[str, Any] = {}


def embed_texts(texts: Sequence[str], *, progress: Callable[[int, int], None] | None = None, batch: int = 8):
    """The embedded model's mean-pooled last hidden state of each text (float32, n x hidden). Texts
    embedded before in this process are not embedded again (a bench asks a router per item)."""
    import numpy as np
    import torch

    from ..inference.embedded import load_embedded

    loaded = load_embedded()
    model, tokenizer = loaded.model, loaded.tokenizer
    body = getattr(model, "model", model)  # the decoder without the LM head (262k-wide logits)
    keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
    todo = [i for i, k in enumerate(keys) if k not in _embedded_cache]
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        encoded = tokenizer(
            [texts[i] for i in chunk],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=_EMBED_MAX_TOKENS,
        )
        with loaded.lock, torch.inference_mode():
            hidden = body(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
        for i, row in zip(chunk, pooled.float().numpy()):
            _embedded_cache[keys[i]] = row
        if progress is not None:
            progress(min(start + batch, len(todo)), len(todo))
    return np.stack([_embedded_cache[k] for k in keys]).astype(np.float32) if keys else np.zeros((0, 1), np.float32)


# --- the conductor ---------------------------------------------------------------------------------


class RouterConductor:
    """The `Conductor` whose plan is one step on the router's pick, the question sent as asked, at
    the request's preference (a `router:DIR@LEVEL` system sets that level on its requests)."""

    backend = "router"
    quantization = None
    adapter = None

    def __init__(self, folder: str | Path):
        self.folder = Path(folder).expanduser()
        self.model = str(self.folder)
        self._router: Router | None = None
        # Escalation (`[conductor] router_escalate_below`): where the best predicted chance is under
        # `escalate_below`, `escalate()` gives the full conductor, which plans the question instead.
        self.escalate_below = 0.0
        self.escalate: Callable[[], Awaitable[Any]] | None = None

    @property
    def loaded(self) -> bool:
        return self._router is not None

    async def load(self, progress=None) -> None:
        import asyncio

        if self._router is None:
            try:
                self._router = await asyncio.to_thread(load_router, self.folder)
            except RouterError as exc:
                raise ConductorError(str(exc)) from None

    async def plan(self, request: PlanRequest, on_delta=None) -> Plan:
        import asyncio

        await self.load()
        assert self._router is not None
        pool = [worker.id for worker in request.workers]
        preference = request.preference
        started = time.perf_counter()
        if self._router.workflows is not None:
            return await self._workflow_plan(request, pool, on_delta, started)
        try:
            decision = await asyncio.to_thread(self._router.decide, request.question, pool, preference)
        except RouterError as exc:
            raise ConductorError(str(exc)) from None
        line = decision.line()
        if self.escalate is not None and decision.chance < self.escalate_below:
            return await self._escalated(request, on_delta, decision.chance, decision.model, started)
        if on_delta is not None:
            on_delta(line)
        step = Step(model=pool.index(decision.model), subtask=request.question, access=())
        return Plan(
            workflow=Workflow((step,)),
            reasoning=line,
            raw_text=line,
            usage=Usage(),
            latency_s=time.perf_counter() - started,
        )

    async def _workflow_plan(self, request: PlanRequest, pool: list[str], on_delta, started: float) -> Plan:
        """The plan of a router that chooses workflows: the candidate it decides on, on the pool."""
        import asyncio

        assert self._router is not None
        try:
            decision = await asyncio.to_thread(
                self._router.decide_workflow, request.question, pool, request.preference, single=request.single_model
            )
        except RouterError as exc:
            raise ConductorError(str(exc)) from None
        if self.escalate is not None and (decision.chance < self.escalate_below or self.escalate_below >= 1.0):
            return await self._escalated(request, on_delta, decision.chance, decision.name, started)
        line = decision.line()
        if request.single_model:
            from ..core.open_text import OPEN_REASON

            line += f"; one model, since {OPEN_REASON}"
        if on_delta is not None:
            on_delta(line)
        workflow = decision.workflow
        if len(workflow.steps) == 1:  # one model: the question as asked, as the head's plan sends it
            workflow = Workflow((replace(workflow.steps[0], subtask=request.question),))
        return Plan(
            workflow=workflow, reasoning=line, raw_text=line, usage=Usage(), latency_s=time.perf_counter() - started
        )

    async def _escalated(self, request: PlanRequest, on_delta, chance: float, pick: str, started: float) -> Plan:
        """The full conductor's plan, with the router's reason for handing it over first."""
        assert self.escalate is not None
        why = (
            f"router: the best predicted chance, {chance:.0%} ({pick}), is under "
            f"{self.escalate_below:.0%}: the full conductor plans this question"
        )
        if on_delta is not None:
            on_delta(why + "\n")
        full = await self.escalate()
        plan = await full.plan(request, on_delta)
        return replace(
            plan,
            reasoning=f"{why}\n{plan.reasoning}".strip(),
            raw_text=f"{why}\n{plan.raw_text}",
            latency_s=time.perf_counter() - started,
        )

    def describe(self) -> dict:
        info = {"backend": "router", "model": str(self.folder)}
        if self._router is not None:
            info["features"] = self._router.features
            info["models"] = len(self._router.models)
        return info
