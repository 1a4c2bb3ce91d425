"""Evals: question suites, the public formats they load from, and the graders that judge answers.

- `suite`    — the item format (`SuiteItem`, `Suite`), reading a JSONL suite, `question_text`.
- `loaders`  — `load_suite` by built-in name, path or public format (AIME, MATH-500, GPQA,
  LiveCodeBench); the built-ins are the `*.jsonl` files in `data/`.
- `graders`  — `grade` / `grade_async`: whether an answer is right, and what was taken from it.
- `numbers`  — reading numbers in text, shared by the suite model and the graders.

Arrows run one way: loaders -> suite -> numbers, graders -> suite, numbers and the sandbox
(`stiva_tui.sandbox`, shared with `stiva train`). Nothing here imports the runtime, the store, the
bench runner, Textual or torch; the runner (`stiva_tui.bench`), the simulated pool
(`stiva_tui.sim`) and training (`stiva_tui.train`) build on it. This file imports nothing at all,
so `stiva --help` stays fast: import the submodule you need.
"""
