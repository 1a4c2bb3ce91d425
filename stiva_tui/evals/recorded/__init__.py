"""Recorded answers of real models (`stiva bench import`): Stiva's own `records` format, RouterBench's
wide CSV and ZeroEval's `result_dirs`, each read into one list of `RecordedRow`s.

Pure parsing: no store, no runtime (the bench layer writes what is read here into a suite and a bench).
"""

from .errors import RecordsError

__all__ = ["RecordsError"]
