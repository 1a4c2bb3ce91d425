"""Where does a 7B conductor's decode time go on the GPU? (run by hand on the GPU machine; prints JSON)

    python3 -m benchmarks.perf.decode_gpu --out decode.json        # Qwen2.5-7B shape, random weights, CUDA
    python3 -m benchmarks.perf.decode_gpu --shape tiny --device cpu # the same code path, a smoke run

benchmarks/perf/conductor.py --cuda measured the real `local` backend (nf4 through bitsandbytes, HF
generate) at 29 tokens/s in plans against a target of 60. This separates the causes, plain greedy
decoding of 128 tokens with no streamer and no grammar, each after a warm-up:
  - bf16: the unquantized model (the memory-bound ceiling of HF's eager decode loop);
  - nf4: the same weights through bitsandbytes, as the local backend loads them;
  - nf4 + static cache + torch.compile (HF generate's own compile path), if it works at all.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.harness import machine, save_json
from benchmarks.perf.conductor import built_random_model


def decode_speed(model, ids, tokens: int, **kwargs) -> dict:
    """Greedy tokens/s over `tokens` new tokens (prefill included: one 50-token prompt), after a
    warm-up of the same length (a static cache is sized by the length, so it compiles once)."""
    import torch

    def once(n):
        if ids.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.monotonic()
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            **kwargs,
        )
        if ids.device.type == "cuda":
            torch.cuda.synchronize()
        return time.monotonic() - start, out.shape[1] - ids.shape[1]

    warm_s, _ = once(tokens)
    runs = [once(tokens) for _ in range(2)]
    seconds, n = min(runs)
    return {
        "warmup_s": round(warm_s, 2),
        "tokens": n,
        "tokens_per_s": round(n / seconds, 2),
        "seconds": round(seconds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="qwen2.5-7b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--workdir", default="/tmp/stiva-gpu-bench")
    parser.add_argument("--out")
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    cuda = args.device == "cuda"
    folder = Path(args.workdir) / f"{args.shape}-random"
    result: dict = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "machine": machine(),
        "shape": args.shape,
        "torch": torch.__version__,
    }

    def record(name, fn):
        try:
            result[name] = fn()
        except Exception as exc:  # noqa: BLE001 - each variant is reported, not fatal
            result[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        print(name, json.dumps(result[name]), flush=True)

    built_random_model(folder, args.shape, args.device)
    prompt = list(range(10, 60))
    ids = torch.tensor([prompt], device=args.device)
    dtype = torch.bfloat16 if cuda else torch.float32

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, device_map=args.device)
    record("bf16_eager", lambda: decode_speed(model, ids, args.tokens))
    del model
    if cuda:
        torch.cuda.empty_cache()
    quant = BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype
    )
    model = AutoModelForCausalLM.from_pretrained(
        str(folder), quantization_config=quant, dtype=dtype, device_map=args.device
    )
    record("nf4_eager", lambda: decode_speed(model, ids, args.tokens))
    if cuda:
        record("nf4_static_compile", lambda: decode_speed(model, ids, args.tokens, cache_implementation="static"))
    result["when"] = time.strftime("%Y-%m-%d %H:%M:%S")
    print(json.dumps(result, indent=2))
    if args.out:
        print(f"saved {save_json(args.out, result)}")


if __name__ == "__main__":
    main()
