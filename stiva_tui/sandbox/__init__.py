"""The one place untrusted code runs: model-written answers graded by `stiva bench`, rewards of
`stiva train`. OS isolation (bubblewrap on Linux, sandbox-exec on macOS), limits for the whole run,
and verdicts decided where the code cannot reach. Imports nothing of Stiva's.

- `settings`  — `SandboxSettings` (`[sandbox]` in the config) and `SandboxUnavailable`.
- `isolation` — the candidate bwraps, and the command line of one run.
- `detect`    — which isolation this machine has (each candidate probed once with a real run).
- `launch`    — starting one run and collecting it; the probe.
- `seccomp`   — the syscall filter bwrap installs.
- `runner`    — `run_code_async`, `run_functional_async`, `run_with_tests_async`.
- `_child`    — what runs inside: the supervisor, the harness, the value codec.
"""

from .detect import describe_isolation, find_isolation, forget_isolation
from .isolation import Isolation
from .launch import SandboxResult, remove_tree, run_sync
from .runner import (
    FunctionalOutcome,
    TestedResult,
    run_code,
    run_code_async,
    run_functional_async,
    run_with_tests_async,
)
from .settings import SandboxSettings, SandboxUnavailable

__all__ = [
    "FunctionalOutcome",
    "Isolation",
    "SandboxResult",
    "SandboxSettings",
    "SandboxUnavailable",
    "TestedResult",
    "describe_isolation",
    "find_isolation",
    "forget_isolation",
    "remove_tree",
    "run_code",
    "run_code_async",
    "run_functional_async",
    "run_sync",
    "run_with_tests_async",
]
