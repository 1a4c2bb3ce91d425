"""`stiva train router SUITE --out DIR`: a one-pass router (conductor/router.py) learned from graded answers.

    labels = graded_answers(config, suite, progress)        # every pool model on every item, graded
    summary = train_router(labels, out=DIR, features="embedded", seed=0)

- **The labels** are each pool model's graded answer to each item of SUITE: read straight from the
  history where the pool is a replay (`--pool replay:ID`: the bench's recorded grades, no call);
  otherwise a real `stiva bench` of `direct:*` on the suite first (train/graded.py: resumed,
  never paid twice), as RouteLLM and RouterBench train routers from graded model outputs.
- **The head:** one logistic unit per model on the representation (standardised where it is the
  embedded model's; TF-IDF rows are unit vectors already), trained by Adam on
  mini-batches with L2, stopped at the epoch with the least loss on a validation part of the
  items (15%, drawn by the seed); so seeds differ in the validation draw and the batch order.
- **Costs and latencies** per question are each model's means over the items (what the
  preference weighs at decision time).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..conductor.router import FEATURES, TFIDF_DIM, Router, RouterError, canonical, featurize
from .trainer import TrainError

__all__ = ["Labels", "graded_answers", "train_router"]

Progress = Callable[[str], None]


@dataclass
class Labels:
    """Items (id, question) and, per model (canonical name), its score on each: a list aligned with items."""

    items: list[tuple[str, str]]
    models: list[str]
    scores: dict[str, list[float]]
    cost: dict[str, float]  # mean USD per question
    latency: dict[str, float]  # mean seconds per question
    source: str  # the bench(es) the grades came from
    # Per model, aligned with items: each answer's final answer (core/answers.py, by the item's
    # kind), cost and latency: what a vote or a cascade of these models would have given.
    finals: dict[str, list[str | None]] = field(default_factory=dict)
    costs: dict[str, list[float]] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    # The step limit its workflows run under (the config's `[conductor] max_steps`): a vote with
    # fewer than two readable answers calls a judge only where the limit leaves room, as a run does.
    max_calls: int | None = None


def graded_answers(config, suite, progress: Progress | None = None, *, unsafe_code=False, answer_cache=True) -> Labels:
    """Every pool model's grade on every item of `suite` (TrainError when there are none)."""
    from ..core.answers import final_answer
    from ..evals.suite import answer_kind, answer_options
    from ..store import Store

    wanted = {item.id: item.question for item in suite.items}
    kinds = {item.id: answer_kind(item) for item in suite.items}
    options = {item.id: answer_options(item) for item in suite.items}
    store = Store.open()
    try:
        if config.sim is not None and config.sim.replay:
            from ..bench.replay import read_recorded

            recorded = read_recorded(store, config.sim.replay)
            bench_ids = [recorded.bench_id]
            rows = [(a.model, a.item_id, a.correct, a.cost_usd, a.latency_s, a.answer) for a in recorded.answers]
        else:
            from .graded import grade_pool

            benches = grade_pool(config, suite, progress=progress, unsafe_code=unsafe_code, answer_cache=answer_cache)
            bench_ids = [b.bench_id for b in benches]
            rows = [
                (r.system.removeprefix("direct:"), r.item_id, r.correct, r.cost_usd, r.latency_s, r.answer)
                for bench_id in bench_ids
                for r in store.bench_items(bench_id)
                if r.system.startswith("direct:") and r.status == "graded"
            ]
    finally:
        store.close()
    by_model: dict[str, dict[str, tuple[float, float, float, str | None]]] = {}
    for model, item_id, correct, cost, latency, text in rows:
        if item_id in wanted:
            final = final_answer(text or "", kinds[item_id], options[item_id])
            by_model.setdefault(canonical(model), {})[item_id] = (float(correct), cost, latency, final)
    items = [(item_id, q) for item_id, q in wanted.items() if any(item_id in graded for graded in by_model.values())]
    models = [m for m, graded in by_model.items() if all(item_id in graded for item_id, _ in items)]
    if not items or len(models) < 2:
        raise TrainError(
            f"{suite.name}: a router needs at least two models graded on the same items "
            f"({len(models)} graded on all {len(items)}): grade the pool first (stiva bench SUITE --systems 'direct:*')"
        )
    scores = {m: [by_model[m][item_id][0] for item_id, _ in items] for m in models}
    cost = {m: sum(by_model[m][i][1] for i, _ in items) / len(items) for m in models}
    latency = {m: sum(by_model[m][i][2] for i, _ in items) / len(items) for m in models}
    return Labels(
        items,
        models,
        scores,
        cost,
        latency,
        ", ".join(bench_ids),
        finals={m: [by_model[m][item_id][3] for item_id, _ in items] for m in models},
        costs={m: [by_model[m][item_id][1] for item_id, _ in items] for m in models},
        latencies={m: [by_model[m][item_id][2] for item_id, _ in items] for m in models},
        max_calls=config.conductor.max_steps,
    )


