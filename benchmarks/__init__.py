"""Perf scripts (`benchmarks/perf/`) and experiments (`benchmarks/experiments/`), with one harness
(`benchmarks/harness.py`): run each from the repository root as `python -m benchmarks.perf.NAME` or
`python -m benchmarks.experiments.NAME`."""
