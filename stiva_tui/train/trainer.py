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
rollouts have cost, across resumes), `checkpoints/`.

Resuming (after ctrl+c or a kill -9): training goes on from the last checkpoint, so the steps
logged after it are done again; the log is cut back to the checkpoint's step first, so each step
is logged once. The spend is not cut back: what the rollouts cost is paid, checkpoint or not, so
`--budget-usd` counts every invocation's spend since the training started.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..bench.suite import Suite
from ..core.preference import Preference, PreferenceError, parse_preference
from ..inference.checkpoints import ADAPTER_MARKER, base_fingerprint, base_identity
from ..inference.errors import ModelError
from .rollout import EngineLoop, Rollouts, StepStats, read_spend, reward_from_rollout

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
LORA_TARGET_SETS: dict[str, Any] = {"attention": LORA_TARGETS, "all": "all-linear"}


class TrainError(Exception):
    """Training cannot start as asked; the message says what to do."""


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
        return {"step": self.step, "reward_mean": self.reward_mean, "reward_std": self.reward_std,
                "loss": self.loss, "valid_plan_rate": self.valid_plan_rate, "mean_plan_steps": self.mean_plan_steps,
                "tokens": self.tokens, "cost_usd": self.cost_usd,
                # where the step's time went (benchmarks/train_step.py reads them)
                "generate_s": self.generate_s, "rollout_s": self.rollout_s, "update_s": self.update_s,
                "answers_reused": self.reused}


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
        return {"steps": self.steps, "reward_first": self.reward_first, "reward_last": self.reward_last,
                "adapter": self.adapter, "cost_usd": self.cost_usd, "answers_reused": self.answers_reused,
                "saved_usd": self.saved_usd}


def _conductor_for(base: str, config, options: TrainOptions, device: str):
    """The conductor whose prompt and grammar the plans are sampled under."""
    from ..conductor.embedded import EmbeddedConductor
    from ..conductor.local import LocalConductor

    chars = options.max_subtask_chars or config.conductor.max_subtask_chars
    style = {"prompt_style": options.prompt_style} if options.prompt_style else {}
    # under the step limit the adapter is trained for, as it will plan (not the untrained model's cap)
    steps = options.max_steps_per_plan
    if base == "embedded":
        return EmbeddedConductor(max_subtask_chars=min(chars, 100), temperature=options.temperature,
                                 plan_steps=steps, **style)
    return LocalConductor(base, device=device, max_reasoning_tokens=config.conductor.max_reasoning_tokens,
                          max_subtask_chars=chars, temperature=options.temperature, plan_steps=steps, **style)


