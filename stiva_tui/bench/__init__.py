"""`stiva bench`: run systems on a suite, and report on it.

- `runner`   — `BenchRunner`: every item on every system, resumable, graded as it goes.
- `limiter`  — how many calls a provider gets at once, and backing off on 429s.
- `systems`  — the pool-dependent half of the system names (`direct:*`, `self-moa`'s model, what
  `oracle` and `random` need); the names themselves are `stiva_tui.runtime.systems`.
- `derived`  — `oracle` and `random`, computed from the `direct:` runs, and the AIQ frontier.
- `report`   — `BenchReport`, the one typed report the CLI, the Markdown writer and the TUI read.
- `replay`   — `--pool replay:BENCH_ID`: a bench's answers read from the history for the simulated pool.

The suites, the public formats and the graders are `stiva_tui.evals`. Nothing here imports
Textual or torch, and this file imports nothing at all, so `stiva --help` stays fast; import the
submodule you need.
"""
