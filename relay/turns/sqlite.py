"""Turn records in SQLite (the default: ``RELAY_DATA_DIR/turns.db``), for one instance.

The records themselves and the store's async API are relay/turns/records.py's; this is the
file, its migrations (existing files upgrade in place at start-up) and the sync core that
runs in the store's worker threads.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relay.turns import lease_store, threads
from relay.turns.records import (
    _COLUMNS,
    HOLDS_NOTHING,
    RUNNING,
    HeldThread,
    ThreadedTurnAPI,
    TurnExists,
    TurnRecord,
    id_key,
    list_filter,
)
from relay.turns.threads import ThreadRecord

_MIGRATIONS = [
    # version 1
    """
    CREATE TABLE turns (
        turn_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        status TEXT NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        request_hash TEXT NOT NULL DEFAULT '',
        started_at REAL NOT NULL,
        ended_at REAL,
        paused_at REAL,
        response TEXT,
        last_seq INTEGER NOT NULL DEFAULT 0,
        root_trace_id TEXT,
        root_span_id TEXT
    );
    CREATE INDEX turns_thread ON turns (thread_id, started_at DESC);
    CREATE INDEX turns_status ON turns (status);
    """,
    # version 2: idempotent resumes, and where the latest run's events start
    """
    ALTER TABLE turns ADD COLUMN resume_hash TEXT;
    ALTER TABLE turns ADD COLUMN run_after_seq INTEGER NOT NULL DEFAULT 0;
    """,
    # version 3: turns and threads are found by their id's key (id_key), in any spelling
    """
    ALTER TABLE turns ADD COLUMN turn_key TEXT NOT NULL DEFAULT '';
    ALTER TABLE turns ADD COLUMN thread_key TEXT NOT NULL DEFAULT '';
    """,
    # version 4: the served graph a turn ran on (GET /turns?graph=)
    """
    ALTER TABLE turns ADD COLUMN graph TEXT NOT NULL DEFAULT '';
    """,
    # version 5: the user a turn (and its thread) belongs to; '' for none (RELAY_AUTH)
    """
    ALTER TABLE turns ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
    CREATE INDEX turns_user ON turns (user_id, started_at DESC);
    """,
    # version 6: the client-tool rounds of a turn, across all its runs
    """
    ALTER TABLE turns ADD COLUMN client_tool_round INTEGER NOT NULL DEFAULT 0;
    """,
    # version 7: who each thread belongs to, fixed by its first turn (relay/turns/threads.py)
    f"""
    {threads.SQLITE_TABLE};
    {threads.SQLITE_BACKFILL};
    """,
    # version 8: leases (relay/turns/leases.py): until when the running instance holds the
    # turn, which attempt runs it, and the session that holds its thread's lock
    """
    ALTER TABLE turns ADD COLUMN lease_until REAL NOT NULL DEFAULT 0;
    ALTER TABLE turns ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE turns ADD COLUMN lock_holder INTEGER NOT NULL DEFAULT 0;
    """,
    # version 9: how the last run stopped when its instance handed the turn over
    # (relay/turns/draining.py)
    """
    ALTER TABLE turns ADD COLUMN handover TEXT NOT NULL DEFAULT '';
    """,
    # version 10: a thread's id as spelled, metadata and times (relay/turns/threads.py)
    f"""
    {threads.SQLITE_DETAILS};
    {threads.backfill("threads", "turns")};
    """,
]
_SQL = threads.SQLITE_SQL


def _fill_keys(db: sqlite3.Connection) -> None:
    """Version 3's data step: the keys of the turns recorded before it."""
    rows = db.execute("SELECT turn_id, thread_id FROM turns").fetchall()
    db.executemany(
        "UPDATE turns SET turn_key = ?, thread_key = ? WHERE turn_id = ?",
        [(id_key(turn), id_key(thread), turn) for turn, thread in rows],
    )
    db.execute("CREATE UNIQUE INDEX turns_key ON turns (turn_key)")
    db.execute("CREATE INDEX turns_thread_key ON turns (thread_key, started_at DESC)")


#: steps in Python that follow a version's script, in its transaction
_MIGRATION_STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {3: _fill_keys}