def _load_for_training(base: str, device: str, progress: Callable[[str], None]):
    """(model, tokenizer, base label, folder or id): the embedded model in fp32 on the CPU, or a local model in
    4-bit nf4 on CUDA (QLoRA), or in fp32 on the CPU (small models, tests)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..inference.checkpoints import check_model_source, quiet_libraries

    quiet_libraries()
    if base == "embedded":
        from ..inference.embedded import EMBEDDED_HF_ID, ensure_embedded_checkpoint

        progress("preparing the embedded model")
        folder = str(ensure_embedded_checkpoint())
        label = EMBEDDED_HF_ID
    else:
        try:
            found = check_model_source(base)
        except ModelError as exc:
            raise TrainError(str(exc)) from None
        folder = str(found) if found is not None else base
        label = base
    progress(f"loading {label} for training on {device}")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if device == "cuda" and base != "embedded":
        from peft import prepare_model_for_kbit_training
        from transformers import BitsAndBytesConfig

        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                   bnb_4bit_compute_dtype=torch.bfloat16)
        model = AutoModelForCausalLM.from_pretrained(folder, quantization_config=quant, dtype=torch.bfloat16,
                                                     device_map={"": 0})
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    else:
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        if device == "cuda":
            model = model.to("cuda")
    return model, tokenizer, label, folder


def _score_valid_positions_only() -> bool:
    """TRL's fused LM head (trl.trainer.utils.add_fused_lm_head) projects every position of the
    batch through the 262k-wide head, forward and backward, on devices without Triton (the CPU):
    it would rather not recompile for each batch's count of valid positions on Neuron. The
    positions it then zeroes are the prompts, the padding and everything after a plan's end: on
    the CPU most of the batch. Here it scores only the valid positions, as it does on CUDA: the
    same log-probabilities, a fraction of the work (the head's kernel still runs in plain torch).
    STIVA_TRAIN_ALL_POSITIONS=1 leaves TRL as it is (benchmarks/train_step.py). True when patched."""
    if os.environ.get("STIVA_TRAIN_ALL_POSITIONS", "") in ("1", "true", "yes"):
        return False
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:
        return False
    original = getattr(trl_utils, "_use_triton", None)
    if original is None or getattr(original, "_stiva", False):
        return original is not None
    # in trl.trainer.utils this name decides only that (the kernel's own module keeps its own)

    def compact_everywhere(device) -> bool:
        return True

    compact_everywhere._stiva = True  # type: ignore[attr-defined]
    compact_everywhere._original = original  # type: ignore[attr-defined]
    trl_utils._use_triton = compact_everywhere
    return True


def train(config, suite: Suite, options: TrainOptions, *, on_step: Callable[[StepReport], None] | None = None,
          progress: Callable[[str], None] | None = None,
          should_stop: Callable[[], str | None] | None = None) -> TrainSummary:
    """Train a LoRA adapter for the conductor on `suite` with GRPO. Blocking; `on_step` gets each
    step's report, `progress` the set-up's stages; `should_stop` (checked after each step)
    returns a reason to stop cleanly (ctrl+c), keeping the adapter as it is."""
    with warnings.catch_warnings():
        # transformers 5 renamed gradient checkpointing; TRL and PEFT still use the old names, and
        # a user can do nothing about it
        warnings.filterwarnings("ignore", category=FutureWarning)
        return _train(config, suite, options, on_step=on_step, progress=progress, should_stop=should_stop)


def prefer_levels(texts: Sequence[str]) -> tuple[Preference, ...]:
    """`--prefer-levels`, parsed (GRPO's rollouts and the graded pairs of DPO): TrainError naming a
    bad one, or "none", which states no preference to train under."""
    try:
        levels = tuple(parse_preference(text) for text in texts)
    except PreferenceError as exc:
        raise TrainError(f"--prefer-levels: {exc}") from None
    if any(level is None for level in levels):
        raise TrainError("--prefer-levels takes levels or numbers (best, balanced, cheap, fast or 0..1), not none")
    return levels  # type: ignore[return-value]


def _train(config, suite: Suite, options: TrainOptions, *, on_step, progress, should_stop) -> TrainSummary:
    say = progress or (lambda message: None)
    if options.rollout_concurrency < 1:
        raise TrainError("--rollout-concurrency must be at least 1")
    if options.steps < 1 or options.group < 2 or options.batch < 1:
        raise TrainError("--steps and --batch must be at least 1, and --group at least 2 (GRPO compares plans)")
    if options.prompt_style not in (None, "compact", "chat", "plain", "base"):
        raise TrainError(f"--prompt {options.prompt_style!r}: use compact, or leave it out for the conductor's own")
    if options.lora_targets not in LORA_TARGET_SETS or options.lora_r < 1:
        raise TrainError(f"--lora-targets must be {' or '.join(LORA_TARGET_SETS)}, and --lora-r at least 1")
    preferences = prefer_levels(options.preferences)
    if preferences and options.cost_weight:
        raise TrainError("--prefer-levels replaces --cost-weight: each preference weighs cost itself")
    spend_path = Path(options.out).expanduser() / "spend.json"
    spent_before = read_spend(spend_path) if options.resume else 0.0
    if options.budget_usd is not None and spent_before >= options.budget_usd:  # before loading anything
        raise TrainError(f"--budget-usd: ${spent_before:.4f} already spent of ${options.budget_usd:.4f} by the "
                         "earlier runs of this training; raise it to continue")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    from ..inference.checkpoints import quiet_libraries

    quiet_libraries()  # before torch, peft or trl import bitsandbytes
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" and options.base not in ("embedded",) and not Path(options.base).expanduser().is_dir():
        raise TrainError(f"training {options.base} needs a CUDA GPU (QLoRA); on the CPU use --base embedded "
                         "or a small model folder")
    sandbox = config.sandbox.settings(unsafe=options.unsafe_code)
    code_items = sum(item.grader == "code" for item in suite.items)
    if code_items:
        from ..sandbox import SandboxUnavailable, find_isolation

        try:
            isolation = find_isolation(sandbox)
        except SandboxUnavailable as exc:
            raise TrainError(f"{code_items} code items refused: {exc}") from None
        say(f"code rewards run in: {isolation.describe(sandbox)}")
    out, checkpoints, resume_from = output_folder(options.out, options.resume)

    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import TrainerCallback, set_seed
    from trl import GRPOConfig, GRPOTrainer

    _score_valid_positions_only()
    set_seed(options.seed)
    model, tokenizer, label, folder = _load_for_training(options.base, device, say)
    peft_model = get_peft_model(model, LoraConfig(
        r=options.lora_r, lora_alpha=options.lora_alpha or 2 * options.lora_r, lora_dropout=0.0,
        target_modules=LORA_TARGET_SETS[options.lora_targets], task_type="CAUSAL_LM"))
    say("starting the engine for rollouts")
    from ..pool.answer_cache import AnswerCache

    engine = EngineLoop(config, answer_cache=AnswerCache.open() if options.answer_cache else None,
                        concurrency=options.rollout_concurrency,
                        # a reused answer takes its recorded time when the reward weighs latency
                        replay_latency=any(p is not None and p.latency > 0 for p in preferences))
    try:
        if not engine.runtime.models:
            raise TrainError("the pool has no available model to run plans on: add a provider key or a [[models]] entry")
        conductor = _conductor_for(options.base, config, options, device)
        if not options.resume and spend_path.exists():
            spend_path.unlink()  # a new training: nothing spent yet
        rollouts = Rollouts(engine, conductor, suite.items, tokenizer, cache_path=out / "rollouts.jsonl",
                            cost_weight=options.cost_weight, temperature=options.temperature,
                            max_steps=options.max_steps_per_plan, sandbox=sandbox, spend_path=spend_path,
                            shuffle_pool=options.shuffle_pool, seed=options.seed, preferences=preferences,
                            # measured with the compact prompt (routing 0.36 -> 0.89); with the full
                            # prompt it slowed the constant-pick test (0.42 < 0.6 after 40 steps)
                            decisions_only=options.prompt_style == "compact")
        dataset = Dataset.from_list([{"prompt": item.id} for item in suite.items])
        budget_tokens = 64 + (options.max_steps_per_plan or config.conductor.max_steps) * 160
        args = GRPOConfig(
            output_dir=str(checkpoints), per_device_train_batch_size=options.batch * options.group,
            num_generations=options.group, gradient_accumulation_steps=1, max_steps=options.steps,
            learning_rate=options.lr, beta=0.0, logging_steps=1, save_strategy="steps",
            save_steps=max(1, options.save_every), save_total_limit=2, report_to=[], use_cpu=device == "cpu",
            bf16=device == "cuda", max_completion_length=budget_tokens, temperature=options.temperature,
            seed=options.seed, remove_unused_columns=False, dataloader_num_workers=0, disable_tqdm=True,
            gradient_checkpointing=device == "cuda" and options.base != "embedded",
        )
        log_path = out / "train_log.jsonl"
        if not options.resume and log_path.exists():
            log_path.unlink()
        elif resume_from is not None:  # the steps after the checkpoint are done (and logged) again
            _cut_log(log_path, _checkpoint_step(Path(resume_from)))
        reports: list[StepReport] = []
        state: dict[str, Any] = {"stopped": None, "step_started": time.monotonic()}

        class StivaCallback(TrainerCallback):
            """train_log.jsonl, the live view, and the budget's clean stop."""

            def on_step_begin(self, args, train_state, control, **kwargs):
                state["step_started"] = time.monotonic()

            def on_log(self, args, train_state, control, logs=None, **kwargs):
                logs = logs or {}
                if "loss" not in logs:
                    return
                stats: StepStats = rollouts.take_stats()
                rewards = stats.rewards
                mean = sum(rewards) / len(rewards) if rewards else float(logs.get("reward", 0.0))
                std = (math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards)) if rewards
                       else float(logs.get("reward_std", 0.0)))
                elapsed = time.monotonic() - state["step_started"]
                report = StepReport(
                    step=int(train_state.global_step), reward_mean=round(mean, 6), reward_std=round(std, 6),
                    loss=float(logs["loss"]), valid_plan_rate=round(stats.valid / stats.plans, 4) if stats.plans else 0.0,
                    mean_plan_steps=round(stats.steps / stats.valid, 3) if stats.valid else 0.0,
                    tokens=stats.tokens, cost_usd=round(stats.cost_usd, 8), samples=stats.samples, picks=stats.picks,
                    spent_usd=round(rollouts.spent_usd, 8), generate_s=round(stats.generate_s, 3),
                    rollout_s=round(stats.rollout_s, 3), reused=stats.reused,
                    update_s=round(max(0.0, elapsed - stats.generate_s - stats.rollout_s), 3))
                reports.append(report)
                with log_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(report.log_line()) + "\n")
                if on_step is not None:
                    on_step(report)

            def on_step_end(self, args, train_state, control, **kwargs):
                reason = should_stop() if should_stop is not None else None
                if options.budget_usd is not None and rollouts.spent_usd >= options.budget_usd:
                    reason = f"budget: ${rollouts.spent_usd:.4f} spent of ${options.budget_usd:.4f}"
                if reason:
                    state["stopped"] = reason
                    control.should_training_stop = True
                    control.should_save = True

        say("training")
        trainer = GRPOTrainer(model=peft_model, reward_funcs=[reward_from_rollout], args=args,
                              train_dataset=dataset, processing_class=tokenizer, rollout_func=rollouts,
                              callbacks=[StivaCallback()])
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        for noisy in (PrinterCallback, ProgressCallback):  # stdout is the command's (--json)
            trainer.remove_callback(noisy)
        trainer.train(resume_from_checkpoint=resume_from)
        trainer.model.save_pretrained(str(out))
        (out / ADAPTER_MARKER).write_text(json.dumps({
            "base": options.base, "label": label, "identity": base_identity(folder),
            "fingerprint": base_fingerprint(model.config),
            "suite": suite.name, "steps": int(trainer.state.global_step),
            **({"prompt_style": options.prompt_style} if options.prompt_style else {}),
            **({"max_subtask_chars": conductor.max_subtask_chars} if options.max_subtask_chars else {}),
            **({"max_steps_per_plan": options.max_steps_per_plan} if options.max_steps_per_plan else {}),
            **({"preferences": [str(p) for p in preferences]} if preferences else {}),
        }, indent=2) + "\n")
        logged = _read_log(log_path)
        return TrainSummary(
            steps=int(trainer.state.global_step),
            reward_first=logged[0]["reward_mean"] if logged else None,
            reward_last=logged[-1]["reward_mean"] if logged else None,
            adapter=str(out), cost_usd=round(rollouts.spent_usd, 8),  # every invocation's, the killed ones too
            stopped=state["stopped"], answers_reused=engine.caching.hits,
            saved_usd=round(engine.caching.saved_usd, 8),
        )
    finally:
        engine.close()


