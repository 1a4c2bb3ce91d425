"""What the two trainers share: `stiva train` (GRPO, trainer.py) and `stiva train --from-votes`
(DPO, dpo.py) differ in their data, their TRL trainer and their step's report; around those
they do the same things, here:

    check_lora(options.lora_targets, options.lora_r)         # before anything loads
    device = training_device(options.base, options.device)   # quiets the libraries first
    run = TrainingRun.open(options.out, options.resume)      # the output folder, the checkpoint to resume
    model, tokenizer, label, folder = load_for_training(options.base, device, options.seed, say)
    run.start_log(options.resume)                            # train_log.jsonl: new, or cut to the checkpoint
    trainer = SomeTRLTrainer(..., callbacks=[run.callback(report_for, on_step, should_stop)])
    steps = run.train(trainer)                               # trains, saves the adapter in run.out
    AdapterManifest.trained(options.base, label, folder, model.config, ...).write(run.out)

The callback writes one line of train_log.jsonl per step (what `report_for` makes of TRL's
logs), hands the report to the live view, and stops training cleanly, saving a checkpoint, when
`should_stop` (ctrl+c) or `over_budget` says why.

torch, transformers, peft and TRL are imported inside functions only.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.preference import Preference, PreferenceError, parse_preference
from ..inference.errors import ModelError

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
LORA_TARGET_SETS: dict[str, Any] = {"attention": LORA_TARGETS, "all": "all-linear"}


class TrainError(Exception):
    """Training cannot start as asked; the message says what to do."""


# --- before anything loads ---------------------------------------------------------------------


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


def check_lora(targets: str, rank: int) -> None:
    if targets not in LORA_TARGET_SETS or rank < 1:
        raise TrainError(f"--lora-targets must be {' or '.join(LORA_TARGET_SETS)}, and --lora-r at least 1")


def lora_config(rank: int, alpha: int | None, targets: str):
    """PEFT's LoRA settings for the conductor (alpha: 2 x rank unless given)."""
    from peft import LoraConfig

    return LoraConfig(
        r=rank,
        lora_alpha=alpha or 2 * rank,
        lora_dropout=0.0,
        target_modules=LORA_TARGET_SETS[targets],
        task_type="CAUSAL_LM",
    )


@contextmanager
def quiet_warnings(*, trl_user_warnings: bool = False) -> Iterator[None]:
    """The libraries' warnings a user can do nothing about, hidden while training."""
    with warnings.catch_warnings():
        # transformers 5 renamed gradient checkpointing; TRL and PEFT still use the old names
        warnings.filterwarnings("ignore", category=FutureWarning)
        if trl_user_warnings:
            warnings.filterwarnings("ignore", category=UserWarning, module="trl")
        yield


def training_device(base: str, device: str | None) -> str:
    """The device to train on (CUDA when there is one, unless `device` says), with transformers
    quieted; TrainError for a base that needs CUDA where there is none."""
    from ..inference.checkpoints import quiet_libraries

    quiet_libraries()  # before torch, peft or trl import bitsandbytes
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" and base != "embedded" and not Path(base).expanduser().is_dir():
        raise TrainError(
            f"training {base} needs a CUDA GPU (QLoRA); on the CPU use --base embedded or a small model folder"
        )
    return device


# --- data-parallel processes (torchrun, accelerate launch) ------------------------------------------


def process_rank() -> tuple[int, int]:
    """(this process's rank, the number of processes), as the launcher set them (torchrun,
    `accelerate launch`, deepspeed, mpirun); (0, 1) for a plain `stiva train`."""

    def first(*names: str, default: int) -> int:
        for name in names:
            try:
                return int(os.environ[name])
            except (KeyError, ValueError):
                continue
        return default

    world = first("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", default=1)
    return first("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", default=0), max(1, world)


def is_main_process() -> bool:
    """True in a plain `stiva train`, and in the main process (rank 0) of a data-parallel one:
    the one that writes the log, the adapter and the summary."""
    return process_rank()[0] == 0


