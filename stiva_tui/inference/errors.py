"""The one error of local inference."""

from __future__ import annotations


class ModelError(Exception):
    """A local model cannot be loaded or run; the message says why and what to do."""
