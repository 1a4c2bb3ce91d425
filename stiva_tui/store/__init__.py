"""SQLite history of conversations, runs (with full traces) and compare sessions.

`Store` reads and manages the history; `Recorder(store)` is the engine subscriber that writes runs.
"""

from .db import NotFoundError, Store, StoreError
from .errors import CorruptError, DiskFullError, HistoryFault, ReadOnlyError
from .recorder import Recorder
from .records import (
    BenchItemRecord,
    BenchRecord,
    CompareEntry,
    CompareSession,
    CompareSummary,
    Conversation,
    ConversationSummary,
    LeaderboardRow,
    MessageRecord,
    RunSummary,
)

__all__ = [
    "Store",
    "StoreError",
    "NotFoundError",
    "Recorder",
    "HistoryFault",
    "DiskFullError",
    "ReadOnlyError",
    "CorruptError",
    "Conversation",
    "ConversationSummary",
    "MessageRecord",
    "RunSummary",
    "CompareEntry",
    "CompareSession",
    "CompareSummary",
    "LeaderboardRow",
    "BenchRecord",
    "BenchItemRecord",
]