def gathered(value: Any) -> list[Any]:
    """`value` from every process, in rank order (a collective: every process must call it at the
    same point); [value] in a single process."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return [value]
    values: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def agreed_stop(reason: str | None) -> str | None:
    """A reason to stop that every process agrees on: the first process's that has one (a ctrl+c
    reaches the processes at different steps; one that stopped alone would leave the others
    waiting for it forever). A collective, called after every step."""
    return next((r for r in gathered(reason) if r), None)


def summed(value: float) -> float:
    """`value` added over the processes (what the rollouts of all of them spent)."""
    return sum(gathered(value))


def on_main_process(work: Callable[[], Any], device: str | None = None) -> Any:
    """`work()` run by the main process alone, its result handed to the others, which wait for it
    (graded DPO's grading bench: two processes grading at once find its bench locked). Where it
    fails, the main process raises its error and the others a TrainError saying so. In a single
    process, just `work()`."""
    if process_rank()[1] < 2:
        return work()
    from datetime import timedelta

    import torch.distributed as dist
    from accelerate import PartialState

    if device is None:  # as training_device picks it
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    state = PartialState(cpu=device == "cpu")  # the state the trainer then uses, made now
    # the grading may take hours: the others wait on a group of their own, not under the default
    # group's timeout, which the training's steps keep
    group = dist.new_group(backend="gloo", timeout=timedelta(days=2))
    payload: list[Any] = [None]
    error: BaseException | None = None
    if state.is_main_process:
        try:
            payload = [("done", work())]
        except BaseException as exc:  # noqa: BLE001 - said to the others, then raised here
            error = exc
            payload = [("failed", f"{type(exc).__name__}: {exc}")]
    dist.broadcast_object_list(payload, src=0, group=group)
    if error is not None:
        raise error
    kind, value = payload[0]
    if kind == "failed":
        raise TrainError(f"the main process stopped: {value}")
    return value


def adapter_fingerprint(state: dict[str, Any]) -> str:
    """sha256 of an adapter's tensors (names sorted, each name and its values' bytes): the same
    for the same weights, whether read from a model or from adapter_model.safetensors."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        values = state[name].detach().to("cpu").contiguous().reshape(-1)
        digest.update(values.view(torch.uint8).numpy().tobytes())  # bf16 too
    return digest.hexdigest()


# --- the model ---------------------------------------------------------------------------------


def conductor_for(
    base: str,
    config,
    device: str,
    *,
    temperature: float = 1.0,
    prompt_style: str | None = None,
    max_subtask_chars: int | None = None,
    max_steps_per_plan: int | None = None,
):
    """The conductor whose prompt and grammar the plans are sampled (GRPO) or scored (DPO) under."""
    from ..conductor.embedded import EmbeddedConductor
    from ..conductor.local import LocalConductor

    chars = max_subtask_chars or config.conductor.max_subtask_chars
    style = {"prompt_style": prompt_style} if prompt_style else {}
    # under the step limit the adapter is trained for, as it will plan (not the untrained model's cap)
    steps = max_steps_per_plan
    if base == "embedded":
        return EmbeddedConductor(max_subtask_chars=min(chars, 100), temperature=temperature, plan_steps=steps, **style)
    return LocalConductor(
        base,
        device=device,
        max_reasoning_tokens=config.conductor.max_reasoning_tokens,
        max_subtask_chars=chars,
        temperature=temperature,
        plan_steps=steps,
        **style,
    )


def load_for_training(base: str, device: str, seed: int, progress: Callable[[str], None]):
    """(model, tokenizer, base label, folder or id), seeded: the embedded model in fp32 on the CPU,
    or a local model in 4-bit nf4 on CUDA (QLoRA), or in fp32 on the CPU (small models, tests)."""
    import torch
    from transformers import AutoModelForCausalLM, set_seed

    from ..inference.checkpoints import check_model_source, load_tokenizer, quiet_libraries

    score_valid_positions_only()
    set_seed(seed)
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
    tokenizer = load_tokenizer(folder, local_only=False)  # as inference loads it (the embedded model's the fast way)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if device == "cuda" and base != "embedded":
        from peft import prepare_model_for_kbit_training
        from transformers import BitsAndBytesConfig

        quant = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
        # each data-parallel process on its own GPU
        local = int(os.environ.get("LOCAL_RANK", 0))
        model = AutoModelForCausalLM.from_pretrained(
            folder, quantization_config=quant, dtype=torch.bfloat16, device_map={"": local}
        )
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    else:
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        if device == "cuda":
            model = model.to("cuda")
    return model, tokenizer, label, folder


def score_valid_positions_only() -> bool:
    """Make TRL's fused LM head project only the positions that have a label, on every device.
    True when patched (now or before).

    GRPOTrainer and DPOTrainer install `trl.trainer.utils.add_fused_lm_head` on the model. Its
    forward projects only the labelled positions through the LM head where
    `trl.trainer.utils._use_triton(device)` holds (CUDA and XPU with Triton), and every position
    of the batch elsewhere, so that the tile shapes stay fixed for XLA (Neuron). On the CPU most
    of a batch is prompt, padding and what follows a plan's end, each projected through Gemma's
    262k-wide head forward and backward for nothing: the log-probabilities are the same either
    way (tests/test_train.py checks both).

    Why a private name is patched: TRL 1.16 has no public setting for this. GRPOConfig and
    DPOConfig have none, and the choice is made inside the forward TRL installs. For SFT's
    chunked loss TRL replaced the same gate with a packing that keeps shapes fixed on every
    device (huggingface/trl#6314, after #6262); the fused head GRPO and DPO use keeps it, and no
    TRL issue tracks that yet. In trl.trainer.utils the name decides only this (the kernel's own
    module keeps its own). Drop the patch when TRL compacts there, or offers a setting."""
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:
        return False
    original = getattr(trl_utils, "_use_triton", None)
    if original is None or getattr(original, "_stiva", False):
        return original is not None

    def compact_everywhere(device) -> bool:
        return True

    compact_everywhere._stiva = True  # type: ignore[attr-defined]
    compact_everywhere._original = original  # type: ignore[attr-defined]
    trl_utils._use_triton = compact_everywhere
    return True


# --- the output folder, its log and the stop ---------------------------------------------------


