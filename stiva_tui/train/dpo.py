"""`stiva train dpo` (formerly `--from-votes`): the conductor learns the user's compare-mode votes with DPO.

    summary = train_from_votes(config, VoteTrainOptions(base="embedded", out=Path("adapter")))

Each vote is a preference pair of workflows (votes.py): for the voted question, the winner's plan
is preferred over each other system's plan. TRL's `DPOTrainer` learns them, with LoRA (QLoRA on
CUDA) through PEFT as the GRPO path does; the reference model is the base with the adapter off.

Why DPO and not the votes as a reward inside GRPO: a vote compares two given plans, and DPO
learns exactly that from the pair's two log-likelihoods, with no sampling, no pool calls and no
grader (one forward and backward pass over 2 x batch short sequences a step). A vote reward in
GRPO would only score the sampled plans that happen to equal a voted plan, and everything else
would need a reward the vote does not give. Measured on the tiny random model of
tests/test_votes.py (benchmarks/experiments/votes_methods.py, 2 shared CPU cores, 20 steps each): both took
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

The pool's order is shuffled (`shuffle_pool`: on by default for `stiva train graded`, off for the
votes' `stiva train dpo` unless `--shuffle-pool`; `--no-shuffle-pool` turns it off): a
plan names its models by their index in the prompt's list, so pairs always written under one
order could be learnt as "index 0 on arithmetic" rather than "the model named adder", and such an
adapter routes wrong once the pool is listed in another order. Each pair is trained under two
orders of the pool (`pool_orders`, drawn from the seed and the pair, so a resumed training sees
the same rows), its plans' indices remapped to each and its prompt listing the models in it. The
chosen model stands at another place in each of the two, and its places are dealt out evenly
among the pairs that choose it: neither the question nor the place gives the index, only the
list does. `pairs.jsonl` keeps each pair's plans in the pool's own order (`chosen`, `rejected`),
and in `trained_as` each order listed and the plans as trained under it. `--batch` counts the
dataset's rows (a pair under one order).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..inference.adapter_manifest import AdapterManifest
from .common import (
    TrainError,
    TrainingRun,
    check_lora,
    conductor_for,
    is_main_process,
    load_for_training,
    lora_config,
    prefer_levels,
    quiet_warnings,
    training_device,
)
from .votes import PairText, VoteHarvest, VotePair, pair_texts, read_votes

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
    # Each pair written under its own order of the pool (see the module's docstring), so the adapter
    # learns to pick a model by its name, not by its place in the list (GRPO's --shuffle-pool).
    # `stiva train graded` turns it on unless --no-shuffle-pool; votes' DPO leaves it off unless asked.
    shuffle_pool: bool = False


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
        return {
            "step": self.step,
            "loss": self.loss,
            "accuracy": self.accuracy,
            "margin": self.margin,
            "chosen_logp": self.chosen_logp,
            "rejected_logp": self.rejected_logp,
            "seconds": self.seconds,
        }


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
        return {
            "steps": self.steps,
            "pairs": self.pairs,
            "votes": self.votes,
            "graded_pairs": self.graded,
            "loss_first": self.loss_first,
            "loss_last": self.loss_last,
            "accuracy_last": self.accuracy_last,
            "adapter": self.adapter,
            "skipped": self.skipped,
            "cost_usd": 0.0,
        }


def train_from_votes(
    config,
    options: VoteTrainOptions,
    *,
    workers: Sequence[Any] | None = None,
    harvest: VoteHarvest | None = None,
    on_step: Callable[[VoteStepReport], None] | None = None,
    progress: Callable[[str], None] | None = None,
    should_stop: Callable[[], str | None] | None = None,
) -> VoteTrainSummary:
    """Train a LoRA adapter on the history's votes with DPO. Blocking. `workers`: the pool as
    the conductor is shown it (default: the configured pool, as `stiva ask` lists it);
    `harvest`: the votes (default: read from the history)."""
    with quiet_warnings(trl_user_warnings=True):
        return _train(config, options, workers, harvest, on_step, progress or (lambda message: None), should_stop)


def _pool_workers(config) -> list[Any]:
    from ..conductor.base import WorkerInfo
    from .rollout import EngineLoop

    engine = EngineLoop(config)
    try:
        # prices and latencies too: a pair graded under a preference states them, as the prompt does
        return [
            WorkerInfo(m.id, m.description, m.kind, m.price_in, m.price_out, m.latency_s) for m in engine.runtime.models
        ]
    finally:
        engine.close()


def _read_history(
    path: Path | None, benches: Sequence[str] = (), best_only: bool = False, levels: Sequence[Any] = ()
) -> VoteHarvest:
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
        raise TrainError(
            f"stiva train dpo trains plans written without reasoning: use --prompt "
            f"{' or '.join(VOTE_PROMPT_STYLES)}, not {style!r}"
        )
    if options.steps < 1 or options.batch < 1 or options.beta <= 0 or not options.sft_weight >= 0:
        raise TrainError("--steps and --batch must be at least 1, --beta above 0, and --sft-weight 0 or more")
    check_lora(options.lora_targets, options.lora_r)
    best_only = options.bench_pairs == "best"
    levels = _levels(options)
    harvest = harvest if harvest is not None else _read_history(options.history, options.benches, best_only, levels)
    if not harvest.pairs:
        raise TrainError(
            f"the history holds no usable preference pairs ({harvest.voted} votes"
            f"{', and the benches give none' if options.benches else ''}): vote in compare mode (the "
            "winner against another system), see `stiva votes`, or add a graded bench with --bench ID"
        )
    max_steps = options.max_steps_per_plan or config.conductor.max_steps
    chars = options.max_subtask_chars or config.conductor.max_subtask_chars
    if options.base == "embedded":
        chars = min(chars, 100)  # as the embedded conductor plans
    say("reading the pool")
    workers = list(workers) if workers is not None else _pool_workers(config)
    if not workers:
        raise TrainError("the pool has no available model: add a provider key or a [[models]] entry")
    texts, skipped = training_pairs(
        harvest.pairs, [w.id for w in workers], max_steps, chars, shuffle=options.shuffle_pool, seed=options.seed
    )
    if not texts:
        raise TrainError(
            f"none of the {len(harvest.pairs)} pairs can be written for this pool and a "
            f"{max_steps}-step limit ({', '.join(f'{k}: {v}' for k, v in skipped.items())})"
        )

    device = training_device(options.base, options.device)
    run = TrainingRun.open(options.out, options.resume)
    out = run.out

    from datasets import Dataset
    from trl import DPOConfig

    from ..inference.checkpoints import LoadedModel
    from ..inference.generation import eos_token_ids

    # the pair's prompt is most of each sequence: load_for_training makes TRL's fused head project
    # the plans' positions only, as for GRPO (benchmarks/perf/dpo_step.json)
    model, tokenizer, label, folder = load_for_training(options.base, device, options.seed, say)
    conductor = conductor_for(
        options.base,
        config,
        device,
        prompt_style=style,
        max_subtask_chars=chars,
        max_steps_per_plan=options.max_steps_per_plan,
    )
    loaded = LoadedModel(
        model=model,
        tokenizer=tokenizer,
        spec=conductor.spec,
        device=device,
        quantization=None,
        load_s=0.0,
        memory_bytes=0,
    )
    eos = eos_token_ids(loaded)
    eos_id = eos[0] if eos else int(tokenizer.eos_token_id)
    listings = [listing for pair in texts for listing in pair.listings]
    orders = len({listing.order for listing in listings})
    say(
        f"tokenizing {len(texts)} pairs"
        + (f" under {len(listings)} listings of the pool in {orders} orders" if options.shuffle_pool else "")
    )
    rows = [_tokenized(listing, conductor, loaded, workers, max_steps, eos_id) for listing in listings]
    if is_main_process():  # written once, not by each data-parallel process
        with (out / "pairs.jsonl").open("w", encoding="utf-8") as f:
            for pair in texts:
                f.write(json.dumps(pair.as_json([w.id for w in workers]), ensure_ascii=False) + "\n")

    longest = max(len(r["prompt_ids"]) + max(len(r["chosen_ids"]), len(r["rejected_ids"])) for r in rows)
    args = DPOConfig(
        output_dir=str(run.checkpoints),
        per_device_train_batch_size=min(options.batch, len(rows)),
        gradient_accumulation_steps=1,
        max_steps=options.steps,
        learning_rate=options.lr,
        beta=options.beta,
        logging_steps=1,
        save_strategy="steps",
        save_steps=max(1, options.save_every),
        save_total_limit=2,
        report_to=[],
        use_cpu=device == "cpu",
        bf16=device == "cuda",
        seed=options.seed,
        max_length=longest + 8,
        dataloader_num_workers=0,
        disable_tqdm=True,
        gradient_checkpointing=device == "cuda" and options.base != "embedded",
        ddp_find_unused_parameters=False,  # LoRA: every trainable weight takes part in each step
        **({"loss_type": ["sigmoid", "sft"], "loss_weights": [1.0, options.sft_weight]} if options.sft_weight else {}),
    )
    run.start_log(options.resume)

    def report_for(step: int, logs: dict, elapsed: float) -> VoteStepReport:
        return VoteStepReport(
            step=step,
            loss=round(float(logs["loss"]), 6),
            accuracy=round(float(logs.get("rewards/accuracies", 0.0)), 4),
            margin=round(float(logs.get("rewards/margins", 0.0)), 6),
            chosen_logp=round(float(logs.get("logps/chosen", 0.0)), 4),
            rejected_logp=round(float(logs.get("logps/rejected", 0.0)), 4),
            seconds=round(elapsed, 3),
        )

    say("training")
    trainer = _PretokenizedDPOTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(options.lora_r, options.lora_alpha, options.lora_targets),
        callbacks=[run.callback(report_for, on_step, should_stop)],
    )
    steps = run.train(trainer)
    if not is_main_process():  # the main process writes the output folder and reports
        return VoteTrainSummary(steps, len(texts), harvest.votes.get("winner", 0), None, None, None, str(out))
    AdapterManifest.trained(
        options.base,
        label,
        folder,
        model.config,
        suite="votes",
        steps=steps,
        trained_on="votes",
        pairs=len(texts),
        prompt_style=style,
        benches=tuple(options.benches),
        bench_pairs=options.bench_pairs if options.benches else None,
        max_subtask_chars=conductor.max_subtask_chars if options.max_subtask_chars else None,
        max_steps_per_plan=options.max_steps_per_plan or None,
        sft_weight=options.sft_weight or None,
        preferences=tuple(str(level) for level in levels),
    ).write(out)
    logged = run.logged()
    return VoteTrainSummary(
        steps=steps,
        pairs=len(texts),
        votes=harvest.votes.get("winner", 0),
        loss_first=logged[0]["loss"] if logged else None,
        loss_last=logged[-1]["loss"] if logged else None,
        accuracy_last=logged[-1]["accuracy"] if logged else None,
        adapter=str(out),
        skipped=dict(sorted(skipped.items())),
        stopped=run.stopped,
        graded=harvest.graded,
    )


def _levels(options: VoteTrainOptions) -> tuple[Any, ...]:
    """The preference levels of `options.preferences`, parsed (TrainError naming a bad one)."""
    if options.preferences and not options.benches:
        raise TrainError(
            "--prefer-levels grades the benches' pairs under each level; a vote states no level: "
            "add a graded bench with --bench ID"
        )
    return tuple(dict.fromkeys(prefer_levels(options.preferences)))


# Orders of the pool each pair is trained under, when shuffled: two, so that a question's chosen
# index differs between its rows and cannot be learnt from the question alone (one order per
# pair was: a small model reached loss 0.004 on its pairs and routed held-out questions at chance)
ORDERS_PER_PAIR = 2


@dataclass(frozen=True)
class Listing:
    """One order of the pool a pair is trained under (`order[k]`: the index in the pool of the
    model listed k-th), and the pair written for it (its plans' indices count in that list)."""

    order: tuple[int, ...]
    text: PairText

    def workers(self, pool: Sequence[Any]) -> list[Any]:
        """`pool` (workers, or ids) in this listing's order."""
        return [pool[i] for i in self.order]


@dataclass(frozen=True)
class TrainPair:
    """A preference pair as it is trained: `pair` written for the pool in its own order, and the
    listings it is trained under (one row of the dataset each)."""

    pair: PairText
    listings: tuple[Listing, ...]

    def as_json(self, pool: Sequence[str]) -> dict[str, Any]:
        """Its line of pairs.jsonl: the plans in the pool's own order, then each listing's order and plans."""
        return {
            **self.pair.__dict__,
            "trained_as": [
                {"listed": lst.workers(pool), "chosen": lst.text.chosen, "rejected": lst.text.rejected}
                for lst in self.listings
            ],
        }


def pool_orders(pairs: Sequence[VotePair], pool: Sequence[str], seed: int) -> list[list[tuple[int, ...]]]:
    """The orders of `pool` each of `pairs` is trained under (ORDERS_PER_PAIR of them, fewer on a
    pool that small; `order[k]` is the index in `pool` of the model listed k-th). Each order is
    drawn from `seed`, the pair itself (its source, systems, level and question) and its number,
    then the chosen plan's first model is moved to a place dealt out in turn among the pairs with
    the same chosen plan and level: over them it stands at every place equally often (within one),
    and at another place in each of a pair's orders. So neither the place nor the question says
    which index to write, even on a few dozen pairs where free draws leave one place ahead (math
    chosen at 0 eight times in twelve). The same pairs get the same orders in every run."""
    size = len(pool)
    copies = min(ORDERS_PER_PAIR, size)
    index = {model: i for i, model in enumerate(pool)}

    def key(pair: VotePair) -> str:
        fields = (pair.session_id, pair.chosen_system, pair.rejected_system, pair.preference or "", pair.question)
        return "\x1f".join((str(seed), *fields))

    strata: dict[tuple[Any, ...], list[int]] = {}
    for k, pair in enumerate(pairs):
        strata.setdefault((pair.chosen.models, pair.preference), []).append(k)
    orders: list[list[tuple[int, ...]]] = [[] for _ in pairs]
    for stratum, members in strata.items():
        members.sort(key=lambda k: (key(pairs[k]), k))  # a seeded deal, whatever the pairs' own order
        first = random.Random(f"{seed}\x1f{stratum}").randrange(size)
        for rank, k in enumerate(members):
            model = index.get(pairs[k].chosen.models[0]) if pairs[k].chosen.models else None
            for copy in range(copies):
                order = random.Random(f"{key(pairs[k])}\x1f{copy}").sample(range(size), size)
                if model is not None:
                    place, at = (first + rank * copies + copy) % size, order.index(model)
                    order[place], order[at] = order[at], order[place]
                orders[k].append(tuple(order))
    return orders


def training_pairs(
    pairs: Iterable[VotePair], pool: Sequence[str], max_steps: int, max_subtask_chars: int, *, shuffle: bool, seed: int
) -> tuple[list[TrainPair], Counter]:
    """The pairs that can be written for `pool` and the step limit (votes.pair_texts), each under
    its orders of the pool when `shuffle` (`pool_orders`), else under the pool's own; and why the
    others cannot be written (which no order changes)."""
    written: list[tuple[VotePair, PairText]] = []
    skipped: Counter = Counter()
    for pair in pairs:
        listed, why = pair_texts([pair], pool, max_steps, max_subtask_chars)
        skipped.update(why)
        written += [(pair, text) for text in listed]
    identity = tuple(range(len(pool)))
    orders = pool_orders([pair for pair, _ in written], pool, seed) if shuffle else [[identity]] * len(written)
    out: list[TrainPair] = []
    for (pair, listed), its_orders in zip(written, orders):
        listings = []
        for order in its_orders:
            text = (
                listed
                if order == identity
                else pair_texts([pair], [pool[i] for i in order], max_steps, max_subtask_chars)[0][0]
            )
            listings.append(Listing(order, text))
        out.append(TrainPair(listed, tuple(listings)))
    return out, skipped


def listing_request(listing: Listing, workers: Sequence[Any], max_steps: int):
    """The `PlanRequest` a listing is trained under: its question, the pool's `workers` in its
    order, its preference level (if it has one)."""
    from ..conductor.base import PlanRequest
    from ..core.preference import parse_preference

    return PlanRequest(
        listing.text.question,
        listing.workers(workers),
        max_steps=max_steps,
        preference=parse_preference(listing.text.preference),
    )


def _tokenized(listing: Listing, conductor, loaded, workers, max_steps: int, eos_id: int) -> dict[str, list[int]]:
    """A listing of a pair as token ids: the conductor's exact prompt (the pool in the listing's
    order, stating the pair's preference level, if it has one), each plan's text and the end token."""
    request = conductor.limited(listing_request(listing, workers, max_steps))
    tok = loaded.tokenizer
    return {
        "prompt_ids": list(conductor.prompt_ids(request, loaded)),
        "chosen_ids": list(tok(listing.text.chosen, add_special_tokens=False)["input_ids"]) + [eos_id],
        "rejected_ids": list(tok(listing.text.rejected, add_special_tokens=False)["input_ids"]) + [eos_id],
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
