"""The `stiva` command: one module per command.

    stiva                      open the terminal app
    stiva ask QUESTION         plan, run and print the answer (live view on stderr; --json trace)   ask.py
    stiva models [--json]      the pool, availability, prices and the conductor choice              models.py
    stiva history [show ID]    the stored runs and conversations                                    history.py
    stiva bench SUITE          measure systems on a suite                                           bench.py
    stiva train METHOD ...     teach the conductor: grpo SUITE, dpo (the votes), graded SUITE       train.py
    stiva votes                the compare-mode votes and the pairs they give                       votes.py
    stiva config [--edit]      create, print and open the config file                               config_cmd.py
    stiva serve                an OpenAI-compatible API over the same engine                        serve.py

main.py builds the parser from each command's and dispatches; common.py holds the exit codes, the
one-line failure and the signal handling; view.py draws the live views. Exit code 0 on success;
otherwise non-zero with a one-line reason on stderr.

`main` here is the function, as `unittest.main` is; the module is sys.modules["stiva_tui.cli.main"].
"""

from .common import (  # the exit codes are the command's interface
    EXIT_BROKEN_PIPE,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from .main import PRESET_NAMES, build_parser, entry, main, parse_args

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "PRESET_NAMES",
    "build_parser",
    "entry",
    "main",
    "parse_args",
]
