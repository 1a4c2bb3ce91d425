"""The rollout of `stiva train`: G plans per question, each run for real on the pool, rewarded.

`Rollouts` is what TRL's `GRPOTrainer` calls as its `rollout_func(prompts, trainer)`:

1. the conductor's model as it is being trained (base + LoRA adapter) samples the G plans of a
   question in one batch, each under the same prompt and grammar as at inference
   (`HFConductor.sample_many_sync`);
2. each plan that parses runs on the pool through the engine (`Sessions.ask` with a
   `WorkflowMode`, source "train": a run recorded in the history like any other), concurrently;
3. the suite's grader scores the answer;
4. reward: 0 for a plan that does not parse, 0.5 for a valid plan with a wrong answer (or a run
   that failed), 1 for a correct answer (the paper's), minus `cost_weight` x the run's cost
   normalised within its question's group: cost / (the dearest plan of the G plans for that
   question), so each cost term is in [0, 1] and only relative cost matters, as GRPO's
   group-relative advantages do;
5. with `preferences` (`stiva train --prefer-levels best,cheap,...`), each question's G plans are
   sampled under one preference drawn for that question, which its prompt states; the reward is
   then the preference's own (core/preference.py): the paper's, minus its cost weight x the
   relative cost, minus its latency weight x the run's time relative to the group's slowest. So
   one adapter learns every level.

Runs of identical (question, plan) pairs are cached in `DIR/rollouts.jsonl`, so repeats cost
nothing (and a resumed training run reuses them). Below that, every call to a pool model goes
through the answer cache (pool/answer_cache.py; off with `--no-answer-cache`): a step sent the same
prompt as any earlier call, in this training or another, or a bench with `--answer-cache`, gets
that answer again without paying for it, and identical calls at once are paid once. Its reward
is as if paid (the recorded tokens and cost). Each provider takes at most `--rollout-concurrency`
calls at once (the bench's limiter, bench/limiter.py: a 429 halves that window), so one step
cannot burst hundreds of calls. What the calls that reached a provider cost is kept in
`DIR/spend.json` after each run, so that a resumed training's budget counts what was spent
before it; reused answers are not spent.

The engine is async and the trainer is not: the runtime lives on an event loop in a thread of
its own (`EngineLoop`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bench.limiter import ItemClock, LimitedWorker, item_clock
from ..conductor.base import PlanRequest, WorkerInfo
from ..core.preference import REWARD_CORRECT, REWARD_INVALID, REWARD_VALID, Preference
from ..evals.graders import grade_async
from ..evals.suite import SuiteItem, question_text
from ..inference.checkpoints import LoadedModel
from ..pool.answer_cache import CachingWorker
from ..runtime.modes import WorkflowMode
from ..runtime.sessions import Ask

log = logging.getLogger(__name__)


class EngineLoop:
    """A Runtime on an event loop of its own thread, for synchronous callers (the trainer). Its
    worker is wrapped: at most `concurrency` calls at once per provider, then the answer cache
    (`answer_cache`; None caches nothing). `caching` counts what was paid and what was reused."""

    def __init__(
        self,
        config,
        *,
        discover: bool | None = None,
        answer_cache=None,
        concurrency: int = 8,
        replay_latency: bool = False,
    ):
        from ..runtime import Runtime

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="stiva-train-engine", daemon=True)
        self.thread.start()
        try:
            self.runtime = self.call(Runtime.create(config, discover=discover))
        except BaseException:
            self._stop()
            raise
        self.limited = LimitedWorker(self.runtime.worker, concurrency)
        self.caching = CachingWorker(self.limited, answer_cache, replay_latency=replay_latency)
        self.runtime.worker = self.caching

    def call(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        try:
            self.call(self.runtime.aclose(), timeout=60)
        finally:
            self._stop()
            if self.caching.cache is not None:
                self.caching.cache.close()

    def _stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class RolloutResult:
    """What one plan's run came to (cached by question and plan)."""

    valid: bool
    correct: bool = False
    steps: int = 0
    models: list[str] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    answer: str = ""
    error: str | None = None
    run_id: str | None = None
    cached: bool = False
    latency_s: float = 0.0