class SQLiteTurnStore(ThreadedTurnAPI):
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._migrate()

    def _migrate(self) -> None:
        """Bring the file to the latest version. Each version in a transaction that holds
        the file's write lock from its start (``BEGIN IMMEDIATE``) and reads the version
        again under it: two processes opening the same file at once (a restart's
        overlap, test workers) migrate it once, the second waiting for the first."""
        with self._lock:
            self._db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER)")
            for version, script in enumerate(_MIGRATIONS, start=1):
                if version > self._version():
                    self._db.execute("BEGIN IMMEDIATE")
                    if version <= self._version():  # another process did it meanwhile
                        self._db.execute("COMMIT")
                        continue
                    try:
                        for statement in filter(str.strip, script.split(";")):
                            self._db.execute(statement)
                        step = _MIGRATION_STEPS.get(version)
                        if step is not None:
                            step(self._db)
                        self._db.execute("INSERT INTO schema_version VALUES (?)", (version,))
                    except BaseException:
                        self._db.execute("ROLLBACK")
                        raise
                    self._db.execute("COMMIT")

    def _version(self) -> int:
        row = self._db.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    # -- sync core (runs in a worker thread) --------------------------------------------

    def _create(self, record: TurnRecord) -> None:
        placeholders = ", ".join("?" for _ in _COLUMNS)
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.execute(
                    f"INSERT INTO turns ({', '.join(_COLUMNS)}) VALUES ({placeholders})",
                    [getattr(record, c) for c in _COLUMNS],
                )
                # the first turn of a thread makes it its user's (a later one: no change)
                now = time.time() * 1000
                self._db.execute(
                    _SQL.claim,
                    (record.thread_key, record.user_id, record.thread_id, "{}", now, now),
                )
                self._db.execute(_SQL.touch, (now, record.thread_key))
            except sqlite3.IntegrityError:
                self._db.execute("ROLLBACK")
                raise TurnExists(record.turn_id) from None
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _get(self, turn_id: str) -> TurnRecord | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM turns WHERE turn_key = ?", (id_key(turn_id),)
            ).fetchone()
        return TurnRecord(*row) if row else None

    def _update(self, turn_id: str, changes: dict[str, Any]) -> None:
        unknown = set(changes) - set(_COLUMNS)
        if unknown:
            raise ValueError(f"unknown turn fields {unknown}")
        sets = ", ".join(f"{k} = ?" for k in changes)
        with self._lock:
            self._db.execute(
                f"UPDATE turns SET {sets} WHERE turn_key = ?", [*changes.values(), id_key(turn_id)]
            )
            if "status" in changes:  # its thread was updated
                self._db.execute(_SQL.touch_of_turn, (time.time() * 1000, id_key(turn_id)))

    def _list(
        self,
        thread_id: str | None,
        limit: int,
        before: float | None,
        graph: str | None = None,
        status: str | None = None,
        user_id: str | None = None,
    ) -> list[TurnRecord]:
        clause, args = list_filter(thread_id, before, "?", graph, status, user_id)
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM turns {clause} "
                "ORDER BY started_at DESC LIMIT ?",
                [*args, limit],
            ).fetchall()
        return [TurnRecord(*row) for row in rows]

    def _mark_interrupted(self) -> int:
        now = time.time() * 1000
        with self._lock:
            cur = self._db.execute(
                "UPDATE turns SET status = 'interrupted', ended_at = ? WHERE status = ?",
                (now, RUNNING),
            )
            return cur.rowcount

    def _renew_leases(self, leases: dict[str, int], until: float) -> set[str]:
        with self._lock:
            return lease_store.sqlite_renew(self._db, leases, until)

    def _claim_expired(
        self, now: float, until: float, exclude: list[str], startup: bool
    ) -> list[TurnRecord]:
        """One instance uses the file: only its start claims, and then every running turn
        (its dead predecessor's, whatever its instance id; leases are for replicas)."""
        if not startup:
            return []
        with self._lock:
            rows = lease_store.sqlite_claim(self._db, _COLUMNS, until, exclude)
        return [TurnRecord(*row) for row in rows]

    def _claim_thread(self, thread_id: str, user_id: str, metadata: dict[str, Any]) -> str:
        key = id_key(thread_id)
        now = time.time() * 1000
        text = threads.metadata_text(metadata)
        with self._lock:  # one connection, one lock: the insert and the read are one step
            self._db.execute(_SQL.claim, (key, user_id, thread_id, text, now, now))
            row = self._db.execute(threads.SQLITE_OWNER, (key,)).fetchone()
        return str(row[0])

    def _get_thread(self, thread_id: str) -> ThreadRecord | None:
        with self._lock:
            row = self._db.execute(_SQL.one, (id_key(thread_id),)).fetchone()
        return threads.thread_row(row) if row else None

    def _patch_thread(
        self, thread_id: str, metadata: dict[str, Any], revive: bool
    ) -> ThreadRecord | None:
        key = id_key(thread_id)
        now = time.time() * 1000
        with self._lock:  # the read, the merge and the write: one step
            row = self._db.execute(_SQL.one, (key,)).fetchone()
            if row is None:
                return None
            if revive:
                text = threads.metadata_text(metadata)
                self._db.execute(_SQL.revive, (text, now, now, key))
            else:
                merged = {**threads.thread_row(row).metadata, **metadata}
                self._db.execute(_SQL.set_metadata, (threads.metadata_text(merged), now, key))
            found = self._db.execute(_SQL.one, (key,)).fetchone()
        return threads.thread_row(found)

    def _delete_thread(self, thread_id: str) -> None:
        now = time.time() * 1000
        with self._lock:
            self._db.execute(_SQL.delete, (now, now, id_key(thread_id)))

    def _threads(self, user_id: str | None, keys: list[str] | None) -> list[ThreadRecord]:
        sql, args = _SQL.listing(user_id, keys)
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        return [threads.thread_row(row) for row in rows]

    def _thread_owner(self, thread_id: str) -> str | None:
        with self._lock:
            row = self._db.execute(threads.SQLITE_OWNER, (id_key(thread_id),)).fetchone()
        return str(row[0]) if row else None

    async def lock_thread(self, thread_id: str) -> HeldThread | None:
        """One instance uses this file: no other instance to hold the thread against."""
        return HOLDS_NOTHING

    async def ping(self) -> None:
        """Readiness: one cheap read."""
        await self.list(limit=1)

    def close(self) -> None:
        self._close_executor()
        with self._lock:
            self._db.close()
