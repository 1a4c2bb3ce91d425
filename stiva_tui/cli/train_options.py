"""`stiva train`'s options, in families, and the methods that take them.

Shared by train.py (each method's parser) and train_legacy.py (the spellings from before the
methods), so that neither imports the other's options.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .common import comma_list

# --- the options, in families: a method takes the families it names --------------------------------

Family = Callable[[argparse.ArgumentParser, str], list[argparse.Action]]


def _suite_options(p: argparse.ArgumentParser, method: str) -> list[argparse.Action]:
    return [
        p.add_argument("suite", metavar="SUITE", help="a bench suite: JSONL file, FORMAT:PATH or a built-in name"),
        p.add_argument(
            "--split",
            metavar="NAME",
            help="only the items whose meta.split is NAME (skills: train, the held-out ones unseen)",
        ),
        p.add_argument(
            "--unsafe-code", action="store_true", help="grade code items WITHOUT isolation where no sandbox can be had"
        ),
        p.add_argument(
            "--no-answer-cache",
            dest="answer_cache",
            action="store_false",
            help="ask every call again, instead of reusing the answers already paid for (a model sent "
            "the same prompt under the same sampling, in any training or --answer-cache bench)",
        ),
    ]


def _model_options(p: argparse.ArgumentParser, method: str) -> list[argparse.Action]:
    """What every method takes: the model, the adapter, the optimiser, the output. A value not
    given is the trainer's default (TrainOptions, VoteTrainOptions), which the help repeats."""
    dpo = method != "grpo"
    return [
        p.add_argument("--base", required=True, help="embedded, an HF id or a model folder (QLoRA on CUDA)"),
        p.add_argument(
            "--out", required=True, metavar="DIR", type=Path, help="where the adapter, log and checkpoints go"
        ),
        p.add_argument("--steps", type=int, help=f"{'DPO' if dpo else 'GRPO'} steps (default 50)"),
        # DPO's batch stays the command's 2 of before the methods (VoteTrainOptions' own is 4)
        p.add_argument(
            "--batch",
            type=int,
            default=2 if dpo else None,
            help=f"{'pairs' if dpo else 'questions'} per step (default 2)",
        ),
        p.add_argument("--lr", type=float, help="learning rate (default 5e-5)"),
        p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in DIR"),
        p.add_argument(
            "--save-every",
            type=int,
            metavar="N",
            help="keep a checkpoint every N steps (default 10; --resume continues from the last)",
        ),
        p.add_argument("--lora-r", type=int, metavar="R", help="LoRA rank (default 16)"),
        p.add_argument(
            "--lora-targets",
            choices=["attention", "all"],
            help="LoRA on the attention projections (the default) or on every linear layer",
        ),
        p.add_argument(
            "--prompt",
            choices=["compact"],
            dest="prompt_style",
            help="plan under the short compact prompt (DPO's default already: its pairs are plans "
            "written without reasoning)"
            if dpo
            else "train (and plan, with the adapter) under the ~60-token compact prompt instead of "
            "the ~1,300-token one: many times faster on a CPU",
        ),
        p.add_argument(
            "--plan-steps",
            type=int,
            metavar="N",
            dest="max_steps_per_plan",
            help="at most N steps per plan (default: [conductor] max_steps)",
        ),
        p.add_argument(
            "--subtask-chars",
            type=int,
            metavar="N",
            dest="max_subtask_chars",
            help="at most N characters per subtask while training (default: the conductor's)",
        ),
        p.add_argument(
            "--prefer-levels",
            metavar="LEVELS",
            dest="preferences",
            type=comma_list,
            help="comma-separated preferences (best,balanced,cheap,fast or numbers 0..1): "
            + (
                "the graded benches' pairs are graded under each level, stated in the prompt, so "
                "one adapter follows every level"
                if dpo
                else "each question's plans are sampled under one of them, stated in the prompt, and "
                "rewarded by its cost and latency weights, so one adapter follows every level "
                "(replaces --cost-weight)"
            ),
        ),
        # every method takes it (one spelling in the legacy parser, which adds every family at once)
        p.add_argument(
            "--shuffle-pool",
            action=argparse.BooleanOptionalAction,
            help="write each pair under its own order of the pool, its plans' model indices remapped, so "
            "the adapter learns to pick a model by its name, not by its place in the list (default: on for "
            "graded, off for dpo; --no-shuffle-pool keeps the pool's own order)"
            if dpo
            else "sample each plan under its own order of the pool: a conductor that always names "
            "the first model then tries them all, and learns to route by name, not by place (default off)",
        ),
        p.add_argument("--seed", type=int, help="the random seed (default 0)"),
        p.add_argument("--json", action="store_true", help="print the summary as one JSON object"),
    ]


