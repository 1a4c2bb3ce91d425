"""Perf scripts and experiments: run each from the repository root as `python -m benchmarks.NAME`."""