def train_router(
    labels: Labels,
    *,
    out: Path,
    features: str = "tfidf",
    seed: int = 0,
    epochs: int = 60,
    lr: float | None = None,
    l2: float | None = None,
    progress: Progress | None = None,
) -> dict:
    """Fit the head, save the router in `out`; the summary (what it learned, how long it took)."""
    import numpy as np

    if features not in (*FEATURES, AUTO):
        raise TrainError(f"--features {features!r}: use {', '.join((*FEATURES, AUTO))}")
    started = time.monotonic()
    questions = [q for _, q in labels.items]
    say = progress or (lambda _: None)
    chosen: dict | None = None
    fitted = None  # the workflow choice, where choosing the representation fitted it already
    if features == AUTO:
        features, chosen, represented, fitted = choose_representation(labels, questions, seed=seed, say=say)
        vectorizer, x = represented[features]
    else:
        vectorizer, x = _represent(features, questions, say)
    represent_s = time.monotonic() - started
    y = np.array([labels.scores[m] for m in labels.models], dtype=np.float32).T  # (n, m)
    if features == "tfidf":  # unit rows of sparse weights: scaling rare features up would only fit noise
        mean, scale = np.zeros(x.shape[1], np.float32), np.ones(x.shape[1], np.float32)
        lr, l2 = lr if lr is not None else 1e-2, l2 if l2 is not None else 1e-4
    else:
        mean, scale = x.mean(0), x.std(0) + 1e-6
        lr, l2 = lr if lr is not None else 3e-3, l2 if l2 is not None else 1e-2
    xs = (x - mean) / scale
    n, d = xs.shape
    order = list(range(n))
    rng = random.Random(seed)
    rng.shuffle(order)
    n_val = max(1, int(0.15 * n)) if n >= 20 else 0
    val, fit = np.array(order[:n_val], dtype=int), np.array(order[n_val:], dtype=int)
    np_rng = np.random.default_rng(seed)
    w = np_rng.normal(0, 0.01, (d, len(labels.models))).astype(np.float32)
    b = np.log(np.clip(y[fit].mean(0), 0.02, 0.98) / (1 - np.clip(y[fit].mean(0), 0.02, 0.98))).astype(np.float32)
    state = {"mw": np.zeros_like(w), "vw": np.zeros_like(w), "mb": np.zeros_like(b), "vb": np.zeros_like(b), "t": 0}
    best = (float("inf"), w.copy(), b.copy(), 0)
    history = []
    for epoch in range(1, epochs + 1):
        np_rng.shuffle(fit)
        for start in range(0, len(fit), 64):
            rows = fit[start : start + 64]
            p = _sigmoid(xs[rows] @ w + b)
            grad = (p - y[rows]) / len(rows)
            _adam(state, w, b, xs[rows].T @ grad + l2 * w, grad.sum(0), lr)
        loss = _loss(xs[val] @ w + b, y[val]) if n_val else _loss(xs[fit] @ w + b, y[fit])
        history.append(round(loss, 5))
        if loss < best[0]:
            best = (loss, w.copy(), b.copy(), epoch)
    _, w, b, best_epoch = best
    router = Router(
        folder=Path(out).expanduser(),
        models=list(labels.models),
        features=features,
        weights=w,
        bias=b,
        mean=mean.astype(np.float32),
        scale=scale.astype(np.float32),
        cost=labels.cost,
        latency=labels.latency,
        vectorizer=vectorizer.to_dict() if vectorizer is not None else None,
        info={
            "trained_on": labels.source,
            "items": n,
            "validation_items": n_val,
            "seed": seed,
            "epochs": epochs,
            "best_epoch": best_epoch,
            "train_accuracy": {m: round(sum(v) / len(v), 4) for m, v in labels.scores.items()},
            "parameters": int(w.size + b.size),
        },
    )
    workflows = None
    if labels.finals:
        from .workflow_router import fit_workflow_choice

        router.workflows, settings = fitted or fit_workflow_choice(labels, x, seed=seed, progress=say)
        router.info["workflow_settings"] = {
            "chosen_on": f"a validation draw of {settings['validation_items']} train items (seed {seed})",
            "grid": settings["grid"],
        }
        workflows = {
            "candidates": list(router.workflows.names),
            "k": router.workflows.k,
            "prior_weight": router.workflows.prior_weight,
            "validation_items": settings["validation_items"],
        }
    router.info["representation"] = chosen or {"chosen": features, "by": "--features"}
    router.save()
    p_all = _sigmoid(xs @ w + b)
    picked = p_all.argmax(1)
    return {
        "out": str(router.folder),
        "features": features,
        "models": labels.models,
        "items": n,
        "seed": seed,
        "best_epoch": best_epoch,
        "validation_loss": round(best[0], 5),
        "parameters": int(w.size + b.size),
        # the items' mean grade of the model the router picks at `best`, on the items it was trained on
        "train_accuracy_of_picks": round(float(y[np.arange(n), picked].mean()), 4),
        "represent_s": round(represent_s, 2),
        "train_s": round(time.monotonic() - started, 2),
        "trained_on": labels.source,
        "workflows": workflows,
        "representation": router.info["representation"],
    }


