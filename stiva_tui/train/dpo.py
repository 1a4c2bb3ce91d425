"""`stiva train --from-votes`: the conductor learns the user's compare-mode votes with DPO.

    summary = train_from_votes(config, VoteTrainOptions(base="embedded", out=Path("adapter")))

Each vote is a preference pair of workflows (votes.py): for the voted question, the winner's plan
is preferred over each other system's plan. TRL's `DPOTrainer` learns them, with LoRA (QLoRA on
CUDA) through PEFT as the GRPO path does; the reference model is the base with the adapter off.

Why DPO and not the votes as a reward inside GRPO: a vote compares two given plans, and DPO
learns exactly that from the pair's two log-likelihoods, with no sampling, no pool calls and no
grader (one forward and backward pass over 2 x batch short sequences a step). A vote reward in
GRPO would only score the sampled plans that happen to equal a voted plan, and everything else
would need a reward the vote does not give. Measured on the tiny random model of
tests/test_votes.py (benchmarks/votes_methods.py, 2 shared CPU cores, 20 steps each): both took
the held-out rate of plans picking the voted model from 0.48 to 0.86; DPO in 68 s, GRPO with the
vote reward (16 sampled plans a step) in 267 s, in a setting where every sampled plan is a voted
one (one step, two models), which with longer plans over a larger pool it would seldom be.

The pairs are rendered exactly as the plan grammar writes them (votes.plan_text), after the
exact prompt the conductor plans under (`HFConductor.prompt_ids`), tokenized here rather than by
TRL, so that what is trained is what is sampled: prompt styles "compact" (the default) and "base"
write the lists without reasoning first, which is what the pair holds.

Outputs in `out`, as `stiva train` writes them (so `adapter:DIR` and `HFConductor` load it the
same way): the adapter, `stiva_adapter.json` (its base, prompt style and subtask bound; "suite":
"votes"), `train_log.jsonl` (one line per step), `pairs.jsonl` (the pairs trained on),
`checkpoints/`.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..inference.checkpoints import ADAPTER_MARKER, base_fingerprint, base_identity
from .trainer import LORA_TARGET_SETS, TrainError, _checkpoint_step, _cut_log, _read_log, output_folder
from .votes import PairText, VoteHarvest, pair_texts, read_votes

VOTE_PROMPT_STYLES = ("compact", "base")


@dataclass
class VoteTrainOptions:
    base: str  # "embedded", an HF id or a folder
    out: Path
    steps: int = 50
    batch: int = 4  # pairs per step
    lr: float = 5e-5
    beta: float = 0.1  # DPO's: how far the adapter may move from the base
    # RPO (arXiv 2404.19733): DPO's loss plus this weight x the chosen plan's mean NLL. DPO alone
    # widens the margin by lowering both plans' likelihood (on one-step plans that differ in a single
    # token, the shared subtask and format drift with them); the NLL term holds the chosen plan up.
    sft_weight: float = 0.0
    resume: bool = False
    seed: int = 0
    lora_r: int = 16
    lora_alpha: int | None = None
    lora_targets: str = "attention"
    prompt_style: str | None = None  # None: compact ("base" for the embedded model's few-shot prompt)
    max_steps_per_plan: int | None = None  # the plan's step limit (default: [conductor] max_steps)
    max_subtask_chars: int | None = None
    save_every: int = 10
    device: str | None = None
    history: Path | None = None  # the history database (default: the app's)
    # Graded benches whose items join the votes as pairs (votes.graded_pairs): ids or prefixes
    benches: tuple[str, ...] = ()
    bench_pairs: str = "all"  # "best": only each item's best system over the others (votes.graded_pairs)
    # Preference levels the benches' pairs are graded under (votes.graded_pairs(levels=...)): each
    # pair's prompt states its level, so one adapter learns what each level prefers. () : no level.
    preferences: tuple[str, ...] = ()


@dataclass
class VoteStepReport:
    """One line of train_log.jsonl: DPO's loss, and how often the chosen plan scores above the
    rejected one under the adapter relative to the base (accuracy), by how much (margin)."""

    step: int
    loss: float
    accuracy: float
    margin: float
    chosen_logp: float
    rejected_logp: float
    seconds: float = 0.0

    def log_line(self) -> dict[str, Any]:
        return {"step": self.step, "loss": self.loss, "accuracy": self.accuracy, "margin": self.margin,
                "chosen_logp": self.chosen_logp, "rejected_logp": self.rejected_logp, "seconds": self.seconds}


@dataclass
class VoteTrainSummary:
    steps: int
    pairs: int
    votes: int
    loss_first: float | None
    loss_last: float | None
    accuracy_last: float | None
    adapter: str
    skipped: dict[str, int] = field(default_factory=dict)
    stopped: str | None = None
    graded: int = 0  # pairs read from graded benches (before the pool's filter)

    def as_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "pairs": self.pairs, "votes": self.votes, "graded_pairs": self.graded,
                "loss_first": self.loss_first,
                "loss_last": self.loss_last, "accuracy_last": self.accuracy_last, "adapter": self.adapter,
                "skipped": self.skipped, "cost_usd": 0.0}


def train_from_votes(config, options: VoteTrainOptions, *, workers: Sequence[Any] | None = None,
                     harvest: VoteHarvest | None = None,
                     on_step: Callable[[VoteStepReport], None] | None = None,
                     progress: Callable[[str], None] | None = None,
                     should_stop: Callable[[], str | None] | None = None) -> VoteTrainSummary:
    """Train a LoRA adapter on the history's votes with DPO. Blocking. `workers`: the pool as
    the conductor is shown it (default: the configured pool, as `stiva ask` lists it);
    `harvest`: the votes (default: read from the history)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module="trl")
        return _train(config, options, workers, harvest, on_step, progress or (lambda message: None), should_stop)


