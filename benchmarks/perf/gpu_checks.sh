#!/usr/bin/env bash
# The GPU checks in one run, for the lent GPU machine (../shared/gpu/README.md): the 7B-shaped random
# model is built once and read by all three checks.
#
#   bash benchmarks/perf/gpu_checks.sh           # on the GPU machine (device tool; carry .whl)
#   bash benchmarks/perf/gpu_checks.sh --tiny    # the same steps on the CPU with a tiny random model, nothing saved
#
# 1. benchmarks/perf/conductor.py --cuda: the real `local` backend in nf4: tokens/s, VRAM, 5-step plans;
# 1b. conductor.py --fast-paths (issue 44): nf4 through generate(), and Stiva's own loop (inference/decode.py)
#    with a static cache + torch.compile (CUDA graphs) and jump-forward, and torchao int4 the same way: per
#    path decode tokens/s, a 5-step plan's time with the prompt's prefix cached, the mask's CPU ms per token,
#    the forced tokens' share; appended (with the date) to conductor.json's fast_paths_runs. HQQ: not built.
#    Its wheel: torchao 0.16 (`pip download torchao==0.16.0 --no-deps -d .whl`, 7 MB; tinygemm is torch's
#    own int4 kernel; not 0.15: peft refuses to build LoRA layers beside it, which breaks step 3).
#    FAST_PATHS_S sets its time limit (300 s); ONLY_FAST=1 stops after it (1b alone fits one 10-minute call).
# 2. `stiva ask` with `--conductor local:<that model>` over the simulated pool (served on 127.0.0.1):
#    the whole product path, the conductor on the GPU in 4-bit, as a user runs it;
# 3. benchmarks/perf/train.py --cuda: GRPO steps, QLoRA, group 8.
# Wheels: `bash ../shared/gpu/wheels.sh`, then the ones it lacks (xgrammar's tvm_ffi, the ASGI stack the
# simulated pool is served with, and aiohttp, the pool's upstream client), pinned to the .venv's versions, e.g.:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     apache-tvm-ffi==0.1.15.post2 fastapi==0.165.0 starlette==1.10.0 uvicorn==0.55.0 opentelemetry-api==1.45.2 \
#     annotated-doc==0.0.7 aiohttp==3.14.5 multidict==7.2.1 yarl==1.25.1 frozenlist==1.8.0 aiosignal==1.4.0 \
#     propcache==0.5.4 aiohappyeyeballs==2.7.1 attrs==26.1.0
# Each check runs even if one before it failed, under a time limit that keeps the whole under 10 minutes; logs and figures go to $OUT (what the device tool
# brings back), the figures also to benchmarks/perf/*.json of the copy it ran in.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root: the scripts run as modules from there
OUT=${OUT:-/tmp/gpu-checks}
mkdir -p "$OUT"
tiny=0
[ "${1:-}" = "--tiny" ] && tiny=1
PY=${PY:-python3}
if [ -d .whl ] && [ "$tiny" = 0 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheels did not install"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export STIVA_HOME=${STIVA_HOME:-/tmp/stiva-gpu-home}
work=${WORK:-/tmp/stiva-gpu-bench}
mkdir -p "$work"
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
  $PY -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
  $PY -c "from importlib.metadata import version as v; print(*(f'{n} {v(n)}' for n in ('bitsandbytes', 'trl', 'peft', 'xgrammar', 'accelerate')))"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [ "$tiny" = 1 ]; then
  # the local backend needs CUDA; on the CPU the ask runs the embedded conductor over the same pool
  shape=tiny; conductor=embedded
  conductor_args=(--random tiny --device cpu --no-save --runs 2 --workdir "$work")
  fast_args=(--random tiny --device cpu --no-save --runs 2 --workdir "$work")
  train_args=(--steps 2 --no-save)
else
  shape=qwen2.5-7b; conductor="local:$work/qwen2.5-7b-random"
  conductor_args=(--cuda --workdir "$work")
  fast_args=(--cuda --runs 3 --workdir "$work")
  train_args=(--cuda --workdir "$work")
fi

echo "== 1. conductor.py ($shape)"
t0=$SECONDS
timeout 210 $PY -m benchmarks.perf.conductor "${conductor_args[@]}" > "$OUT/conductor.log" 2>&1
echo "rc=$? in $((SECONDS - t0)) s" >> "$OUT/conductor.log"
tail -5 "$OUT/conductor.log"

echo "== 1b. fast paths (issue 44): nf4/int4 x generate()/own loop/static+compile, jump-forward, grammar on"
t0=$SECONDS
# every path writes its figures to $OUT/fast_paths.json as it ends: a run cut short keeps them
timeout "${FAST_PATHS_S:-300}" $PY -m benchmarks.perf.conductor --fast-paths "${fast_args[@]}" --out-dir "$OUT" \
  > "$OUT/fast_paths.log" 2>&1
echo "rc=$? in $((SECONDS - t0)) s" >> "$OUT/fast_paths.log"
grep -E '^(nf4|int4) ' "$OUT/fast_paths.log" | cut -c1-400
tail -2 "$OUT/fast_paths.log"
if [ "${ONLY_FAST:-0}" = 1 ]; then  # the fast paths alone (they and the other steps do not fit one 10-minute call)
  [ "$tiny" = 0 ] && cp benchmarks/perf/conductor.json "$OUT/"
  exit 0
fi

echo "== 2. stiva ask --conductor $conductor --pool sim"
t0=$SECONDS
# a question of the skills suite, so the simulated pool answers it rather than saying it cannot tell
timeout 120 $PY -c 'import sys; sys.argv[0] = "stiva"; from stiva_tui.cli import entry; entry()' \
  --pool sim --conductor "$conductor" ask --json --max-steps 3 \
  "What is 30 × 43? Check the arithmetic." > "$OUT/ask.json" 2> "$OUT/ask.log"
echo "rc=$? in $((SECONDS - t0)) s" >> "$OUT/ask.log"
tail -5 "$OUT/ask.log"
head -c 600 "$OUT/ask.json"; echo

echo "== 3. train.py"
t0=$SECONDS
timeout 210 $PY -m benchmarks.perf.train "${train_args[@]}" > "$OUT/train.log" 2>&1
echo "rc=$? in $((SECONDS - t0)) s" >> "$OUT/train.log"
tail -5 "$OUT/train.log"

[ "$tiny" = 0 ] && cp benchmarks/perf/conductor.json benchmarks/perf/train.json "$OUT/"
exit 0
