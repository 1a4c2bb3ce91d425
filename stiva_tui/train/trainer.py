"""`stiva train`: GRPO with LoRA (QLoRA on CUDA) through TRL's `GRPOTrainer`, rollouts by Stiva.

    summary = train(config, suite, TrainOptions(base="embedded", out=Path("adapter"), steps=50))

TRL does the optimisation (GRPO loss, group-relative advantages, checkpoints, resume); PEFT
holds the LoRA adapter. Stiva supplies the `rollout_func` (rollout.py: grammar-constrained plans,
real runs on the pool, graded) and a reward function that reads the reward the rollout computed.

Log-probabilities: plans are sampled from the grammar-masked distribution, and the rollout
returns the log-probabilities under it. Without vLLM, TRL's loss recomputes the log-probabilities
with a forward pass over the *unmasked* vocabulary, so the policy gradient is that of log pi(token)
rather than log pi_masked(token) = log pi(token) - log Z_allowed. On-policy (one update per
generation, the default here) the importance ratio is 1 either way. Tokens the grammar forces
(one allowed choice, masked probability 1) are no decision at all: with `--prompt compact` the
rollout's `env_mask` leaves them out of the loss, so they neither dilute the decisions' gradient
nor get a push of their own (with the full prompt that slowed learning: not measured enough yet).
For the other tokens the difference is the gradient of log Z_allowed, documented here rather than
patched into TRL's loss.

Outputs in `out`: the adapter (`adapter_config.json`, `adapter_model.safetensors`),
`stiva_adapter.json` (which base it was trained on: loading it onto another base is refused),
`train_log.jsonl` (one line per step), `rollouts.jsonl` (the run cache), `spend.json` (what the
rollouts have cost, across resumes), `checkpoints/`. What GRPO shares with DPO (dpo.py) is in
common.py: the output folder and its log, the callback, the clean stop, the model's loading.

Resuming (after ctrl+c or a kill -9): training goes on from the last checkpoint, so the steps
logged after it are done again; the log is cut back to the checkpoint's step first, so each step
is logged once. The spend is not cut back: what the rollouts cost is paid, checkpoint or not, so
`--budget-usd` counts every invocation's spend since the training started.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..evals.suite import Suite
from ..inference.adapter_manifest import AdapterManifest
from .common import (
    TrainError,
    TrainingRun,
    check_lora,
    conductor_for,
    gathered,
    load_for_training,
    lora_config,
    prefer_levels,
    process_rank,
    quiet_warnings,
    summed,
    training_device,
)
from .rollout import EngineLoop, Rollouts, StepStats, read_spend, reward_from_rollout


@dataclass
class TrainOptions:
    base: str  # "embedded", an HF id or a folder
    out: Path
    steps: int = 50
    group: int = 4  # G plans per question
    batch: int = 2  # questions per step
    lr: float = 5e-5
    cost_weight: float = 0.0
    budget_usd: float | None = None
    resume: bool = False
    seed: int = 0
    lora_r: int = 16
    lora_alpha: int | None = None  # None: 2 x lora_r
    # "attention": q, k, v and o projections; "all": every linear layer (rank-1 LoRA on all of them
    # with a higher learning rate is reported to match full fine-tuning for policy-gradient RL)
    lora_targets: str = "attention"
    # The conductor's prompt while training (and for the adapter after): None keeps the
    # conductor's own; "compact" is ~60 tokens instead of ~1,300 (see prompt.compact_conductor_prompt)
    prompt_style: str | None = None
    # Each plan sampled under its own order of the pool (see Rollouts): exploration for a
    # conductor that always names the first model, and routing by name rather than by place
    shuffle_pool: bool = False
    temperature: float = 1.0
    save_every: int = 10
    max_steps_per_plan: int | None = None  # the plan's step limit (default: [conductor] max_steps)
    max_subtask_chars: int | None = None
    unsafe_code: bool = False  # grade code items WITHOUT isolation where no sandbox can be had
    # Preferences drawn per question, stated in its prompt and weighing its reward (core/preference.py):
    # one adapter for every level. Empty: no preference in the prompt, the reward's cost_weight only.
    preferences: tuple[str, ...] = ()
    device: str | None = None  # None: CUDA when there is one, else the CPU
    # Worker answers already paid for are reused (pool/answer_cache.py; --no-answer-cache)
    answer_cache: bool = True
    rollout_concurrency: int = 8  # calls at once per provider (--rollout-concurrency)


@dataclass
class StepReport:
    """One line of train_log.jsonl, and what the live view shows."""

    step: int
    reward_mean: float
    reward_std: float
    loss: float
    valid_plan_rate: float
    mean_plan_steps: float
    tokens: int
    cost_usd: float
    samples: list[str] = field(default_factory=list)
    picks: dict[str, int] = field(default_factory=dict)
    spent_usd: float = 0.0
    generate_s: float = 0.0
    rollout_s: float = 0.0
    update_s: float = 0.0
    reused: int = 0  # worker answers the answer cache gave back this step (not paid again)

    def log_line(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "reward_mean": self.reward_mean,
            "reward_std": self.reward_std,
            "loss": self.loss,
            "valid_plan_rate": self.valid_plan_rate,
            "mean_plan_steps": self.mean_plan_steps,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            # where the step's time went (benchmarks/perf/train_step.py reads them)
            "generate_s": self.generate_s,
            "rollout_s": self.rollout_s,
            "update_s": self.update_s,
            "answers_reused": self.reused,
        }


@dataclass
class TrainSummary:
    steps: int
    reward_first: float | None
    reward_last: float | None
    adapter: str
    cost_usd: float
    stopped: str | None = None
    answers_reused: int = 0  # by this invocation, from the answer cache
    saved_usd: float = 0.0  # what those would have cost

    def as_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "reward_first": self.reward_first,
            "reward_last": self.reward_last,
            "adapter": self.adapter,
            "cost_usd": self.cost_usd,
            "answers_reused": self.answers_reused,
            "saved_usd": self.saved_usd,
        }


def _conductor_for(base: str, config, options: TrainOptions, device: str):
    """The conductor whose prompt and grammar the plans are sampled under."""
    return conductor_for(
        base,
        config,
        device,
        temperature=options.temperature,
        prompt_style=options.prompt_style,
        max_subtask_chars=options.max_subtask_chars,
        max_steps_per_plan=options.max_steps_per_plan,
    )


def train(
    config,
    suite: Suite,
    options: TrainOptions,
    *,
    on_step: Callable[[StepReport], None] | None = None,
    progress: Callable[[str], None] | None = None,
    should_stop: Callable[[], str | None] | None = None,
) -> TrainSummary:
    """Train a LoRA adapter for the conductor on `suite` with GRPO. Blocking; `on_step` gets each
    step's report, `progress` the set-up's stages; `should_stop` (checked after each step)
    returns a reason to stop cleanly (ctrl+c), keeping the adapter as it is."""
    with quiet_warnings():
        return _train(config, suite, options, on_step=on_step, progress=progress, should_stop=should_stop)


def _train(config, suite: Suite, options: TrainOptions, *, on_step, progress, should_stop) -> TrainSummary:
    say = progress or (lambda message: None)
    if options.rollout_concurrency < 1:
        raise TrainError("--rollout-concurrency must be at least 1")
    if options.steps < 1 or options.group < 2 or options.batch < 1:
        raise TrainError("--steps and --batch must be at least 1, and --group at least 2 (GRPO compares plans)")
    if options.prompt_style not in (None, "compact", "chat", "plain", "base"):
        raise TrainError(f"--prompt {options.prompt_style!r}: use compact, or leave it out for the conductor's own")
    check_lora(options.lora_targets, options.lora_r)
    preferences = prefer_levels(options.preferences)
    if preferences and options.cost_weight:
        raise TrainError("--prefer-levels replaces --cost-weight: each preference weighs cost itself")
    rank, world = process_rank()
    spend_path = _spend_path(Path(options.out).expanduser(), rank)  # each process keeps its own
    spent_before = sum(read_spend(p) for p in _spend_files(spend_path.parent)) if options.resume else 0.0
    if options.budget_usd is not None and spent_before >= options.budget_usd:  # before loading anything
        raise TrainError(
            f"--budget-usd: ${spent_before:.4f} already spent of ${options.budget_usd:.4f} by the "
            "earlier runs of this training; raise it to continue"
        )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    device = training_device(options.base, options.device)
    sandbox = config.sandbox.settings(unsafe=options.unsafe_code)
    code_items = sum(item.grader == "code" for item in suite.items)
    if code_items:
        from ..sandbox import SandboxUnavailable, find_isolation

        try:
            isolation = find_isolation(sandbox)
        except SandboxUnavailable as exc:
            raise TrainError(f"{code_items} code items refused: {exc}") from None
        say(f"code rewards run in: {isolation.describe(sandbox)}")
    run = TrainingRun.open(options.out, options.resume)
    out = run.out

    from datasets import Dataset
    from peft import get_peft_model
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer, label, folder = load_for_training(options.base, device, options.seed, say)
    peft_model = get_peft_model(model, lora_config(options.lora_r, options.lora_alpha, options.lora_targets))
    say("starting the engine for rollouts")
    from ..pool.answer_cache import AnswerCache

    engine = EngineLoop(
        config,
        answer_cache=AnswerCache.open() if options.answer_cache else None,
        concurrency=options.rollout_concurrency,
        # a reused answer takes its recorded time when the reward weighs latency
        replay_latency=any(p is not None and p.latency > 0 for p in preferences),
    )
    try:
        if not engine.runtime.models:
            raise TrainError(
                "the pool has no available model to run plans on: add a provider key or a [[models]] entry"
            )
        conductor = _conductor_for(options.base, config, options, device)
        if not options.resume:  # a new training: nothing spent yet
            for path in _spend_files(out):
                if path == spend_path or (rank == 0 and _spend_rank(path) >= world):
                    path.unlink(missing_ok=True)
        # resumed with fewer processes than before: what the ones gone spent still counts
        carried = sum(read_spend(p) for p in _spend_files(out) if _spend_rank(p) >= world)

        def spent_so_far() -> float:
            """What this training's rollouts have cost: every process's, every invocation's (a collective)."""
            return summed(rollouts.spent_usd) + carried

        rollouts = Rollouts(
            engine,
            conductor,
            suite.items,
            tokenizer,
            cache_path=out / "rollouts.jsonl",
            cost_weight=options.cost_weight,
            temperature=options.temperature,
            max_steps=options.max_steps_per_plan,
            sandbox=sandbox,
            spend_path=spend_path,
            shuffle_pool=options.shuffle_pool,
            # each process its own draws (preferences, pool orders), the main one the seed's own
            seed=options.seed if rank == 0 else options.seed * 1_000_003 + rank,
            preferences=preferences,
            # measured with the compact prompt (routing 0.36 -> 0.89); with the full
            # prompt it slowed the constant-pick test (0.42 < 0.6 after 40 steps)
            decisions_only=options.prompt_style == "compact",
        )
        dataset = Dataset.from_list([{"prompt": item.id} for item in suite.items])
        budget_tokens = 64 + (options.max_steps_per_plan or config.conductor.max_steps) * 160
        args = GRPOConfig(
            output_dir=str(run.checkpoints),
            per_device_train_batch_size=options.batch * options.group,
            num_generations=options.group,
            gradient_accumulation_steps=1,
            max_steps=options.steps,
            learning_rate=options.lr,
            beta=0.0,
            logging_steps=1,
            save_strategy="steps",
            save_steps=max(1, options.save_every),
            save_total_limit=2,
            report_to=[],
            use_cpu=device == "cpu",
            bf16=device == "cuda",
            max_completion_length=budget_tokens,
            temperature=options.temperature,
            seed=options.seed,
            remove_unused_columns=False,
            dataloader_num_workers=0,
            disable_tqdm=True,
            gradient_checkpointing=device == "cuda" and options.base != "embedded",
            ddp_find_unused_parameters=False,  # LoRA: every trainable weight takes part in each step
        )
        run.start_log(options.resume)

        def report_for(step: int, logs: dict, elapsed: float) -> StepReport:
            stats = _merged(gathered(rollouts.take_stats()))  # every process's rollouts of the step
            rewards = stats.rewards
            mean = sum(rewards) / len(rewards) if rewards else float(logs.get("reward", 0.0))
            std = (
                math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
                if rewards
                else float(logs.get("reward_std", 0.0))
            )
            return StepReport(
                step=step,
                reward_mean=round(mean, 6),
                reward_std=round(std, 6),
                loss=float(logs["loss"]),
                valid_plan_rate=round(stats.valid / stats.plans, 4) if stats.plans else 0.0,
                mean_plan_steps=round(stats.steps / stats.valid, 3) if stats.valid else 0.0,
                tokens=stats.tokens,
                cost_usd=round(stats.cost_usd, 8),
                samples=stats.samples,
                picks=stats.picks,
                spent_usd=round(spent_so_far(), 8),
                generate_s=round(stats.generate_s, 3),
                rollout_s=round(stats.rollout_s, 3),
                reused=stats.reused,
                update_s=round(max(0.0, elapsed - stats.generate_s - stats.rollout_s), 3),
            )

        def over_budget() -> str | None:
            spent = spent_so_far()  # called by every process, after each step
            if options.budget_usd is not None and spent >= options.budget_usd:
                return f"budget: ${spent:.4f} spent of ${options.budget_usd:.4f}"
            return None

        say("training")
        trainer = GRPOTrainer(
            model=peft_model,
            reward_funcs=[reward_from_rollout],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollouts,
            callbacks=[run.callback(report_for, on_step, should_stop, over_budget)],
        )
        steps = run.train(trainer)
        spent = spent_so_far()
        hits, saved = int(summed(engine.caching.hits)), summed(engine.caching.saved_usd)
        if rank != 0:  # the main process writes the output folder
            return TrainSummary(steps, None, None, str(out), round(spent, 8), run.stopped, hits, round(saved, 8))
        AdapterManifest.trained(
            options.base,
            label,
            folder,
            model.config,
            suite=suite.name,
            steps=steps,
            prompt_style=options.prompt_style,
            max_subtask_chars=conductor.max_subtask_chars if options.max_subtask_chars else None,
            max_steps_per_plan=options.max_steps_per_plan or None,
            preferences=tuple(str(p) for p in preferences),
        ).write(out)
        logged = run.logged()
        return TrainSummary(
            steps=steps,
            reward_first=logged[0]["reward_mean"] if logged else None,
            reward_last=logged[-1]["reward_mean"] if logged else None,
            adapter=str(out),
            cost_usd=round(spent, 8),  # every invocation's, the killed ones too, every process's
            stopped=run.stopped,
            answers_reused=hits,
            saved_usd=round(saved, 8),
        )
    finally:
        engine.close()


