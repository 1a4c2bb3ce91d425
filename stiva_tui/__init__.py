"""Stiva: a conductor model orchestrates a pool of language models, in the terminal."""

__version__ = "0.1.0"
