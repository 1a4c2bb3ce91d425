"""Speed, latency and memory: `python -m benchmarks.perf.NAME` from the repository root; each script
saves its figures beside itself as NAME.json (docs/measurements.md lists them)."""
