"""The PostgreSQL span store (``RELAY_STORE=postgresql://...``), for instances that share
storage: a turn run on one instance replays on any other.

psycopg 3, synchronous, from a pool that checks each connection before use
(relay/store/pool.py): the exporter's thread (and imports) writes, one write at a time as
before (concurrent upserts of the same rows could deadlock), and the serving path reads
through ``asyncio.to_thread``. A connection that died with the server is replaced, so the
store works again as soon as PostgreSQL is back; while it is away every call raises
StoreUnavailable (503 on the API; a dropped batch for the exporter, which logs it).
Migrations run under an advisory lock, so instances starting together migrate once.

The tables, their indexes and the version table live in the deployment's schema
(relay/store/schema.py: ``RELAY_PG_SCHEMA``, or the connection's current schema), and the
migration lock's key is that schema's own: another deployment in another schema of the
same database keeps its own tables and versions, and never waits on this one.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from relay.store.sql import SQLSpanStore

try:  # optional at import time: only RELAY_STORE=postgresql://... needs it
    import psycopg

    from relay.store.pool import (
        open_pool,
        ping,
        pool_schema,
        transaction_cursor,
        unavailable_as,
    )
except ImportError:  # pragma: no cover - reported when the store is constructed
    psycopg = None  # type: ignore[assignment]

from relay.store.schema import lock_key

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
    # version 2: a turn's spans read in start order, trace by trace (a streaming replay)
    [
        "CREATE INDEX spans_trace_start ON spans (trace_id, start_ns)",
    ],
    # version 3: attribute values stored plain where JSON keeps them exactly, tagged
    # otherwise (relay.store.codec); rows of versions 1-2 (all tagged) read as before
    [],
]


class PostgresSpanStore(SQLSpanStore):
    placeholder = "%s"
    least = "LEAST"
    fine_start = "MOD(start_ns, 1000000) <> 0"

    def __init__(
        self,
        url: str,
        *,
        retention_s: float,
        max_turns: int,
        clock: Callable[[], int] = time.time_ns,
        connect_timeout_s: float = 10.0,
        schema: str | None = None,
    ) -> None:
        """``schema``: the deployment's schema (``RELAY_PG_SCHEMA``, created if missing);
        None: the current schema of ``url``'s connections."""
        if psycopg is None:
            raise RuntimeError(
                "RELAY_STORE=postgresql://... needs psycopg 3: pip install 'psycopg[binary]>=3.2'"
            )
        super().__init__(retention_s=retention_s, max_turns=max_turns, clock=clock)
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self._write_lock = threading.Lock()
        self._pool = open_pool(
            url, name="relay-spans", connect_timeout_s=connect_timeout_s, schema=schema
        )
        try:
            #: the schema the tables live in
            self.schema = pool_schema(self._pool)
            self._migrate()
            self.expire()
        except BaseException:
            self._pool.close()  # its worker threads must not outlive a failed start
            raise

    def _migrate(self) -> None:
        with self._write_cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(self.schema, "spans"),))
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
        with self._write_lock, transaction_cursor(self._pool, "span store") as cur:
            yield cur

    @contextlib.contextmanager
    def _read_cursor(self) -> Iterator[Any]:
        with transaction_cursor(self._pool, "span store") as cur:
            yield cur

    def _stream_cursors(self, resources: contextlib.ExitStack) -> tuple[Any, Callable[[], Any]]:
        """A pooled connection in one transaction; rows through server-side cursors,
        fetched as they are taken."""
        resources.enter_context(unavailable_as("span store"))
        conn = resources.enter_context(self._pool.connection())
        resources.enter_context(conn.transaction())
        cur = resources.enter_context(conn.cursor())
        names = itertools.count()

        def row_cursor() -> Any:
            return resources.enter_context(conn.cursor(name=f"replay_{next(names)}"))

        return cur, row_cursor

    def _no_limit(self) -> str:
        return "LIMIT ALL"

    def schema_version(self) -> int:
        with self._read_cursor() as cur:
            cur.execute("SELECT MAX(version) FROM span_schema_version")
            return cur.fetchone()[0] or 0

    def ping(self) -> None:
        """Readiness: one round trip, with a short wait (StoreUnavailable if none)."""
        ping(self._pool, "span store")

    def close(self) -> None:
        self._pool.close()