@dataclass
class StepStats:
    """The rollouts of one training step (what train_log.jsonl gets besides TRL's figures)."""

    plans: int = 0
    valid: int = 0
    steps: int = 0
    tokens: int = 0  # pool tokens of the runs this step paid for (cached runs cost nothing)
    cost_usd: float = 0.0
    rewards: list[float] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)  # a few plans, for the live view
    picks: dict[str, int] = field(default_factory=dict)  # steps per pool model
    reused: int = 0  # worker answers the answer cache gave back (not paid again)
    generate_s: float = 0.0
    rollout_s: float = 0.0


class Rollouts:
    """`rollout_func` for TRL's GRPOTrainer (see the module's docstring)."""

    def __init__(
        self,
        engine: EngineLoop,
        conductor,
        items: Sequence[SuiteItem],
        tokenizer: Any,
        *,
        cache_path: Path,
        cost_weight: float = 0.0,
        temperature: float = 1.0,
        max_steps: int | None = None,
        shuffle_pool: bool = False,
        seed: int = 0,
        decisions_only: bool = False,
        sandbox=None,
        spend_path: Path | None = None,
        preferences: Sequence[Preference] = (),
    ):
        self.engine = engine
        self.conductor = conductor
        self.items = {item.id: item for item in items}
        self.tokenizer = tokenizer
        self.cost_weight = cost_weight
        self.temperature = temperature
        runtime = engine.runtime
        self.models = list(runtime.models)
        self.workers = [
            WorkerInfo(m.id, m.description, m.kind, m.price_in, m.price_out, m.latency_s) for m in self.models
        ]
        self.preferences = tuple(preferences)
        # Each plan sampled under its own order of the pool: a model that always writes "0" then
        # tries every model, so GRPO's groups differ in who answers, and what is learnt is to pick
        # a model by its name and description, not by its place in the list.
        self.shuffle_pool = shuffle_pool
        self.decisions_only = decisions_only  # the loss on the tokens the plan chose only (env_mask)
        self._rng = random.Random(seed)
        self.max_steps = max_steps or runtime.config.conductor.max_steps
        self.cache_path = cache_path
        self.sandbox = sandbox  # SandboxSettings for code items (None: the defaults)
        self.cache: dict[str, RolloutResult] = _read_cache(cache_path)
        self.spend_path = spend_path  # spend.json: the spend so far, carried across resumes
        self.spent_usd = read_spend(spend_path) if spend_path is not None else 0.0
        self._spent_before = self.spent_usd  # what earlier invocations spent; this one's is counted by the worker
        self.current = StepStats()
        self._lock = threading.Lock()

    def take_stats(self) -> StepStats:
        """This step's statistics, and a fresh record for the next step."""
        with self._lock:
            stats, self.current = self.current, StepStats()
        return stats

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        model = trainer.model
        was_training = model.training
        model.eval()
        loaded = LoadedModel(
            model=model,
            tokenizer=self.tokenizer,
            spec=self.conductor.spec,
            device="cuda" if str(next(model.parameters()).device).startswith("cuda") else "cpu",
            quantization=None,
            load_s=0.0,
            memory_bytes=0,
        )
        started = time.monotonic()
        sampled = []
        # TRL repeats each question G times in a row: each run of one question is one batch
        drawn: list[Preference | None] = []  # the preference of each sampled plan (one per question's group)
        shuffled: list[tuple[SuiteItem, PlanRequest, list]] = []  # with shuffle_pool: (item, request, pool order)
        for item_id, count in _runs(_item_id(p) for p in prompts):
            item = self.items[item_id]
            preference = self._rng.choice(self.preferences) if self.preferences else None
            drawn += [preference] * count
            if not self.shuffle_pool:
                request = PlanRequest(
                    question_text(item), self.workers, max_steps=self.max_steps, preference=preference
                )
                for plan in self.conductor.sample_many_sync(request, loaded, count, self.temperature):
                    sampled.append((item, plan, self.models))
                continue
            for _ in range(count):  # its own order each: its own prompt per plan
                order = self._rng.sample(range(len(self.models)), len(self.models))
                models = [self.models[i] for i in order]
                request = PlanRequest(
                    question_text(item),
                    [self.workers[i] for i in order],
                    max_steps=self.max_steps,
                    preference=preference,
                )
                shuffled.append((item, request, models))
        if shuffled:
            # the step's plans (each its own prompt) in one left-padded batched generation, where the
            # conductor can (HFConductor.sample_each_sync)
            each = getattr(self.conductor, "sample_each_sync", None)
            if each is not None:
                plans = each([request for _, request, _ in shuffled], loaded, self.temperature)
            else:  # one generation per plan
                plans = [
                    self.conductor.sample_many_sync(request, loaded, 1, self.temperature)[0]
                    for _, request, _ in shuffled
                ]
            sampled += [(item, plan, models) for (item, _, models), plan in zip(shuffled, plans)]
        if was_training:
            model.train()
        generated = time.monotonic()
        caching = self.engine.caching
        paid_usd, paid_tokens, reused = caching.paid_usd, caching.paid_tokens, caching.hits
        results = self.engine.call(self._run_all(sampled))
        rewards = self._rewards(sampled, results, drawn)
        stats = self.current
        stats.generate_s += generated - started
        stats.rollout_s += time.monotonic() - generated
        stats.tokens += caching.paid_tokens - paid_tokens  # what this step's calls paid for
        stats.cost_usd += caching.paid_usd - paid_usd
        stats.reused += caching.hits - reused
        for (item, plan, _), result, reward in zip(sampled, results, rewards):
            stats.plans += 1
            stats.valid += int(result.valid)
            stats.steps += result.steps
            stats.rewards.append(reward)
            for model_id in result.models:
                stats.picks[model_id] = stats.picks.get(model_id, 0) + 1
            if len(stats.samples) < 6:
                mark = "✓" if result.correct else ("·" if result.valid else "✗")
                stats.samples.append(f"{mark} {item.id}: {' '.join(plan.text.split())[:160]}")
        return {
            "prompt_ids": [plan.prompt_ids for _, plan, _ in sampled],
            "completion_ids": [plan.completion_ids for _, plan, _ in sampled],
            "logprobs": [plan.logprobs for _, plan, _ in sampled],
            "stiva_reward": rewards,
            "stiva_valid": [r.valid for r in results],
            "stiva_correct": [r.correct for r in results],
            # TRL's env_mask: only the tokens the plan chose count in the loss. A token the grammar
            # forced (its masked probability is 1) is no decision; without this its raw
            # log-probability would still get the advantage's push (see trainer's docstring).
            "env_mask": [
                decision_mask(plan.logprobs) if self.decisions_only else [1] * len(plan.logprobs)
                for _, plan, _ in sampled
            ],
        }

    async def _run_all(self, sampled) -> list[RolloutResult]:
        return list(await asyncio.gather(*(self._run_one(item, plan, models) for item, plan, models in sampled)))

    async def _run_one(self, item: SuiteItem, plan, pool: Sequence[Any] | None = None) -> RolloutResult:
        """Run `plan` with its model indices into `pool` (default: the pool in its own order)."""
        pool = self.models if pool is None else pool
        if plan.workflow is None:
            return RolloutResult(valid=False)
        key = _cache_key(item.id, plan.workflow, pool)
        cached = self.cache.get(key)
        if cached is not None:
            return RolloutResult(**{**cached.__dict__, "cached": True})
        runtime = self.engine.runtime
        mode = WorkflowMode(plan.workflow, tuple(m.id for m in pool))
        steps = len(plan.workflow.steps)
        models = [pool[s.model].id for s in plan.workflow.steps]

        clock = ItemClock()  # the time this run's calls queued for the provider cap: not the plan's latency
        try:
            with item_clock(clock):
                outcome = await runtime.sessions.ask(
                    Ask(question_text(item), mode=mode, source="train", in_conversation=False)
                )
        except Exception as exc:  # noqa: BLE001 - e.g. a model gone from the pool: the plan's run failed
            self._paid()  # what its calls cost before it failed
            return RolloutResult(valid=True, steps=steps, models=models, error=f"{type(exc).__name__}: {exc}")
        result = outcome.result
        totals = result.totals
        correct = False
        grader_error = None
        if result.status == "finished":
            try:
                correct = (await grade_async(item, result.answer, sandbox=self.sandbox)).correct
            except Exception as exc:  # noqa: BLE001 - a grader that broke scores nothing; training goes on
                log.warning("grading %s failed: %s: %s", item.id, type(exc).__name__, exc)
                grader_error = f"grader: {type(exc).__name__}: {exc}"
        rollout = RolloutResult(
            valid=True,
            correct=correct,
            steps=steps,
            models=models,
            tokens=totals.prompt_tokens + totals.completion_tokens,
            cost_usd=totals.cost_usd,
            answer=result.answer,
            error=result.error or grader_error,
            run_id=result.run_id,
            latency_s=max(0.0, totals.latency_s - clock.queued_s),
        )
        self._paid()
        if (
            result.status == "finished" and grader_error is None
        ):  # a failed run (a provider fault) is not cached: it may work next time
            self.cache[key] = rollout
            _append_cache(self.cache_path, key, rollout)
        return rollout

    def _paid(self) -> None:
        """After a run: the spend is what every call that reached a provider cost (reused
        answers are not paid again), on top of what earlier invocations of this training spent."""
        spent = self._spent_before + self.engine.caching.paid_usd
        if spent != self.spent_usd:
            self.spent_usd = spent
            if self.spend_path is not None:
                _write_spend(self.spend_path, self.spent_usd)

    def _rewards(self, sampled, results: list[RolloutResult], drawn: Sequence[Preference | None] = ()) -> list[float]:
        base = [REWARD_CORRECT if r.correct else (REWARD_VALID if r.valid else REWARD_INVALID) for r in results]
        if not self.cost_weight and not any(drawn):
            return base
        dearest: dict[str, float] = {}
        slowest: dict[str, float] = {}
        for (item, _, _), result in zip(sampled, results):
            dearest[item.id] = max(dearest.get(item.id, 0.0), result.cost_usd)
            slowest[item.id] = max(slowest.get(item.id, 0.0), result.latency_s)
        rewards = []
        for n, (reward, (item, _, _), result) in enumerate(zip(base, sampled, results)):
            cost = result.cost_usd / dearest[item.id] if dearest[item.id] > 0 else 0.0
            latency = result.latency_s / slowest[item.id] if slowest[item.id] > 0 else 0.0
            preference = drawn[n] if n < len(drawn) else None
            rewards.append(
                preference.reward(reward, cost, latency) if preference is not None else reward - self.cost_weight * cost
            )
        return rewards


