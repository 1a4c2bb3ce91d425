"""Bench runs (`stiva bench`): what was measured and each graded item. Part of `Store` (db.py).

A bench's id is a fingerprint of what it measures (suite content, systems, config), chosen by
the runner: the same command finds its bench again and continues it. Only finished items have
a row, so an item in flight when the process died is asked again; so is one that ended in an
error (`items_to_skip` leaves both out). Each item row points at the run it came from (a loose
reference, like compare entries: the run may be deleted from the history later).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence

from .errors import BenchBusyError, NotFoundError
from .part import StorePart
from .records import BenchItemRecord, BenchRecord
from .schema import timestamp

__all__ = ["IMPORTED", "Benches"]


class Benches(StorePart):
    """The bench part of `Store`."""

    def open_bench(
        self,
        bench_id: str,
        *,
        suite: str,
        suite_hash: str,
        systems: list[str],
        config_hash: str,
        items: int,
        fresh: bool | Sequence[str] = False,
    ) -> bool:
        """Create the bench, or reopen it as running; `fresh` forgets its items first: all of them
        (True), or only those of these item ids (what a `--fresh --limit N` will redo; the rest of
        the bench's results stay). Returns True when it already existed (a resumed bench).

        A bench that another live process is running raises BenchBusyError (with its pid), and
        nothing changes: two processes on one bench would both ask, and pay for, every item. The
        check and the claim are one write transaction, so two processes starting together
        cannot both pass."""
        now = timestamp()
        with self.transaction() as c:
            row = c.execute(
                "SELECT status, owner, pid, updated_at FROM bench_runs WHERE id = ?", (bench_id,)
            ).fetchone()
            existed = row is not None
            if existed and row[0] == "running" and row[1] != self.owner.id and not self.owner.is_gone(row[1]):
                pid = row[2]
                who = f"process {pid}" if pid else "another process"
                raise BenchBusyError(
                    f"bench {bench_id} is already running in {who} (last progress {row[3][:19].replace('T', ' ')} "
                    f"UTC): wait for it, or stop it{f' (kill {pid})' if pid else ''} and run this command again "
                    "to continue it",
                    pid,
                )
            if existed and fresh is True:
                c.execute("DELETE FROM bench_items WHERE bench_id = ?", (bench_id,))
            elif existed and fresh and not isinstance(fresh, bool):  # item ids
                c.executemany(
                    "DELETE FROM bench_items WHERE bench_id = ? AND item_id = ?",
                    [(bench_id, item_id) for item_id in fresh],
                )
            c.execute(
                "INSERT INTO bench_runs (id, suite, suite_hash, systems, config_hash, items, status, created_at,"
                " updated_at, owner, pid) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET status = 'running', stop_reason = NULL, items = excluded.items,"
                " suite = excluded.suite, updated_at = excluded.updated_at, owner = excluded.owner,"
                " pid = excluded.pid",
                (
                    bench_id,
                    suite,
                    suite_hash,
                    json.dumps(systems),
                    config_hash,
                    items,
                    now,
                    now,
                    self.owner.id,
                    os.getpid(),
                ),
            )
        return existed and not fresh

    def record_bench_item(self, bench_id: str, item: BenchItemRecord) -> None:
        """Write (or replace) one finished item."""
        with self.transaction() as c:
            c.execute(_INSERT_ITEM, _item_row(bench_id, item, timestamp()))
            c.execute("UPDATE bench_runs SET updated_at = ? WHERE id = ?", (timestamp(), bench_id))

    def import_bench(
        self,
        bench_id: str,
        *,
        suite: str,
        suite_hash: str,
        systems: list[str],
        items: int,
        records: Sequence[BenchItemRecord],
    ) -> None:
        """A finished bench of recorded answers (`stiva bench import`), written whole in one
        transaction: a fault leaves nothing of it. An import of the same content replaces it."""
        now = timestamp()
        with self.transaction() as c:
            c.execute("DELETE FROM bench_items WHERE bench_id = ?", (bench_id,))
            c.execute("DELETE FROM bench_runs WHERE id = ?", (bench_id,))
            c.execute(
                "INSERT INTO bench_runs (id, suite, suite_hash, systems, config_hash, items, status, created_at,"
                " updated_at, owner, pid) VALUES (?, ?, ?, ?, ?, ?, 'finished', ?, ?, NULL, NULL)",
                (bench_id, suite, suite_hash, json.dumps(systems), IMPORTED, items, now, now),
            )
            c.executemany(_INSERT_ITEM, [_item_row(bench_id, item, now) for item in records])

    def close_bench(self, bench_id: str, status: str, stop_reason: str | None = None) -> None:
        """Mark the bench finished, stopped (budget, ctrl+c: `stop_reason` says which) or interrupted."""
        with self.transaction() as c:
            c.execute(
                "UPDATE bench_runs SET status = ?, stop_reason = ?, updated_at = ? WHERE id = ?",
                (status, stop_reason, timestamp(), bench_id),
            )

    def bench_items(self, bench_id: str) -> list[BenchItemRecord]:
        rows = self.query("SELECT * FROM bench_items WHERE bench_id = ? ORDER BY finished_at, rowid", (bench_id,))
        return [_item(row) for row in rows]

    def items_to_skip(self, bench_id: str) -> set[tuple[str, str]]:
        """(system, item id) pairs already graded: a resumed bench does not ask them again."""
        rows = self.query(
            "SELECT system, item_id FROM bench_items WHERE bench_id = ? AND status = 'graded'", (bench_id,)
        )
        return {(row["system"], row["item_id"]) for row in rows}

    def get_bench(self, bench_id: str) -> BenchRecord:
        row = self.query_one("SELECT * FROM bench_runs WHERE id = ?", (bench_id,))
        if row is None:
            raise NotFoundError(f"no bench {bench_id}")
        return _bench(row)

    def resolve_bench(self, text: str) -> str:
        """The whole bench id for an id or a unique prefix of 4 characters or more (NotFoundError
        says why not: too short, nothing starts so, or several benches do)."""
        key = text.strip().lower()
        if len(key) < 4:
            raise NotFoundError(
                f"{text!r}: give a bench's id (4 characters or more), as `stiva bench` prints it "
                "and the app's bench screen shows it"
            )
        rows = self.query(
            "SELECT id FROM bench_runs WHERE id >= ? AND id < ? ORDER BY id LIMIT 6", (key, key + "\U0010ffff")
        )
        ids: list[str] = [row["id"] for row in rows]
        if key in ids:
            return key
        if not ids:
            raise NotFoundError(f"no bench {text} in the history")
        if len(ids) > 1:
            raise NotFoundError(f"{text} is the start of several benches ({', '.join(ids)}): give more characters")
        return ids[0]

    def list_benches(self, limit: int = 100) -> list[BenchRecord]:
        rows = self.query("SELECT * FROM bench_runs ORDER BY updated_at DESC LIMIT ?", (limit,))
        return [_bench(row) for row in rows]


# A bench of recorded answers (`stiva bench import`) has this in place of its config's fingerprint:
# no config of this machine made its answers.
IMPORTED = "recorded"

_INSERT_ITEM = (
    "INSERT OR REPLACE INTO bench_items (bench_id, system, item_id, run_id, status, correct, answer,"
    " extracted, error, prompt_tokens, completion_tokens, cost_usd, latency_s, judge_prompt_tokens,"
    " judge_completion_tokens, judge_cost_usd, finished_at, queue_wait_s)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _item_row(bench_id: str, item: BenchItemRecord, now: str) -> tuple[object, ...]:
    return (
        bench_id,
        item.system,
        item.item_id,
        item.run_id,
        item.status,
        int(item.correct),
        item.answer,
        item.extracted,
        item.error,
        item.prompt_tokens,
        item.completion_tokens,
        item.cost_usd,
        item.latency_s,
        item.judge_prompt_tokens,
        item.judge_completion_tokens,
        item.judge_cost_usd,
        now,
        item.queue_wait_s,
    )


def _bench(row: sqlite3.Row) -> BenchRecord:
    return BenchRecord(
        id=row["id"],
        suite=row["suite"],
        suite_hash=row["suite_hash"],
        systems=json.loads(row["systems"]),
        config_hash=row["config_hash"],
        items=row["items"],
        status=row["status"],
        stop_reason=row["stop_reason"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _item(row: sqlite3.Row) -> BenchItemRecord:
    return BenchItemRecord(
        system=row["system"],
        item_id=row["item_id"],
        run_id=row["run_id"],
        status=row["status"],
        correct=bool(row["correct"]),
        answer=row["answer"],
        extracted=row["extracted"],
        error=row["error"],
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        cost_usd=row["cost_usd"],
        latency_s=row["latency_s"],
        queue_wait_s=row["queue_wait_s"],
        judge_prompt_tokens=row["judge_prompt_tokens"],
        judge_completion_tokens=row["judge_completion_tokens"],
        judge_cost_usd=row["judge_cost_usd"],
    )