def _pool_workers(config) -> list[Any]:
    from ..conductor.base import WorkerInfo
    from .rollout import EngineLoop

    engine = EngineLoop(config)
    try:
        # prices and latencies too: a pair graded under a preference states them, as the prompt does
        return [WorkerInfo(m.id, m.description, m.kind, m.price_in, m.price_out, m.latency_s)
                for m in engine.runtime.models]
    finally:
        engine.close()


def _read_history(path: Path | None, benches: Sequence[str] = (), best_only: bool = False,
                  levels: Sequence[Any] = ()) -> VoteHarvest:
    """The votes' pairs, and the graded benches' (`--bench`, pooled; `--bench-pairs best`: `best_only`;
    `--prefer-levels`: graded under each of `levels`)."""
    from ..store import NotFoundError, Store, StoreError
    from .votes import graded_pairs

    try:
        with Store.open(path, reads_only=True) as store:
            harvest = read_votes(store)
            ids = []
            for text in benches:
                try:
                    ids.append(store.resolve_bench(text))
                except NotFoundError as exc:
                    raise TrainError(f"--bench {text}: {exc}") from None
            if ids:  # pooled: one suite graded several times is compared by mean grade
                pairs, left = graded_pairs(store, *dict.fromkeys(ids), best_only=best_only, levels=levels)
                harvest.pairs += pairs
                harvest.left_out += left
                harvest.graded += len(pairs)
            return harvest
    except StoreError as exc:
        raise TrainError(f"cannot read the votes: {exc}") from None


