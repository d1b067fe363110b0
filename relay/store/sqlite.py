"""The SQLite span store (the default): ``RELAY_DATA_DIR/spans.db``.

One writer connection (the exporter's thread, imports) and one reader connection (the
serving path, through ``asyncio.to_thread``), each behind its own lock; WAL mode lets a
replay read while a batch is written. A batch is one transaction (``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from relay.store.sql import SQLSpanStore

MIGRATIONS: list[list[str]] = [
    # version 1
    [
        """CREATE TABLE spans (
            trace_id TEXT NOT NULL,
            span_id TEXT NOT NULL,
            parent_span_id TEXT,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            start_ns INTEGER NOT NULL,
            end_ns INTEGER,
            status TEXT NOT NULL,
            status_message TEXT NOT NULL,
            attributes TEXT NOT NULL,
            events TEXT NOT NULL,
            links TEXT NOT NULL,
            resource TEXT NOT NULL,
            stored_ns INTEGER NOT NULL,
            PRIMARY KEY (trace_id, span_id)
        )""",
        "CREATE INDEX spans_stored ON spans (stored_ns)",
        """CREATE TABLE turn_traces (
            turn_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            root_span_id TEXT NOT NULL,
            run_kind TEXT NOT NULL,
            start_ns INTEGER NOT NULL,
            end_ns INTEGER,
            outcome TEXT,
            PRIMARY KEY (turn_id, trace_id)
        )""",
        "CREATE INDEX turn_traces_trace ON turn_traces (trace_id)",
        """CREATE TABLE span_turns (
            turn_id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            started_ns INTEGER NOT NULL,
            stored_ns INTEGER NOT NULL,
            source TEXT NOT NULL,
            expired_ns INTEGER
        )""",
        "CREATE INDEX span_turns_started ON span_turns (started_ns)",
        "CREATE INDEX span_turns_stored ON span_turns (stored_ns)",
    ],
    # version 2: a turn's spans read in start order, trace by trace (a streaming replay)
    [
        "CREATE INDEX spans_trace_start ON spans (trace_id, start_ns)",
    ],
    # version 3: attribute values stored plain where JSON keeps them exactly, tagged
    # otherwise (relay.store.codec); rows of versions 1-2 (all tagged) read as before
    [],
]


class SQLiteSpanStore(SQLSpanStore):
    def __init__(
        self,
        path: Path,
        *,
        retention_s: float,
        max_turns: int,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        super().__init__(retention_s=retention_s, max_turns=max_turns, clock=clock)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._writer = self._connect()
        self._write_lock = threading.Lock()
        self._migrate()
        self._reader = self._connect()
        self._read_lock = threading.Lock()
        self.expire()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            str(self.path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _migrate(self) -> None:
        with self._write_lock:
            db = self._writer
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("CREATE TABLE IF NOT EXISTS span_schema_version (version INTEGER)")
                current = (
                    db.execute("SELECT MAX(version) FROM span_schema_version").fetchone()[0] or 0
                )
                for version, statements in enumerate(MIGRATIONS, start=1):
                    if version > current:
                        for statement in statements:
                            db.execute(statement)
                        db.execute("INSERT INTO span_schema_version VALUES (?)", (version,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def _write_cursor(self) -> Iterator[Any]:
        with self._write_lock:
            cur = self._writer.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            else:
                cur.execute("COMMIT")
            finally:
                cur.close()

    @contextlib.contextmanager
    def _read_cursor(self) -> Iterator[Any]:
        with self._read_lock:
            cur = self._reader.cursor()
            cur.execute("BEGIN")  # one snapshot for the whole read
            try:
                yield cur
            finally:
                cur.execute("COMMIT")
                cur.close()

    def _stream_cursors(self, resources: contextlib.ExitStack) -> tuple[Any, Callable[[], Any]]:
        """A connection of its own (WAL: readers do not wait for one another), so that a
        replay holds no lock that another read needs while it streams."""
        db = self._connect()
        resources.callback(db.close)  # (a read transaction: closing ends it)
        db.execute("BEGIN")  # one snapshot for the whole read
        return db.cursor(), db.cursor

    def schema_version(self) -> int:
        with self._read_lock:
            return (
                self._reader.execute("SELECT MAX(version) FROM span_schema_version").fetchone()[0]
                or 0
            )

    def ping(self) -> None:
        """Readiness: one cheap read."""
        self.schema_version()

    def close(self) -> None:
        with self._write_lock:
            self._writer.close()
        with self._read_lock:
            self._reader.close()
