"""Helpers shared by the tests and the benchmarks: import them as `tests.support.X` from the repository
root (pytest's `pythonpath`, or `python -m benchmarks.perf.X`).

- `fakeprovider`: a real OpenAI-wire provider on 127.0.0.1, scripted per model
- `model_builders`: tiny random-weight conductors, built locally (no hub)
- `cli`: `stiva()`, the real command in a subprocess
- `tui`, `tui_screens`: configs, demo events and waits for the Textual apps
- `train`: a stub trainer for the training scaffolding
- `warm`: the pool and config the warm worker's tests ask
"""