def _train(config, options: VoteTrainOptions, workers, harvest, on_step, say, should_stop) -> VoteTrainSummary:
    style = options.prompt_style or "compact"
    if style not in VOTE_PROMPT_STYLES:
        raise TrainError(f"--from-votes trains plans written without reasoning: use --prompt "
                         f"{' or '.join(VOTE_PROMPT_STYLES)}, not {style!r}")
    if options.steps < 1 or options.batch < 1 or options.beta <= 0 or not options.sft_weight >= 0:
        raise TrainError("--steps and --batch must be at least 1, --beta above 0, and --sft-weight 0 or more")
    if options.lora_targets not in LORA_TARGET_SETS or options.lora_r < 1:
        raise TrainError(f"--lora-targets must be {' or '.join(LORA_TARGET_SETS)}, and --lora-r at least 1")
    best_only = options.bench_pairs == "best"
    levels = _levels(options)
    harvest = harvest if harvest is not None else _read_history(options.history, options.benches, best_only, levels)
    if not harvest.pairs:
        raise TrainError(f"the history holds no usable preference pairs ({harvest.voted} votes"
                         f"{', and the benches give none' if options.benches else ''}): vote in compare mode (the "
                         "winner against another system), see `stiva votes`, or add a graded bench with --bench ID")
    max_steps = options.max_steps_per_plan or config.conductor.max_steps
    chars = options.max_subtask_chars or config.conductor.max_subtask_chars
    if options.base == "embedded":
        chars = min(chars, 100)  # as the embedded conductor plans
    say("reading the pool")
    workers = list(workers) if workers is not None else _pool_workers(config)
    if not workers:
        raise TrainError("the pool has no available model: add a provider key or a [[models]] entry")
    texts, skipped = pair_texts(harvest.pairs, [w.id for w in workers], max_steps, chars)
    if not texts:
        raise TrainError(f"none of the {len(harvest.pairs)} pairs can be written for this pool and a "
                         f"{max_steps}-step limit ({', '.join(f'{k}: {v}' for k, v in skipped.items())})")

    from ..inference.checkpoints import quiet_libraries

    quiet_libraries()
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" and options.base != "embedded" and not Path(options.base).expanduser().is_dir():
        raise TrainError(f"training {options.base} needs a CUDA GPU (QLoRA); on the CPU use --base embedded "
                         "or a small model folder")
    out, checkpoints, resume_from = output_folder(options.out, options.resume)

    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback, set_seed
    from trl import DPOConfig

    from ..inference.checkpoints import LoadedModel
    from ..inference.generation import eos_token_ids
    from .trainer import TrainOptions, _conductor_for, _load_for_training, _score_valid_positions_only

    set_seed(options.seed)
    # the pair's prompt is most of each sequence: project the plans' positions only through the
    # 262k-wide head, as GRPO does (benchmarks/dpo_step.json)
    _score_valid_positions_only()
    model, tokenizer, label, folder = _load_for_training(options.base, device, say)
    conductor = _conductor_for(options.base, config, TrainOptions(
        base=options.base, out=out, prompt_style=style, max_subtask_chars=chars,
        max_steps_per_plan=options.max_steps_per_plan), device)
    loaded = LoadedModel(model=model, tokenizer=tokenizer, spec=conductor.spec, device=device, quantization=None,
                         load_s=0.0, memory_bytes=0)
    eos = eos_token_ids(loaded)
    eos_id = eos[0] if eos else int(tokenizer.eos_token_id)
    say(f"tokenizing {len(texts)} pairs")
    rows = [_tokenized(pair, conductor, loaded, workers, max_steps, eos_id) for pair in texts]
    with (out / "pairs.jsonl").open("w", encoding="utf-8") as f:
        for pair in texts:
            f.write(json.dumps(pair.__dict__, ensure_ascii=False) + "\n")

    longest = max(len(r["prompt_ids"]) + max(len(r["chosen_ids"]), len(r["rejected_ids"])) for r in rows)
    args = DPOConfig(
        output_dir=str(checkpoints), per_device_train_batch_size=min(options.batch, len(rows)),
        gradient_accumulation_steps=1, max_steps=options.steps, learning_rate=options.lr, beta=options.beta,
        logging_steps=1, save_strategy="steps", save_steps=max(1, options.save_every), save_total_limit=2,
        report_to=[], use_cpu=device == "cpu", bf16=device == "cuda", seed=options.seed, max_length=longest + 8,
        dataloader_num_workers=0, disable_tqdm=True,
        gradient_checkpointing=device == "cuda" and options.base != "embedded",
        **({"loss_type": ["sigmoid", "sft"], "loss_weights": [1.0, options.sft_weight]} if options.sft_weight else {}),
    )
    log_path = out / "train_log.jsonl"
    if not options.resume and log_path.exists():
        log_path.unlink()
    elif resume_from is not None:
        _cut_log(log_path, _checkpoint_step(Path(resume_from)))
    state: dict[str, Any] = {"stopped": None, "started": time.monotonic()}

    class StivaCallback(TrainerCallback):
        """train_log.jsonl, the live view, and a clean stop (ctrl+c)."""

        def on_step_begin(self, args, train_state, control, **kwargs):
            state["started"] = time.monotonic()

        def on_log(self, args, train_state, control, logs=None, **kwargs):
            logs = logs or {}
            if "loss" not in logs:
                return
            report = VoteStepReport(
                step=int(train_state.global_step), loss=round(float(logs["loss"]), 6),
                accuracy=round(float(logs.get("rewards/accuracies", 0.0)), 4),
                margin=round(float(logs.get("rewards/margins", 0.0)), 6),
                chosen_logp=round(float(logs.get("logps/chosen", 0.0)), 4),
                rejected_logp=round(float(logs.get("logps/rejected", 0.0)), 4),
                seconds=round(time.monotonic() - state["started"], 3))
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(report.log_line()) + "\n")
            if on_step is not None:
                on_step(report)

        def on_step_end(self, args, train_state, control, **kwargs):
            reason = should_stop() if should_stop is not None else None
            if reason:
                state["stopped"] = reason
                control.should_training_stop = True
                control.should_save = True

    say("training")
    trainer = _PretokenizedDPOTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
        peft_config=LoraConfig(r=options.lora_r, lora_alpha=options.lora_alpha or 2 * options.lora_r,
                               lora_dropout=0.0, target_modules=LORA_TARGET_SETS[options.lora_targets],
                               task_type="CAUSAL_LM"),
        callbacks=[StivaCallback()])
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for noisy in (PrinterCallback, ProgressCallback):  # stdout is the command's (--json)
        trainer.remove_callback(noisy)
    trainer.train(resume_from_checkpoint=resume_from)
    trainer.model.save_pretrained(str(out))
    steps = int(trainer.state.global_step)
    (out / ADAPTER_MARKER).write_text(json.dumps({
        "base": options.base, "label": label, "identity": base_identity(folder),
        "fingerprint": base_fingerprint(model.config), "suite": "votes", "steps": steps,
        "trained_on": "votes", "pairs": len(rows), "prompt_style": style,
        **({"benches": list(options.benches), "bench_pairs": options.bench_pairs} if options.benches else {}),
        **({"max_subtask_chars": conductor.max_subtask_chars} if options.max_subtask_chars else {}),
        **({"max_steps_per_plan": options.max_steps_per_plan} if options.max_steps_per_plan else {}),
        **({"sft_weight": options.sft_weight} if options.sft_weight else {}),
        **({"preferences": [str(level) for level in levels]} if levels else {}),
    }, indent=2) + "\n")
    logged = _read_log(log_path)
    return VoteTrainSummary(
        steps=steps, pairs=len(rows), votes=harvest.votes.get("winner", 0),
        loss_first=logged[0]["loss"] if logged else None, loss_last=logged[-1]["loss"] if logged else None,
        accuracy_last=logged[-1]["accuracy"] if logged else None, adapter=str(out),
        skipped=dict(sorted(skipped.items())), stopped=state["stopped"], graded=harvest.graded)


