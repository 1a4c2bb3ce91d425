"""Loading a causal LM for local inference: a folder or an HF id, in 4-bit nf4 on the CPU or CUDA.

`load_model(spec, progress)` loads a model (optionally with a LoRA adapter on top) once per
process: later calls with the same spec share the same `LoadedModel`. Also here: the CUDA probe
with its free-memory check, and the size estimate `auto` uses to decide whether a GPU fits.

torch/transformers are imported inside the functions only.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .adapter_manifest import (  # noqa: F401 - ADAPTER_MARKER, adapter_base: still imported from here
    _FINGERPRINT,
    ADAPTER_MARKER,
    AdapterManifest,
    adapter_base,
    base_fingerprint,
    base_identity,
)
from .errors import ModelError
from .progress import Progress, forward_progress, report

TOKENIZER_CONFIG_LIMIT = 64 * 1024 * 1024  # bytes of a converted folder's tokenizer_config.json


def quiet_libraries() -> None:
    """Silence library chatter that says nothing a user can act on (call before importing them).

    bitsandbytes' CPU backend warns at import that the optional `kernels` package (which would
    fetch a kernel from the hub) is missing or could not fetch it; its own kernel is used
    instead, and that is fine. Since transformers 5.25 `kernels` is installed with it, and
    offline it warns that it skipped the hub's publisher check of the kernel it did not fetch.

    Where torchao is installed (the `fast` extra), transformers imports it with every model load
    (its quantizers' registry does), and torchao built for another torch says at import that its
    C++ extensions are skipped, and registers enums torch.compile now handles itself, which torch
    calls deprecated: two loggers, four lines on every `stiva ask`, nothing to act on.
    """
    import logging

    for name in ("bitsandbytes.backends.cpu.ops", "kernels", "torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import_bitsandbytes_without_hub_kernels()


# Stiva's own conversion of the embedded model marks its folder with this file (inference/embedded.py).
CONVERTED_MARKER = "stiva-converted.json"
# What a converted folder's tokenizer_config.json may say, and the tokenizer is built with.
_TOKENIZER_KWARGS = ("bos_token", "eos_token", "unk_token", "pad_token", "mask_token", "model_max_length")


def load_tokenizer(source: str, local_only: bool = True) -> Any:
    """The tokenizer of `source`, as AutoTokenizer gives it; for the embedded model's converted
    folder, the same tokenizer built straight from its tokenizer.json.

    For GemmaTokenizer transformers parses the 33 MB tokenizer.json in Python and rebuilds the
    Rust tokenizer from its 262k-token vocabulary: 2.7 s, holding the GIL for up to 0.8 s at a
    time, so the app froze while it loaded. tokenizers' own reader takes 1.1 s and lets the GIL go.
    A test checks the two agree on the whole vocabulary, the special tokens and every prompt kind
    Stiva writes (tests/test_fast_tokenizer.py)."""
    folder = Path(source)
    config_file = folder / "tokenizer_config.json"
    if (folder / CONVERTED_MARKER).is_file() and (folder / "tokenizer.json").is_file() and config_file.is_file():
        import json

        from transformers import PreTrainedTokenizerFast

        with config_file.open("rb") as f:
            text = f.read(TOKENIZER_CONFIG_LIMIT + 1)
        if len(text) > TOKENIZER_CONFIG_LIMIT:
            raise ModelError(f"{config_file}: more than {TOKENIZER_CONFIG_LIMIT:,} bytes, not a tokenizer's config")
        config = json.loads(text)
        if config.get("backend") == "tokenizers" and "chat_template" not in config:
            kwargs = {key: config[key] for key in _TOKENIZER_KWARGS if key in config}
            return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), **kwargs)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source, local_files_only=local_only)


_bnb_lock = threading.Lock()


def import_bitsandbytes_without_hub_kernels() -> None:
    """Import bitsandbytes with the `kernels` package hidden, so that its import asks no hub.

    On a CPU with AVX512-BF16 and `kernels` installed (transformers 5.25 brings it), bitsandbytes'
    CPU backend fetches a compiled kernel from the Hugging Face hub at import: a call to the
    network nobody asked for on every start (seconds where the network drops packets, and 4-bit
    code downloaded and run unannounced). Hidden, it uses the kernel it ships with, which does the
    same arithmetic. peft and transformers import bitsandbytes later and get this module.
    """
    import importlib.util
    import sys

    with _bnb_lock:
        if "bitsandbytes" in sys.modules or importlib.util.find_spec("bitsandbytes") is None:
            return
        missing = object()
        kernels = sys.modules.get("kernels", missing)
        sys.modules["kernels"] = None  # type: ignore[assignment]  # `from kernels import ...` fails
        try:
            import bitsandbytes  # noqa: F401
        except Exception:  # noqa: BLE001  (raised again where bitsandbytes is used, with its context)
            pass
        finally:
            if kernels is missing:
                sys.modules.pop("kernels", None)
            else:
                sys.modules["kernels"] = kernels


def offline() -> bool:
    return any(
        os.environ.get(v, "").strip() not in ("", "0", "false", "False")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


# transformers' loading is not thread-safe: it swaps process-wide state while it builds a model
# (the default dtype, patched init functions), and two loads at once can leave later models with
# parameters on the meta device. Every from_pretrained here runs under this one lock.
transformers_lock = threading.RLock()


# --- loading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    source: str  # HF id or folder
    device: str = "cpu"  # "cpu" | "cuda"
    adapter: str | None = None
    quantize: bool = True  # 4-bit, in the format `quant` names
    double_quant: bool = False
    # The compute dtype of nf4 ("bfloat16" on CUDA), or the dtype of the weights when not quantized.
    compute_dtype: str = "float32"
    label: str = ""  # what describe() shows as the model
    # Where this load starts on the progress bar: the embedded model's conversion comes first.
    progress_from: float = 0.0
    # The 4-bit format when `quantize`: "nf4" (bitsandbytes; QLoRA trains on it) or "int4"
    # (torchao's int4 weight-only: tinygemm on CUDA, its CPU layout elsewhere; `pip install 'stiva-tui[fast]'`).
    quant: str = "nf4"


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
            **({"converted_s": self.extras["converted_s"]} if "converted_s" in self.extras else {}),
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
        with transformers_lock:
            loaded = _load(spec, progress)
        _cache[spec] = loaded
        return loaded


def check_model_source(source: str) -> Path | None:
    """The folder of `source` when it is one; raises ModelError when it looks like a path
    that does not exist or a folder that is not a model."""
    path = Path(source).expanduser()
    looks_like_path = source.startswith(("/", ".", "~", "\\")) or source.count("/") > 1 or "\\" in source
    if path.exists():
        if not path.is_dir():
            raise ModelError(f"{path} is a file; point the conductor model at a model folder or an HF id")
        if not (path / "config.json").exists():
            raise ModelError(
                f"{path} is not a model folder (no config.json); point [conductor] model at a folder "
                "saved with save_pretrained, or at a Hugging Face id such as Qwen/Qwen2.5-7B-Instruct"
            )
        return path
    if looks_like_path:
        raise ModelError(
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
        raise ModelError(
            f"model {spec.source} is not in the local Hugging Face cache and the hub is offline; "
            f"download it with `hf download {spec.source}` or set [conductor] model to a folder"
        )
    quiet_libraries()
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    def at(share: float) -> float:
        return spec.progress_from + (1.0 - spec.progress_from) * share

    report(progress, at(0.05), f"reading the config of {spec.label or spec.source}")
    try:
        config = AutoConfig.from_pretrained(spec.source, local_files_only=local_only)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(
            f"cannot read the model config of {spec.source}: {exc}. Use a folder saved with "
            "save_pretrained or an HF id available offline."
        ) from exc
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ModelError(
            f"{spec.source} is a {config.model_type!r} model, not a causal language model; "
            "the conductor needs a text-generation (causal LM) model such as Qwen/Qwen2.5-7B-Instruct"
        )
    if spec.device == "cuda":
        _check_vram(spec, config)
    kwargs: dict[str, Any] = {"local_files_only": local_only}
    quantization = None
    if spec.quantize and spec.quant not in QUANT_LABELS:
        raise ModelError(f"unknown 4-bit format {spec.quant!r}; set [conductor] quant to nf4 or int4")
    torchao_int4 = spec.quantize and spec.quant == "int4"
    if torchao_int4:
        _import_torchao()  # a clear error before minutes of loading
        # torchao's int4 kernels (tinygemm on CUDA, the CPU layout) take bfloat16 activations
        kwargs["dtype"] = torch.bfloat16
        quantization = QUANT_LABELS["int4"]
    elif spec.quantize:
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
        quantization = DTYPE_LABELS.get(spec.compute_dtype, spec.compute_dtype)
    # int4: loaded in bf16 on the CPU, then each layer quantized on its way to the GPU (which
    # then holds the 4-bit weights only)
    kwargs["device_map"] = "cpu" if spec.device == "cpu" or torchao_int4 else {"": 0}
    lo, hi = at(0.1), at(0.94)
    label = spec.label or spec.source
    how = f"in 4-bit {quantization}" if spec.quantize else f"in {spec.compute_dtype}"
    report(progress, lo, f"loading {label} {how} on {spec.device}")
    try:
        tokenizer = load_tokenizer(spec.source, local_only)
        with forward_progress(progress, lo, hi, label):
            model = AutoModelForCausalLM.from_pretrained(spec.source, **kwargs)
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001
        _release_cuda(spec.device)
        raise ModelError(_load_failure(spec, exc)) from exc
    if spec.adapter:
        report(progress, at(0.95), f"applying the LoRA adapter {spec.adapter}")
        try:
            model = _apply_adapter(model, spec.adapter, spec.source)
        except ModelError:
            del model
            _release_cuda(spec.device)
            raise
    if torchao_int4:
        report(progress, at(0.96), f"quantizing {label} to int4 (torchao)")
        try:
            quantization = quantize_int4(model, spec.device)
        except Exception as exc:  # noqa: BLE001
            del model
            _release_cuda(spec.device)
            raise ModelError(
                f"cannot quantize {spec.source} to int4 with torchao: {type(exc).__name__}: {exc}"
            ) from exc
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    memory = _memory_bytes(model, spec.device)
    elapsed = time.monotonic() - start
    report(progress, 1.0, f"{spec.label or spec.source} ready in {elapsed:.1f} s")
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        spec=spec,
        device=spec.device,
        quantization=quantization,
        load_s=elapsed,
        memory_bytes=memory,
    )


# What describe() shows as the format of a model kept in a plain dtype.
DTYPE_LABELS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
# ... and of a 4-bit one (ModelSpec.quant).
QUANT_LABELS = {"nf4": "nf4", "int4": "int4 (torchao)"}


def _import_torchao() -> Any:
    """torchao, quietly, or a ModelError saying how to get it."""
    import logging

    # its import warns that the C++ extensions of a torchao built for another torch are skipped:
    # the int4 kernels used here are torch's own (aten._weight_int4pack_mm*)
    logging.getLogger("torchao").setLevel(logging.ERROR)
    try:
        import torchao
    except ImportError as exc:
        raise ModelError(
            "the int4 format needs torchao: pip install 'stiva-tui[fast]', or set [conductor] quant = \"nf4\""
        ) from exc
    return torchao


def cpu_int4_config(group: int = 32) -> Any:
    """torchao's int4 weight-only config for the CPU (torchao 0.15's CPU layout), or None where
    this torchao has none (0.16 and later)."""
    import warnings

    from torchao.quantization import Int4WeightOnlyConfig

    try:
        from torchao.dtypes import Int4CPULayout

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Int4WeightOnlyConfig(group_size=group, layout=Int4CPULayout(), version=1)
    except (ImportError, TypeError):
        return None


def quantize_int4(model: Any, device: str) -> str:
    """Quantize `model`'s linear layers (LoRA's own excepted) in place to torchao's int4
    weight-only format: tinygemm's tile-packed layout on CUDA. On the CPU, torchao 0.15's CPU int4
    layout where it has one; torchao >= 0.16 has no CPU int4 kernel, so there int8 weight-only
    stands in (the same code path, tested on the CPU). Layers whose width no group size divides stay
    as they are. Returns the format's label ("int4 (torchao)", or "int8 (torchao)" for the stand-in)."""
    import warnings

    import torch

    _import_torchao()
    from torchao.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_

    cuda = device == "cuda"

    def eligible(module: Any, name: str) -> bool:
        return isinstance(module, torch.nn.Linear) and "lora_" not in name and module.out_features % 8 == 0

    widths = [m.in_features for n, m in model.named_modules() if eligible(m, n)]
    # tinygemm packs the input dimension in tiles of 128; the CPU layout takes any group size
    sizes = (128,) if cuda else (128, 64, 32)
    group = next((g for g in sizes if widths and all(w % g == 0 for w in widths)), None)
    if group is None:
        group = sizes[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchao's deprecation notes on the CPU layout's config version
        label = QUANT_LABELS["int4"]
        if cuda:
            config: Any = Int4WeightOnlyConfig(group_size=group, int4_packing_format="tile_packed_to_4d")
        else:
            config = cpu_int4_config(group)
            if config is None:
                config, label = Int8WeightOnlyConfig(), "int8 (torchao)"
        done: list[str] = []

        def chosen(module: Any, name: str) -> bool:
            ok = eligible(module, name) and module.in_features % group == 0
            if ok:
                done.append(name)
            return ok

        quantize_(model, config, filter_fn=chosen, device="cuda" if cuda else None)
    if cuda:
        model.to("cuda")  # the rest: embeddings, norms
    if not done:
        raise ValueError("no linear layer has a width torchao's int4 groups divide")
    return label


def _load_failure(spec: ModelSpec, exc: Exception) -> str:
    """What went wrong loading `spec`, and what to do about it."""
    text = f"{type(exc).__name__}: {exc}"
    lowered = text.lower()
    if "out of memory" in lowered:
        return (
            f"{spec.source} did not fit in GPU memory ({text.splitlines()[0][:200]}); free the GPU, "
            'choose a smaller [conductor] model, or use backend = "embedded"'
        )
    if "bitsandbytes" in lowered or "bnb" in lowered:
        return (
            f"cannot load {spec.source} in 4-bit: {text[:300]}. Check that bitsandbytes supports this "
            'machine (`python -m bitsandbytes`), or use backend = "embedded"'
        )
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


def _apply_adapter(model: Any, adapter: str, source: str = "") -> Any:
    path = Path(adapter).expanduser()
    if not (path / "adapter_config.json").exists():
        raise ModelError(
            f"LoRA adapter {path} not found (no adapter_config.json); set [conductor] adapter to a "
            "folder saved by peft's save_pretrained, or remove it"
        )
    _check_adapter_base(model, path, source)
    try:
        from peft import PeftModel

        return PeftModel.from_pretrained(model, str(path), is_trainable=False)
    except Exception as exc:  # noqa: BLE001
        text = f"{type(exc).__name__}: {exc}"
        if "size mismatch" in text:
            raise ModelError(
                f"the LoRA adapter {path} was trained on another base model (its shapes do not fit "
                f"this one); use it with the model it was trained on, or train one for this model"
            ) from exc
        raise ModelError(f"cannot apply the LoRA adapter {path}: {text[:500]}") from exc


def _check_adapter_base(model: Any, path: Path, source: str = "") -> None:
    """Refuse an adapter `stiva train` made for another base: by the base's identity (its
    weights) and, failing that, by its shapes."""
    trained = AdapterManifest.read(path)
    if trained is None:
        return
    if trained.identity and source and trained.identity != base_identity(source):
        raise ModelError(
            f"the LoRA adapter {path} was trained on {trained.name}, not on "
            f"{source}; use it with the model it was trained on, or train one for this model"
        )
    here = base_fingerprint(getattr(model, "config", None))
    there = trained.fingerprint
    differ = [key for key in _FINGERPRINT if there.get(key) is not None and there.get(key) != here.get(key)]
    if differ:
        raise ModelError(
            f"the LoRA adapter {path} was trained on {trained.name} "
            f"({', '.join(f'{k} {there[k]}' for k in differ)}), not on this model ("
            f"{', '.join(f'{k} {here[k]}' for k in differ)}); use it with its base or train one for this model"
        )


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


# Device files of a GPU driver torch.cuda can use (NVIDIA, NVIDIA under WSL, AMD ROCm).
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg", "/dev/kfd", "/proc/driver/nvidia")


def no_gpu_driver() -> bool:
    """True where no GPU driver is there at all (Linux without its device files, macOS): torch,
    a second and a few hundred MB to import, is then not imported to find that out."""
    if sys.platform == "darwin":
        return True
    return sys.platform.startswith("linux") and not any(os.path.exists(p) for p in GPU_DEVICE_FILES)


def free_cuda_bytes() -> int | None:
    """Free memory of CUDA device 0 in bytes; None when there is no usable CUDA GPU."""
    if no_gpu_driver():
        return None
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
        raise ModelError('the local backend needs a CUDA GPU; none is available (use backend = "embedded")')
    need = estimate_4bit_bytes(config) * 1.15 + 1.5 * 2**30  # weights + KV cache and workspace
    if need > free:
        raise ModelError(
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
