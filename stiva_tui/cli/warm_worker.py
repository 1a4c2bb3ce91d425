"""The warm worker's process (`python -m stiva_tui.cli.warm_worker ...`, started by `stiva ask`):
warm.py's Worker, running ask.py's own ask. See warm.py."""

from __future__ import annotations

import sys

from .ask import _history_trouble, answer
from .warm import main

if __name__ == "__main__":
    sys.exit(main(answer, _history_trouble))