def _spend_path(out: Path, rank: int) -> Path:
    """Where a process keeps what its rollouts spent: spend.json (the main process, and a plain
    `stiva train`), spend.rankN.json (process N of a data-parallel training)."""
    return out / ("spend.json" if rank == 0 else f"spend.rank{rank}.json")


def _spend_files(out: Path) -> list[Path]:
    """Every process's spend file in `out`: the training's spend is their sum."""
    return [out / "spend.json", *sorted(out.glob("spend.rank*.json"))]


def _spend_rank(path: Path) -> int:
    digits = path.name.removeprefix("spend.rank").removesuffix(".json")
    return int(digits) if digits.isdigit() else 0


def _merged(parts: list[StepStats]) -> StepStats:
    """One step's rollouts over the processes (each rolled out its own questions, at the same time)."""
    if len(parts) == 1:
        return parts[0]
    merged = StepStats()
    for part in parts:
        merged.plans += part.plans
        merged.valid += part.valid
        merged.steps += part.steps
        merged.tokens += part.tokens
        merged.cost_usd += part.cost_usd
        merged.rewards += part.rewards
        merged.samples += part.samples[: max(0, 6 - len(merged.samples))]
        for model_id, n in part.picks.items():
            merged.picks[model_id] = merged.picks.get(model_id, 0) + n
        merged.reused += part.reused
        merged.generate_s = max(merged.generate_s, part.generate_s)  # side by side: the slowest's
        merged.rollout_s = max(merged.rollout_s, part.rollout_s)
    return merged
