"""`python -m stiva_tui.cli ...` is `stiva ...` (as `accelerate launch -m stiva_tui.cli train ...` runs it)."""

from .main import entry

if __name__ == "__main__":
    entry()
