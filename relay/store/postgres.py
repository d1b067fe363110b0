"""The PostgreSQL span store (``RELAY_STORE=postgresql://...``), for instances that share
storage: a turn run on one instance replays on any other.

psycopg 3, synchronous: the writer connection is used by the exporter's thread (and
imports), the reader connection by the serving path through ``asyncio.to_thread``, each
behind its own lock. A broken connection is replaced on the next call. Migrations run
under an advisory lock, so instances starting together migrate once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from relay.store.sql import SQLSpanStore

try:  # optional at import time: only RELAY_STORE=postgresql://... needs it
    import psycopg
except ImportError:  # pragma: no cover - reported when the store is constructed
    psycopg = None  # type: ignore[assignment]

#: pg_advisory_xact_lock key for migrations ("span-rly" as an int)
_MIGRATION_LOCK = 0x7370616E2D726C79

MIGRATIONS: list[list[str]] = [
    # version 1
    [
        """CREATE TABLE spans (
            trace_id TEXT NOT NULL,
            span_id TEXT NOT NULL,
            parent_span_id TEXT,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            start_ns BIGINT NOT NULL,
            end_ns BIGINT,
            status TEXT NOT NULL,
            status_message TEXT NOT NULL,
            attributes TEXT NOT NULL,
            events TEXT NOT NULL,
            links TEXT NOT NULL,
            resource TEXT NOT NULL,
            stored_ns BIGINT NOT NULL,
            PRIMARY KEY (trace_id, span_id)
        )""",
        "CREATE INDEX spans_stored ON spans (stored_ns)",
        """CREATE TABLE turn_traces (
            turn_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            root_span_id TEXT NOT NULL,
            run_kind TEXT NOT NULL,
            start_ns BIGINT NOT NULL,
            end_ns BIGINT,
            outcome TEXT,
            PRIMARY KEY (turn_id, trace_id)
        )""",
        "CREATE INDEX turn_traces_trace ON turn_traces (trace_id)",
        """CREATE TABLE span_turns (
            turn_id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            started_ns BIGINT NOT NULL,
            stored_ns BIGINT NOT NULL,
            source TEXT NOT NULL,
            expired_ns BIGINT
        )""",
        "CREATE INDEX span_turns_started ON span_turns (started_ns)",
        "CREATE INDEX span_turns_stored ON span_turns (stored_ns)",
    ],
]


class PostgresSpanStore(SQLSpanStore):
    placeholder = "%s"
    least = "LEAST"

    def __init__(self, url: str, *, retention_s: float, max_turns: int,
                 clock: Callable[[], int] = time.time_ns, connect_timeout_s: float = 10.0
                 ) -> None:
        if psycopg is None:
            raise RuntimeError("RELAY_STORE=postgresql://... needs psycopg 3: "
                               "pip install 'psycopg[binary]>=3.2'")
        super().__init__(retention_s=retention_s, max_turns=max_turns, clock=clock)
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer: Any = None
        self._reader: Any = None
        self._migrate()
        self.expire()

    def _connect(self) -> Any:
        assert psycopg is not None
        return psycopg.connect(self.url, autocommit=True,
                               connect_timeout=max(1, int(self.connect_timeout_s)))

    def _writer_conn(self) -> Any:
        if self._writer is None or self._writer.closed or self._writer.broken:
            self._writer = self._connect()
        return self._writer

    def _reader_conn(self) -> Any:
        if self._reader is None or self._reader.closed or self._reader.broken:
            self._reader = self._connect()
        return self._reader

    def _migrate(self) -> None:
        with self._write_cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            cur.execute("CREATE TABLE IF NOT EXISTS span_schema_version (version INTEGER)")
            cur.execute("SELECT MAX(version) FROM span_schema_version")
            current = cur.fetchone()[0] or 0
            for version, statements in enumerate(MIGRATIONS, start=1):
                if version > current:
                    for statement in statements:
                        cur.execute(statement)
                    cur.execute("INSERT INTO span_schema_version VALUES (%s)", (version,))

    @contextlib.contextmanager
    def _write_cursor(self) -> Iterator[Any]:
        with self._write_lock:
            conn = self._writer_conn()
            with conn.transaction(), conn.cursor() as cur:
                yield cur

    @contextlib.contextmanager
    def _read_cursor(self) -> Iterator[Any]:
        with self._read_lock:
            conn = self._reader_conn()
            with conn.transaction(), conn.cursor() as cur:
                yield cur

    def _no_limit(self) -> str:
        return "LIMIT ALL"

    def schema_version(self) -> int:
        with self._read_cursor() as cur:
            cur.execute("SELECT MAX(version) FROM span_schema_version")
            return cur.fetchone()[0] or 0

    def close(self) -> None:
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