def _levels(options: VoteTrainOptions) -> tuple[Any, ...]:
    """The preference levels of `options.preferences`, parsed (TrainError naming a bad one)."""
    from .trainer import prefer_levels

    if options.preferences and not options.benches:
        raise TrainError("--prefer-levels grades the benches' pairs under each level; a vote states no level: "
                         "add a graded bench with --bench ID")
    return tuple(dict.fromkeys(prefer_levels(options.preferences)))


def _tokenized(pair: PairText, conductor, loaded, workers, max_steps: int, eos_id: int) -> dict[str, list[int]]:
    """The pair as token ids: the conductor's exact prompt (stating the pair's preference level,
    if it has one), each plan's text and the end token."""
    from ..conductor.base import PlanRequest
    from ..core.preference import parse_preference

    request = conductor.limited(PlanRequest(pair.question, list(workers), max_steps=max_steps,
                                            preference=parse_preference(pair.preference)))
    tok = loaded.tokenizer
    return {
        "prompt_ids": list(conductor.prompt_ids(request, loaded)),
        "chosen_ids": list(tok(pair.chosen, add_special_tokens=False)["input_ids"]) + [eos_id],
        "rejected_ids": list(tok(pair.rejected, add_special_tokens=False)["input_ids"]) + [eos_id],
    }


def _pretokenized_trainer():
    from trl import DPOTrainer

    class PretokenizedDPOTrainer(DPOTrainer):
        """TRL's DPOTrainer on a dataset Stiva tokenized itself (prompt_ids, chosen_ids,
        rejected_ids): TRL would tokenize prompt and completion as one text, which can merge
        tokens across the boundary; the conductor samples after its own prompt ids."""

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            return dataset

    return PretokenizedDPOTrainer


def _PretokenizedDPOTrainer(**kwargs):
    return _pretokenized_trainer()(**kwargs)