class TrainingRun:
    """One training's output folder: `checkpoints/`, `train_log.jsonl`, the adapter; the
    checkpoint it resumes from; why it stopped early (None: it ran its steps)."""

    def __init__(self, out: Path, checkpoints: Path, resume_from: str | None):
        self.out = out
        self.checkpoints = checkpoints
        self.resume_from = resume_from
        self.stopped: str | None = None

    @classmethod
    def open(cls, out_arg, resume: bool) -> "TrainingRun":
        """The output folder, made. TrainError when --resume finds no checkpoint to continue from."""
        return cls(*output_folder(out_arg, resume))

    @property
    def log_path(self) -> Path:
        return self.out / "train_log.jsonl"

    def start_log(self, resume: bool) -> None:
        """A new training starts a new log; a resumed one keeps the lines up to its checkpoint (the
        steps after it are done, and logged, again)."""
        if not is_main_process():
            return
        if not resume and self.log_path.exists():
            self.log_path.unlink()
        elif self.resume_from is not None:
            cut_log(self.log_path, checkpoint_step(Path(self.resume_from)))

    def log(self, line: dict[str, Any]) -> None:
        if not is_main_process():  # one line a step, not one per process
            return
        with self.log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def logged(self) -> list[dict]:
        return read_log(self.log_path)

    def callback(
        self,
        report_for: Callable[[int, dict, float], Any],
        on_step: Callable[[Any], None] | None,
        should_stop: Callable[[], str | None] | None,
        over_budget: Callable[[], str | None] | None = None,
    ):
        """The TrainerCallback: each step's report (`report_for(step, TRL's logs, seconds since the
        step began)`, which has `log_line()`) logged and handed to `on_step`; after each step, a
        clean stop (a checkpoint saved) when `should_stop` or `over_budget` gives a reason (the
        budget's, when both do)."""
        from transformers import TrainerCallback

        run = self
        started = {"step": time.monotonic()}

        class StivaCallback(TrainerCallback):
            """train_log.jsonl, the live view, and a clean stop (ctrl+c, the budget)."""

            def on_step_begin(self, args, train_state, control, **kwargs):
                started["step"] = time.monotonic()

            def on_log(self, args, train_state, control, logs=None, **kwargs):
                logs = logs or {}
                if "loss" not in logs:
                    return
                # every process calls report_for (it may gather the processes' figures); the main one logs
                report = report_for(int(train_state.global_step), logs, time.monotonic() - started["step"])
                run.log(report.log_line())
                if on_step is not None and is_main_process():
                    on_step(report)

            def on_step_end(self, args, train_state, control, **kwargs):
                reason = should_stop() if should_stop is not None else None
                reason = (over_budget() if over_budget is not None else None) or reason
                reason = agreed_stop(reason)  # every process stops after the same step
                if reason:
                    run.stopped = reason
                    control.should_training_stop = True
                    control.should_save = True

        return StivaCallback()

    def train(self, trainer) -> int:
        """Run TRL's `trainer` (from the checkpoint, when resuming) and save the adapter in the
        output folder; the global step it reached."""
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        for noisy in (PrinterCallback, ProgressCallback):  # stdout is the command's (--json)
            trainer.remove_callback(noisy)
        trainer.train(resume_from_checkpoint=self.resume_from)
        self._save_adapter(trainer)
        return int(trainer.state.global_step)

    def _save_adapter(self, trainer) -> None:
        """The adapter, saved by the main process. With several processes, each one's adapter is
        fingerprinted first: they must agree (data parallelism keeps one model), and
        distributed.json records it. Under DeepSpeed ZeRO-3 the weights are gathered first."""
        rank, world = process_rank()
        state = None
        if getattr(trainer, "is_deepspeed_enabled", False):
            state = trainer.accelerator.get_state_dict(trainer.model_wrapped)  # a collective (ZeRO-3 gathers)
        elif world > 1:
            from peft import get_peft_model_state_dict

            fingerprints = gathered(adapter_fingerprint(get_peft_model_state_dict(trainer.model)))
            if len(set(fingerprints)) > 1:
                raise TrainError(f"the {world} training processes ended with different adapters; nothing saved")
            if rank == 0:
                record = {"processes": world, "adapter_sha256": fingerprints}
                (self.out / "distributed.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if rank == 0:
            trainer.model.save_pretrained(str(self.out), **({"state_dict": state} if state is not None else {}))
        trainer.accelerator.wait_for_everyone()


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


def checkpoint_step(folder: Path) -> int:
    """The global step a checkpoint holds (its trainer_state.json, else its name, checkpoint-N)."""
    try:
        return int(json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return int(folder.name.rpartition("-")[2])


def cut_log(path: Path, step: int) -> None:
    """Keep the log's lines up to `step` (a new file renamed over the old one)."""
    if not path.exists():
        return
    kept = [line for line in read_log(path) if isinstance(line.get("step"), int) and line["step"] <= step]
    scratch = path.with_name(f".{path.name}.cut")
    scratch.write_text("".join(json.dumps(line) + "\n" for line in kept), encoding="utf-8")
    os.replace(scratch, path)


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines
