"""Compare sessions: several systems answer one question side by side, the user votes for one,
and the leaderboard sums the votes. A vote names a winner, or is a tie, or says every answer was
wrong (`VoteKind`). Part of `Store` (see db.py).

An entry's `run_id` is a loose reference: the compare screen may add the entry before the run's
first event is written, and a deleted run leaves its entry (with no trace) behind.
"""

from __future__ import annotations

import uuid

from ..core.words import VOTE_KINDS, VoteKind
from .errors import NotFoundError, StoreError
from .part import StorePart
from .records import CompareEntry, CompareSession, CompareSummary, LeaderboardRow
from .schema import require_row, timestamp

__all__ = ["CompareSessions"]


class CompareSessions(StorePart):
    """The compare part of `Store`."""

    def create_compare_session(self, question: str, conversation_id: str | None = None) -> str:
        """Start a comparison on one question and return its id (NotFoundError for an unknown conversation)."""
        sid = str(uuid.uuid4())
        with self.transaction() as c:
            if conversation_id is not None:
                require_row(c, "conversations", conversation_id, "conversation")
            c.execute(
                "INSERT INTO compare_sessions (id, conversation_id, question, created_at) VALUES (?, ?, ?, ?)",
                (sid, conversation_id, question, timestamp()),
            )
        return sid

    def add_compare_entry(self, session_id: str, system: str, run_id: str | None) -> None:
        """Attach one system's run to a session (replacing that system's earlier entry)."""
        with self.transaction() as c:
            require_row(c, "compare_sessions", session_id, "compare session")
            c.execute(
                "INSERT INTO compare_entries (session_id, system, run_id) VALUES (?, ?, ?)"
                " ON CONFLICT (session_id, system) DO UPDATE SET run_id = excluded.run_id",
                (session_id, system, run_id),
            )

    def delete_compare_session(self, session_id: str) -> None:
        """Delete a comparison with its entries and vote (the leaderboard forgets it); its runs stay
        in the run history. An unknown id is no error."""
        with self.transaction() as c:
            c.execute("DELETE FROM compare_sessions WHERE id = ?", (session_id,))

    def record_vote(self, session_id: str, winner_system: str | None = None, *, kind: VoteKind = "winner") -> None:
        """Record the user's verdict; a session keeps only its latest vote.

        `kind` "winner" (the default, and every vote before schema V7): `winner_system` won, and
        StoreError when it is not one of the session's systems. "tie" (all answers equally good)
        and "all_wrong" (none was right) name no winner: StoreError when one is given."""
        if kind not in VOTE_KINDS:
            raise StoreError(f"unknown vote kind {kind!r}: use {', '.join(VOTE_KINDS)}")
        if kind == "winner" and not winner_system:
            raise StoreError("a winner vote names the system that won")
        if kind != "winner" and winner_system is not None:
            raise StoreError(f"a {kind!r} vote names no winner (got {winner_system!r})")
        with self.transaction() as c:
            require_row(c, "compare_sessions", session_id, "compare session")
            if (
                kind == "winner"
                and c.execute(
                    "SELECT 1 FROM compare_entries WHERE session_id = ? AND system = ?", (session_id, winner_system)
                ).fetchone()
                is None
            ):
                raise StoreError(f"{winner_system!r} is not one of the systems compared in session {session_id}")
            c.execute(
                "INSERT INTO votes (session_id, kind, winner, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET kind = excluded.kind, winner = excluded.winner,"
                " created_at = excluded.created_at",
                (session_id, kind, winner_system, timestamp()),
            )

    def list_compare_sessions(self, limit: int = 200) -> list[CompareSummary]:
        """Compare sessions newest first, each with its systems (in the order added) and winner."""
        with self.snapshot():
            rows = self.query(
                """
                SELECT s.id, s.conversation_id, s.question, s.created_at, v.winner, v.kind AS vote_kind
                FROM compare_sessions s LEFT JOIN votes v ON v.session_id = s.id
                ORDER BY s.created_at DESC, s.rowid DESC LIMIT ?
                """,
                (int(limit),),
            )
            systems = self._systems_of(limit)
        return [CompareSummary(**dict(r), systems=systems.get(r["id"], [])) for r in rows]

    def get_compare_session(self, session_id: str) -> CompareSession:
        """A session with each entry's trace (None when its run is missing) and its vote."""
        with self.snapshot():
            row = self.query_one(
                """
                SELECT s.id, s.conversation_id, s.question, s.created_at, v.winner, v.kind AS vote_kind,
                       v.created_at AS voted_at
                FROM compare_sessions s LEFT JOIN votes v ON v.session_id = s.id WHERE s.id = ?
                """,
                (session_id,),
            )
            if row is None:
                raise NotFoundError(f"no compare session {session_id}")
            entries = [
                self._entry(e["system"], e["run_id"])
                for e in self.query(
                    "SELECT system, run_id FROM compare_entries WHERE session_id = ? ORDER BY rowid", (session_id,)
                )
            ]
        return CompareSession(**dict(row), entries=entries)

    def leaderboard(self) -> list[LeaderboardRow]:
        """One row per system ever compared, and per conductor adapter it ran with (a trained
        adapter's row beside its base's), best first: by win rate, then wins, then name. A tie or
        an "all wrong" vote counts as a vote that no system won. A run beside its branches
        (`branch:N`, engine/fork.py) is no race between systems: those sessions are left out
        (their votes are preference pairs all the same, train/votes.py)."""
        rows = self.query(
            """
            SELECT e.system AS system, r.conductor_adapter AS adapter,
                   COUNT(DISTINCT e.session_id) AS sessions,
                   COUNT(DISTINCT v.session_id) AS votes,
                   COUNT(DISTINCT CASE WHEN v.winner = e.system THEN v.session_id END) AS wins,
                   AVG(CASE WHEN r.status = 'finished' THEN r.cost_usd END) AS avg_cost_usd,
                   AVG(CASE WHEN r.status = 'finished' THEN r.latency_s END) AS avg_latency_s
            FROM compare_entries e
            LEFT JOIN votes v ON v.session_id = e.session_id
            LEFT JOIN runs r ON r.id = e.run_id
            WHERE e.session_id NOT IN (SELECT session_id FROM compare_entries WHERE system LIKE 'branch:%')
            GROUP BY e.system, r.conductor_adapter
            """
        )
        board = [LeaderboardRow(**dict(r), win_rate=r["wins"] / r["votes"] if r["votes"] else 0.0) for r in rows]
        board.sort(key=lambda b: (-b.win_rate, -b.wins, b.system))
        return board

    # --- helpers ------------------------------------------------------------------------------

    def _systems_of(self, limit: int) -> dict[str, list[str]]:
        """The systems of the newest `limit` sessions, each in the order added, in one query."""
        out: dict[str, list[str]] = {}
        for e in self.query(
            """
            SELECT session_id, system FROM compare_entries
            WHERE session_id IN (SELECT id FROM compare_sessions ORDER BY created_at DESC, rowid DESC LIMIT ?)
            ORDER BY rowid
            """,
            (int(limit),),
        ):
            out.setdefault(e["session_id"], []).append(e["system"])
        return out

    def _entry(self, system: str, run_id: str | None) -> CompareEntry:
        trace = None
        if run_id is not None:
            try:
                trace = self.get_trace(run_id)
            except NotFoundError:
                trace = None
        return CompareEntry(system=system, run_id=run_id, trace=trace)