def decision_mask(logprobs: Sequence[float]) -> list[int]:
    """1 for each sampled token that had an alternative under the grammar, 0 for a forced one."""
    return [0 if lp > -1e-6 else 1 for lp in logprobs]


def reward_from_rollout(prompts, completions, **kwargs) -> list[float]:
    """TRL's reward function: the rollout computed the reward with the run (extra field)."""
    return list(kwargs["stiva_reward"])


def _item_id(prompt: Any) -> str:
    """The dataset's prompt is the item id (the rollout builds the real prompt itself)."""
    if isinstance(prompt, list):  # conversational form, should a caller use it
        prompt = prompt[-1]["content"]
    return str(prompt)


def _runs(ids) -> list[tuple[str, int]]:
    """[(id, how many times in a row)] in order."""
    runs: list[tuple[str, int]] = []
    for item_id in ids:
        if runs and runs[-1][0] == item_id:
            runs[-1] = (item_id, runs[-1][1] + 1)
        else:
            runs.append((item_id, 1))
    return runs


def _cache_key(item_id: str, workflow, models) -> str:
    names = [models[s.model].id for s in workflow.steps]
    return json.dumps([item_id, workflow.to_text(), names])


def _read_cache(path: Path) -> dict[str, RolloutResult]:
    cache: dict[str, RolloutResult] = {}
    if not path.exists():
        return cache
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            cache[row["key"]] = RolloutResult(**row["result"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash: that run is simply run again
    return cache


def read_spend(path: Path) -> float:
    """What the rollouts of this training have cost so far (spend.json; 0 when there is none)."""
    try:
        return float(json.loads(path.read_text(encoding="utf-8"))["spent_usd"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def _write_spend(path: Path, spent_usd: float) -> None:
    """spend.json, written new and renamed into place: a kill leaves the old figure or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.new")
    scratch.write_text(json.dumps({"spent_usd": round(spent_usd, 10)}) + "\n", encoding="utf-8")
    os.replace(scratch, path)


def _append_cache(path: Path, key: str, result: RolloutResult) -> None:
    row = {"key": key, "result": {k: v for k, v in result.__dict__.items() if k != "cached"}}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
