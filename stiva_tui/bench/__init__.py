"""`stiva bench`: question suites, their graders, and the sandbox that runs answered code.

The layer below the bench runner, split by job:

- `suite`    — the suite format (`SuiteItem`, `Suite`), `load_suite`, built-ins, `question_text`.
- `loaders`  — public benchmark formats (AIME, MATH-500, GPQA, LiveCodeBench) turned into suites.
- `graders`  — `grade` / `grade_async`: whether an answer is right, and what was extracted from it.
- the code sandbox lives in `stiva_tui.sandbox` (shared with `stiva train`).

Nothing here imports Textual or torch, and this file imports nothing at all, so `stiva --help`
stays fast; import the submodule you need.
"""