AUTO = "auto"


def _represent(features: str, questions: list[str], say: Progress):
    """(the fitted vectorizer or None, rows (n, d)) of `questions` in representation `features`."""
    vectorizer = None
    if features == "tfidf":
        from ..core.textvec import TextVectorizer

        vectorizer = TextVectorizer(dim=TFIDF_DIM).fit(questions)
    say(f"representing {len(questions)} questions ({features})")
    try:
        rows = featurize(
            features,
            questions,
            vectorizer=vectorizer,
            progress=lambda done, total: say(f"  {done}/{total} questions represented") if done % 200 < 8 else None,
        )
    except RouterError as exc:
        raise TrainError(str(exc)) from None
    return vectorizer, rows


def choose_representation(labels: Labels, questions: list[str], *, seed: int, say: Progress):
    """`--features auto`: every representation, each scored by the workflow choice's best mean
    validation utility (train/workflow_router.py) on the same validation draw; the best one wins,
    a tie to the first (tfidf, which decides in milliseconds). (its name, the record of the choice,
    {name: (vectorizer, rows)}, the chosen one's fitted workflow choice and settings)."""
    from .workflow_router import candidate_workflows, fit_workflow_choice

    if not labels.finals:
        raise TrainError("--features auto chooses by the workflows' validation utility, which needs final answers")
    candidates = candidate_workflows(labels, range(len(labels.items)))  # the same for every representation
    represented = {}
    fitted = {}
    scores: dict[str, float] = {}
    for kind in FEATURES_ORDER:
        represented[kind] = _represent(kind, questions, say)
        fitted[kind] = fit_workflow_choice(labels, represented[kind][1], seed=seed, candidates=candidates)
        scores[kind] = max((g["validation_utility"] for g in fitted[kind][1]["grid"]), default=float("-inf"))
        say(f"{kind}: best validation utility {scores[kind]:.4f}")
    best = max(FEATURES_ORDER, key=lambda k: (scores[k], -FEATURES_ORDER.index(k)))
    record = {
        "chosen": best,
        "by": "--features auto: the best mean validation utility of the workflow choice, over best, balanced and cheap",
        "validation_utility": {k: round(v, 5) for k, v in scores.items()},
    }
    return best, record, represented, fitted[best]


FEATURES_ORDER = ("tfidf", "embedded")  # auto tries them in this order; a tie goes to the first


def _sigmoid(z):
    import numpy as np

    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def _loss(z, y) -> float:
    import numpy as np

    p = np.clip(_sigmoid(z), 1e-6, 1 - 1e-6)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def _adam(state: dict, w, b, gw, gb, lr: float, beta1=0.9, beta2=0.999, eps=1e-8) -> None:
    state["t"] += 1
    t = state["t"]
    for param, grad, m, v in ((w, gw, "mw", "vw"), (b, gb, "mb", "vb")):
        state[m] = beta1 * state[m] + (1 - beta1) * grad
        state[v] = beta2 * state[v] + (1 - beta2) * grad * grad
        m_hat = state[m] / (1 - beta1**t)
        v_hat = state[v] / (1 - beta2**t)
        param -= lr * m_hat / (v_hat**0.5 + eps)
