"""Learning and routing experiments on the simulated pool: `python -m benchmarks.experiments.NAME`
from the repository root; each saves its figures beside itself (docs/measurements.md lists them)."""
