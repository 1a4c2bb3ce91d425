"""DPO against the votes as a reward inside GRPO, on the setting of tests/test_votes.py (run by hand):

    .venv/bin/python -m benchmarks.experiments.votes_methods [--steps 20]

A tiny random-weight conductor (tests/support/model_builders.py); 24 votes, each preferring model beta's
single step over the conductor's plan (one step on alpha); 16 held-out questions, 4 plans each,
sampled through the grammar-constrained plan path. Both methods train LoRA (rank 8, every linear
layer) with TRL, on the CPU:

- dpo: `train_from_votes` (train/dpo.py), the pairs as they are;
- grpo: TRL's GRPOTrainer, G = 4 plans sampled per voted question, each rewarded by the votes:
  1 when its models and access lists are a voted winner's for that question, 0 when they are a
  voted loser's, 0.5 otherwise (what a vote can say about a plan no one voted on).

Printed: seconds of training, and the held-out rate of plans that pick beta, per method.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=5e-3)
    args = parser.parse_args()
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from stiva_tui.conductor.base import PlanRequest, WorkerInfo
    from stiva_tui.config import parse_config
    from stiva_tui.train.votes import NamedPlan, VoteHarvest, VotePair
    from tests.support.model_builders import build_random_model
    from tests.test_votes import COUNTRIES, picks_beta, questions

    work = Path(tempfile.mkdtemp(prefix="stiva-votes-methods-"))
    corpus = [f"Compute {a} times {b}." for a in range(2, 40) for b in (3, 7)]
    corpus += [f"Which city is the capital of {c}?" for c in COUNTRIES]
    model = build_random_model(work / "model", "tiny", seed=3, corpus=corpus * 4)
    voted, held = questions()
    workers = [WorkerInfo("alpha", ""), WorkerInfo("beta", "")]
    pairs = [
        VotePair(
            f"s{i}",
            q,
            "beta",
            "conductor",
            NamedPlan(("beta",), ("Answer the question.",), ((),)),
            NamedPlan(("alpha",), (["Solve it", "Think", "Work"][i % 3],), ((),)),
        )
        for i, q in enumerate(voted)
    ]
    harvest = VoteHarvest(sessions=len(pairs), pairs=pairs)
    harvest.votes["winner"] = len(pairs)
    config = parse_config(
        {
            "catalog": False,
            "embedded_worker": False,
            "discovery": {"enabled": False},
            "conductor": {"max_steps": 1, "max_reasoning_tokens": 0, "max_subtask_chars": 20},
        }
    )
    print(f"before: picks beta {picks_beta(model, None, held, workers, 'compact'):.3f}", flush=True)

    from stiva_tui.train.dpo import VoteTrainOptions, train_from_votes

    t0 = time.monotonic()
    train_from_votes(
        config,
        VoteTrainOptions(
            base=str(model),
            out=work / "dpo",
            steps=args.steps,
            batch=4,
            lr=args.lr,
            device="cpu",
            lora_r=8,
            lora_targets="all",
            prompt_style="compact",
            max_subtask_chars=4,
            save_every=1000,
        ),
        workers=workers,
        harvest=harvest,
    )
    dpo_s = time.monotonic() - t0
    print(
        f"dpo: {args.steps} steps in {dpo_s:.1f} s; picks beta {picks_beta(model, str(work / 'dpo'), held, workers):.3f}",
        flush=True,
    )

    # grpo with the votes as the reward
    import json

    import torch
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.inference.checkpoints import ADAPTER_MARKER, LoadedModel, ModelSpec

    tok = AutoTokenizer.from_pretrained(str(model))
    base = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32)
    peft = get_peft_model(
        base, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    conductor = HFConductor(
        ModelSpec(str(model), device="cpu", quantize=False, compute_dtype="float32"),
        max_reasoning_tokens=0,
        max_subtask_chars=4,
        temperature=1.0,
        prompt_style="compact",
    )
    by_question = {p.question: p for p in pairs}

    def rollout(prompts, trainer):
        m = trainer.model
        m.eval()
        loaded = LoadedModel(
            model=m, tokenizer=tok, spec=conductor.spec, device="cpu", quantization=None, load_s=0.0, memory_bytes=0
        )
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "vote_reward": []}
        i = 0
        while i < len(prompts):
            q = prompts[i]
            n = 1
            while i + n < len(prompts) and prompts[i + n] == q:
                n += 1
            for plan in conductor.sample_many_sync(PlanRequest(q, workers, max_steps=1), loaded, n, 1.0):
                pair = by_question[q]
                chosen = plan.workflow is not None and tuple(workers[s.model].id for s in plan.workflow.steps)
                reward = 1.0 if chosen == pair.chosen.models else (0.0 if chosen == pair.rejected.models else 0.5)
                out["prompt_ids"].append(plan.prompt_ids)
                out["completion_ids"].append(plan.completion_ids)
                out["logprobs"].append(plan.logprobs)
                out["vote_reward"].append(reward)
            i += n
        m.train()
        return out

    def reward(prompts, completions, **kw):
        return list(kw["vote_reward"])

    grpo_args = GRPOConfig(
        output_dir=str(work / "grpo-ck"),
        per_device_train_batch_size=16,
        num_generations=4,
        max_steps=args.steps,
        learning_rate=args.lr,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        max_completion_length=64,
        temperature=1.0,
        seed=0,
        remove_unused_columns=False,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=peft,
        reward_funcs=[reward],
        args=grpo_args,
        train_dataset=Dataset.from_list([{"prompt": q} for q in voted]),
        processing_class=tok,
        rollout_func=rollout,
    )
    t0 = time.monotonic()
    trainer.train()
    grpo_s = time.monotonic() - t0
    out = work / "grpo"
    trainer.model.save_pretrained(str(out))
    (out / ADAPTER_MARKER).write_text(
        json.dumps({"base": str(model), "prompt_style": "compact", "max_subtask_chars": 4})
    )
    print(
        f"grpo: {args.steps} steps (16 plans each) in {grpo_s:.1f} s; picks beta "
        f"{picks_beta(model, str(out), held, workers):.3f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