def _grpo_options(p: argparse.ArgumentParser, method: str) -> list[argparse.Action]:
    return [
        p.add_argument("--group", type=int, help="plans per question (G, default 4)"),
        p.add_argument(
            "--cost-weight", type=float, help="reward minus W x the run's cost, normalised within each question's group"
        ),
        p.add_argument("--budget-usd", type=float, help="stop cleanly once the rollouts have cost this much"),
        p.add_argument("--temperature", type=float, help="sampling temperature of the plans (default 1)"),
        p.add_argument(
            "--rollout-concurrency",
            type=int,
            metavar="N",
            help="at most N calls at once to each provider (default 8; a 429 halves it for a while)",
        ),
    ]


def _pair_options(p: argparse.ArgumentParser, method: str) -> list[argparse.Action]:
    graded = method == "graded"
    return [
        p.add_argument(
            "--bench",
            action="append",
            dest="benches",
            metavar="ID",
            help=(
                "add another graded bench's items as pairs too; repeatable"
                if graded
                else "add a graded bench's items as pairs too (right over wrong, the cheaper right over "
                "the dearer), so votes and a graded suite train one adapter; repeatable: benches of "
                "one suite graded again (another sim seed, a temperature) are pooled by item and "
                "compared by mean grade"
            ),
        ),
        p.add_argument(
            "--bench-pairs",
            choices=["all", "best"],
            help="every pair the rule gives, or only each item's best system over every other: one "
            f"consistent pick per question (default {'best' if graded else 'all'})",
        ),
        p.add_argument(
            "--beta", type=float, help="DPO's beta, how far the adapter may move from its base (default 0.1)"
        ),
        p.add_argument(
            "--sft-weight",
            type=float,
            metavar="W",
            help="add W x the chosen plan's mean NLL to DPO's loss (RPO), so the adapter cannot widen "
            "the margin by making both plans unlikely (default 0: DPO alone)",
        ),
    ]


def _graded_options(p: argparse.ArgumentParser, method: str) -> list[argparse.Action]:
    return [
        p.add_argument(
            "--graded-seeds",
            type=int,
            metavar="K",
            dest="seeds",
            help="on a simulated pool: grade it under K seeds (K samples of every model per "
            "question), pairs by mean grade (default 1)",
        ),
        p.add_argument(
            "--graded-systems",
            metavar="SYSTEMS",
            dest="systems",
            help="the systems graded, as stiva bench --systems takes them (default direct:*, every "
            "single model); chain:A>B adds two-step plans (train them with --plan-steps 2)",
        ),
    ]


def _router_options(p: argparse.ArgumentParser, method: str) -> list[argparse.Action]:
    return [
        p.add_argument("--out", required=True, metavar="DIR", type=Path, help="where the router goes"),
        p.add_argument(
            "--features",
            choices=("tfidf", "embedded", "auto"),
            default="tfidf",
            help="the question's representation: hashed TF-IDF of its words and character n-grams (default; "
            "decides in milliseconds), the embedded model's hidden state (a forward pass a question), or auto: "
            "each tried, the one whose workflow choice does best on the validation draw kept",
        ),
        p.add_argument("--seed", type=int, default=0, help="the validation draw and batch order (default 0)"),
        p.add_argument("--epochs", type=int, default=60, help="passes over the items (default 60)"),
        p.add_argument("--json", action="store_true", help="print the summary as one JSON object"),
    ]


@dataclass(frozen=True)
class Method:
    help: str
    description: str
    families: tuple[Family, ...]


METHODS: dict[str, Method] = {
    "grpo": Method(
        "sample plans on a suite, run and grade them, learn by GRPO",
        "Sample G plans per question with the conductor, run each on the pool, grade the answers, and update "
        'a LoRA adapter with GRPO (TRL). Then set [conductor] adapter = "DIR", and compare with: '
        "stiva bench SUITE --systems conductor,adapter:DIR",
        (_suite_options, _model_options, _grpo_options),
    ),
    "dpo": Method(
        "learn the compare-mode votes (and graded benches) by DPO",
        "Train on the compare-mode votes (see stiva votes): DPO on each vote's winning plan over the others', "
        "and with --bench ID on a graded bench's items too (right over wrong, the cheaper right over the dearer).",
        (_model_options, _pair_options),
    ),
    "graded": Method(
        "grade every model of the pool on a suite, then learn by DPO which to pick",
        "Grade every single model of the pool on SUITE (a bench of each), then learn by DPO which model each "
        "question's best answer came from.",
        (_suite_options, _model_options, _pair_options, _graded_options),
    ),
    "router": Method(
        "a one-pass router: predict each model's chance on a question, pick in one forward pass",
        "Grade every single model of the pool on SUITE (read from the history with --pool replay:ID, else a bench "
        "of each), then train a small head on the question's representation that predicts each model's chance of "
        "a right answer. Use it as the system router:DIR[@LEVEL] in stiva bench, or set [conductor] router = "
        '"DIR" to make conductor-mini route with it.',
        (_suite_options, _router_options),
    ),
}
