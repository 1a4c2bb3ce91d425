"""Conversations and their messages. Part of `Store` (see db.py).

A conversation's runs are linked by `runs.conversation_id` (the recorder writes it from
`RunStarted`); its messages are what the front end chose to keep as the dialogue. Deleting a
conversation deletes its messages but keeps its runs, unlinked, for the run history. Rewinding one
(a regenerated answer, an edited question) does the same to the turns from a question on.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable
from typing import Any

from ..core.words import CONVERSATION_KINDS, ConversationKind
from .errors import NotFoundError, StoreError
from .part import StorePart
from .records import Conversation, ConversationSummary, MessageRecord
from .schema import require_row, timestamp

__all__ = ["Conversations"]


class Conversations(StorePart):
    """The conversation part of `Store`."""

    def create_conversation(self, title: str, kind: ConversationKind = "chat") -> str:
        """Create a conversation and return its id (a uuid). An unknown kind raises StoreError."""
        cid = str(uuid.uuid4())
        now = timestamp()
        with self.transaction() as c:
            c.execute(
                "INSERT INTO conversations (id, title, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (cid, title or "", kind, now, now),
            )
        return cid

    def rename_conversation(self, conversation_id: str, title: str) -> None:
        """Change a conversation's title (NotFoundError for an unknown id)."""
        with self.transaction() as c:
            cur = c.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))
            if cur.rowcount == 0:
                raise NotFoundError(f"no conversation {conversation_id}")

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation with its messages; its runs stay, unlinked (an unknown id is no error)."""
        with self.transaction() as c:
            c.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def rewind_conversation(self, conversation_id: str, question: int) -> int:
        """Take question number `question` (0-based, counting the user's messages) and every later
        message out of the conversation, so that it can be asked anew; their runs stay in the run
        history, unlinked, as a deleted conversation's do. Returns how many messages went (0 when it
        has fewer questions); NotFoundError for an unknown conversation."""
        with self.transaction() as c:
            require_row(c, "conversations", conversation_id, "conversation")
            if question < 0:
                return 0
            row = c.execute(
                "SELECT seq FROM messages WHERE conversation_id = ? AND role = 'user' ORDER BY seq LIMIT 1 OFFSET ?",
                (conversation_id, int(question)),
            ).fetchone()
            if row is None:
                return 0
            c.execute(
                """UPDATE runs SET conversation_id = NULL WHERE conversation_id = ? AND id IN
                   (SELECT run_id FROM messages WHERE conversation_id = ? AND seq >= ? AND run_id IS NOT NULL)""",
                (conversation_id, conversation_id, row[0]),
            )
            gone = c.execute(
                "DELETE FROM messages WHERE conversation_id = ? AND seq >= ?", (conversation_id, row[0])
            ).rowcount
            c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (timestamp(), conversation_id))
            return gone

    def add_message(self, conversation_id: str, role: str, content: str, run_id: str | None = None) -> int:
        """Append a message and return its sequence number (0-based); NotFoundError for an unknown
        conversation. `run_id` may name a run not written yet."""
        with self.transaction() as c:
            return _append_message(c, conversation_id, role, content, run_id)

    # --- queued: what a run's session writes while the run goes (see writer.py) ----------------

    def start_conversation_later(
        self, title: str, kind: ConversationKind, messages: Iterable[tuple[str, str, str | None]] = ()
    ) -> str:
        """Queue a new conversation with its first (role, content, run_id) messages and return
        its id at once, so that a run can name it before it is written. An unknown kind raises
        StoreError now; a failure while writing is kept for `take_write_error()`."""
        if kind not in CONVERSATION_KINDS:
            raise StoreError(f"unknown conversation kind {kind!r} (known: {', '.join(CONVERSATION_KINDS)})")
        cid = str(uuid.uuid4())
        now = timestamp()
        messages = list(messages)

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO conversations (id, title, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (cid, title or "", kind, now, now),
            )
            for role, content, run_id in messages:
                _append_message(c, cid, role, content, run_id)

        self.write_later(write)
        return cid

    def add_message_later(self, conversation_id: str, role: str, content: str, run_id: str | None = None) -> None:
        """Queue `add_message` (an unknown conversation is then a write failure, kept for
        `take_write_error()`)."""

        def write(c: sqlite3.Connection) -> None:
            _append_message(c, conversation_id, role, content, run_id)

        self.write_later(write)

    def holds_run(self, conversation_id: str, run_id: str) -> bool:
        """Whether the conversation is on disk with the messages of `run_id` and the run itself
        (what `stiva ask --continue` needs before it offers the id). Writes queued are written first."""
        row = self.query_one(
            "SELECT 1 FROM messages m JOIN runs r ON r.id = m.run_id"
            " WHERE m.conversation_id = ? AND m.run_id = ? AND r.conversation_id = m.conversation_id LIMIT 1",
            (conversation_id, run_id),
        )
        return row is not None

    def list_conversations(self, search: str | None = None, limit: int = 200) -> list[ConversationSummary]:
        """Conversations by latest activity, newest first. `search` is a plain substring (no
        wildcards, any case) matched in the title, the messages and the runs' questions and answers."""
        where, params = _search_clause(search)
        rows = self.query(
            f"""
            SELECT c.id, c.title, c.kind, c.created_at, c.updated_at,
                   (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count,
                   (SELECT COUNT(*) FROM runs r WHERE r.conversation_id = c.id) AS run_count,
                   (SELECT r.status FROM runs r WHERE r.conversation_id = c.id
                    ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1) AS last_status
            FROM conversations c {where}
            ORDER BY c.updated_at DESC, c.rowid DESC
            LIMIT ?
            """,
            (*params, int(limit)),
        )
        return [ConversationSummary(**dict(r)) for r in rows]

    def resolve_conversation(self, text: str) -> str:
        """The whole id of the conversation `text` names: its id, or a unique start of it (4
        characters or more, any case), as `history show` takes them. NotFoundError says why
        otherwise, in one line: nothing starts so, several ids do, or it is a run's id."""
        key = text.strip().lower()
        where = "(stiva history conversations lists them)"
        if len(key) < 4 or any(c not in "0123456789abcdef-" for c in key):
            raise NotFoundError(f"no conversation {text} in the history: give its id, or 4 characters or more of it")
        bounds = (key, key + "\U0010ffff")
        found = [r["id"] for r in self.query("SELECT id FROM conversations WHERE id >= ? AND id < ? LIMIT 6", bounds)]
        if key in found:
            return key
        if len(found) > 1:
            raise NotFoundError(
                f"{text} is the start of several conversations' ids ({', '.join(found[:5])}…): give more"
            )
        if found:
            return str(found[0])
        if self.query_one("SELECT id FROM runs WHERE id >= ? AND id < ? LIMIT 1", bounds) is not None:
            raise NotFoundError(f"{text} is a run, not a conversation {where}")
        raise NotFoundError(f"no conversation {text} in the history {where}")

    def get_conversation(self, conversation_id: str) -> Conversation:
        """The conversation with its messages in order and every run's trace (oldest first), read as
        one consistent snapshot. NotFoundError for an unknown id."""
        with self.snapshot():
            row = self.query_one(
                "SELECT id, title, kind, created_at, updated_at FROM conversations WHERE id = ?", (conversation_id,)
            )
            if row is None:
                raise NotFoundError(f"no conversation {conversation_id}")
            messages = self.query(
                "SELECT seq, role, content, run_id, created_at FROM messages WHERE conversation_id = ? ORDER BY seq",
                (conversation_id,),
            )
            run_ids = self.query(
                "SELECT id FROM runs WHERE conversation_id = ? ORDER BY created_at, rowid", (conversation_id,)
            )
            runs = [self.get_trace(r["id"]) for r in run_ids]
        return Conversation(**dict(row), messages=[MessageRecord(**dict(m)) for m in messages], runs=runs)


def _search_clause(search: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause of a conversation search. `instr` on case-folded text, not LIKE: a user's
    '%' or '_' is a character, not a wildcard, and 'ÄRGER' matches 'ärger'."""
    if not search or not search.strip():
        return "", []
    needle = search.strip().casefold()
    where = """
    WHERE instr(stiva_fold(c.title), ?) > 0
       OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id
                  AND instr(stiva_fold(m.content), ?) > 0)
       OR EXISTS (SELECT 1 FROM runs r WHERE r.conversation_id = c.id
                  AND (instr(stiva_fold(r.question), ?) > 0
                       OR instr(stiva_fold(COALESCE(r.answer, '')), ?) > 0))
    """
    return where, [needle] * 4


def _append_message(c: sqlite3.Connection, conversation_id: str, role: str, content: str, run_id: str | None) -> int:
    """Add a message at the end of its conversation (inside the caller's transaction); its seq."""
    now = timestamp()
    require_row(c, "conversations", conversation_id, "conversation")
    seq: int = c.execute(
        "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()[0]
    c.execute(
        "INSERT INTO messages (conversation_id, seq, role, content, run_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (conversation_id, seq, role, content, run_id, now),
    )
    c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
    return seq