def output_folder(out_arg, resume: bool) -> tuple[Path, Path, str | None]:
    """(the output folder, made; its checkpoints folder; the checkpoint to resume from, when
    `resume`). TrainError when --resume finds no checkpoint to continue from."""
    out = Path(out_arg).expanduser()
    checkpoints = out / "checkpoints"
    from transformers.trainer_utils import get_last_checkpoint

    resume_from = get_last_checkpoint(str(checkpoints)) if resume and checkpoints.is_dir() else None
    if resume and resume_from is None:
        raise TrainError(f"--resume: no checkpoint in {checkpoints} to continue from")
    out.mkdir(parents=True, exist_ok=True)
    return out, checkpoints, resume_from


def _checkpoint_step(folder: Path) -> int:
    """The global step a checkpoint holds (its trainer_state.json, else its name, checkpoint-N)."""
    try:
        return int(json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return int(folder.name.rpartition("-")[2])


def _cut_log(path: Path, step: int) -> None:
    """Keep the log's lines up to `step` (a new file renamed over the old one)."""
    if not path.exists():
        return
    kept = [line for line in _read_log(path) if isinstance(line.get("step"), int) and line["step"] <= step]
    scratch = path.with_name(f".{path.name}.cut")
    scratch.write_text("".join(json.dumps(line) + "\n" for line in kept), encoding="utf-8")
    os.replace(scratch, path)


def _read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines
