"""Turn records in PostgreSQL (``RELAY_STORE=postgresql://...``): the same async API as
:class:`relay.turns.sqlite.SQLiteTurnStore`, shared by every instance, so a turn's status, its
response, its last ``seq`` and its idempotency key (the turn id) hold across replicas: a
turn started on A is ``GET /turns/{id}`` on B, resumable on B, and a second
``POST /chat`` with its turn id on B is refused as on A.

The table has one column per :class:`~relay.turns.records.TurnRecord` field plus ``owner``, the
instance (``RELAY_INSTANCE_ID``, default the host name) that last ran the turn. Who
each thread belongs to is in ``relay_threads`` (relay/turns/threads.py): claimed by its
first turn with an insert that does nothing when the thread has an owner, so the owner is
the same on every replica and never moves. At
start-up an instance ends at once only the running turns *it* owned; the turns of a peer
that died or hangs are ended by whichever instance claims them once their lease ran out
(``lease_until``, ``attempt``, ``lock_holder``: relay/turns/leases.py). Give each replica
a stable, unique ``RELAY_INSTANCE_ID`` (a pod name) so that a restarted one cleans up
after itself at once.

psycopg 3, synchronous, used through ``asyncio.to_thread`` (as the SQLite store does),
from a pool that checks each connection before use (relay/store/pool.py): a connection that
died with the server is replaced, so the store works again as soon as PostgreSQL is back,
and while it is away every call raises StoreUnavailable (503). The thread locks hold
connections of their own, from a second pool (relay/turns/locks.py). Columns missing from
an older table (a field added to TurnRecord) are added at start-up, under an advisory
lock so that instances starting together migrate once.

The table, its indexes and its migrations live in the deployment's schema only
(relay/store/schema.py: ``RELAY_PG_SCHEMA``, or the connection's current schema): the
columns are read from the catalog for that schema's ``relay_turns``, never for every table
of that name the user can see, and the migration's and the threads' advisory-lock keys are
the schema's own, so another deployment (another schema of the same database) neither
changes this one's turns nor waits on its locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import types
import typing
from collections.abc import Iterator
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any

from relay.turns import lease_store, threads
from relay.turns.records import (
    RUNNING,
    ThreadedTurnAPI,
    TurnExists,
    TurnRecord,
    id_key,
    list_filter,
)
from relay.turns.threads import ThreadRecord

_COLUMNS = [f.name for f in fields(TurnRecord)]
#: a session of the records' pool left inside a transaction this long is ended by the
#: server, its row locks released: each transaction here is one or two statements, and
#: a process frozen in one (SIGSTOP) must not keep its turns from being claimed
IDLE_IN_TRANSACTION_S = 5.0

#: who each thread belongs to (relay/turns/threads.py), in this deployment's schema
_THREADS_TABLE = (
    "CREATE TABLE relay_threads (thread_key TEXT PRIMARY KEY, owner TEXT NOT NULL DEFAULT '')"
)
#: the owner of each thread recorded before the table: its first turn's user, preferring
#: the turns the relay ran itself (their start time is its own clock, not a sender's)
_THREADS_BACKFILL = (
    "INSERT INTO relay_threads (thread_key, owner) "
    "SELECT DISTINCT ON (thread_key) thread_key, COALESCE(user_id, '') FROM relay_turns "
    "ORDER BY thread_key, COALESCE(graph, '') = '', started_at "
    "ON CONFLICT (thread_key) DO NOTHING"
)
_SQL = threads.ThreadSQL("relay_threads", "relay_turns", "%s", "GREATEST")
_OWNER = "SELECT owner FROM relay_threads WHERE thread_key = %s"

if TYPE_CHECKING:
    from relay.turns.locks import ThreadLock


def _sql_type(annotation: Any) -> str:
    hints = typing.get_type_hints(TurnRecord)
    kind = hints.get(annotation, str)
    args = (
        [a for a in typing.get_args(kind) if a is not type(None)]
        if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union
        else [kind]
    )
    base = args[0] if args else str
    if base is bool:
        return "BOOLEAN"
    if base is int:
        return "BIGINT"
    if base is float:
        return "DOUBLE PRECISION"
    return "TEXT"


class PostgresTurnStore(ThreadedTurnAPI):
    def __init__(
        self,
        url: str,
        instance_id: str | None = None,
        connect_timeout_s: float = 5.0,
        schema: str | None = None,
    ) -> None:
        """``schema``: the deployment's schema (``RELAY_PG_SCHEMA``, created if missing);
        None: the current schema of ``url``'s connections."""
        try:
            import psycopg  # noqa: F401
        except ImportError:  # pragma: no cover
            raise RuntimeError(
                "RELAY_STORE=postgresql://... needs psycopg 3: pip install 'psycopg[binary]>=3.2'"
            ) from None
        self.url = url
        self.instance_id = instance_id or socket.gethostname()
        self.connect_timeout_s = connect_timeout_s
        from relay.store.pool import open_pool, pool_schema
        from relay.turns.locks import AdvisoryLocks

        self._pool = open_pool(
            url,
            name="relay-turns",
            connect_timeout_s=connect_timeout_s,
            schema=schema,
            idle_in_transaction_s=IDLE_IN_TRANSACTION_S,
        )
        self._opened: list[Any] = [self._pool]  # what close() closes, newest first
        try:
            #: the schema the table lives in (the one ``schema`` named, or the current one)
            self.schema = pool_schema(self._pool)
            self._locks = AdvisoryLocks(
                url, connect_timeout_s=connect_timeout_s, schema=self.schema
            )
            self._opened.insert(0, self._locks)
            self._migrate()
        except BaseException:
            self.close()  # the pools' worker threads must not outlive a failed start
            raise

    # -- connection -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        from relay.store.pool import transaction_cursor

        with transaction_cursor(self._pool, "turn records") as cur:
            yield cur

    async def ping(self) -> None:
        """Readiness: a round trip through each pool (StoreUnavailable names the one)."""
        await asyncio.to_thread(self._ping)

    def _ping(self) -> None:
        from relay.store.pool import ping

        ping(self._pool, "turn records")
        self._locks.ping()

    def _migrate(self) -> None:
        from relay.store.schema import lock_key

        with self._cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(self.schema, "turns"),))
            cur.execute("""CREATE TABLE IF NOT EXISTS relay_turns (
                turn_id TEXT PRIMARY KEY,
                thread_id TEXT NOT NULL,
                status TEXT NOT NULL,
                started_at DOUBLE PRECISION NOT NULL DEFAULT 0,
                owner TEXT NOT NULL DEFAULT ''
            )""")
            cur.execute(  # this schema's table only (another deployment's is not ours)
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'relay_turns'"
            )
            present = {row[0] for row in cur.fetchall()}
            for name in _COLUMNS:
                if name not in present:
                    cur.execute(f"ALTER TABLE relay_turns ADD COLUMN {name} {_sql_type(name)}")
            # turns and threads are found by their id's key (id_key), in any spelling
            cur.execute(
                "SELECT turn_id, thread_id FROM relay_turns "
                "WHERE turn_key IS NULL OR thread_key IS NULL"
            )
            unkeyed = cur.fetchall()
            if unkeyed:
                cur.executemany(
                    "UPDATE relay_turns SET turn_key = %s, thread_key = %s WHERE turn_id = %s",
                    [(id_key(t), id_key(h), t) for t, h in unkeyed],
                )
            cur.execute(
                "CREATE UNIQUE INDEX IF NOT EXISTS relay_turns_key ON relay_turns (turn_key)"
            )
            cur.execute(
                "CREATE INDEX IF NOT EXISTS relay_turns_thread_key "
                "ON relay_turns (thread_key, started_at DESC)"
            )
            cur.execute(
                "CREATE INDEX IF NOT EXISTS relay_turns_status ON relay_turns (status, owner)"
            )
            cur.execute(
                "CREATE INDEX IF NOT EXISTS relay_turns_user "
                "ON relay_turns (user_id, started_at DESC)"
            )
            cur.execute(
                "SELECT 1 FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_name = 'relay_threads'"
            )
            if cur.fetchone() is None:
                cur.execute(_THREADS_TABLE)
                cur.execute(_THREADS_BACKFILL)
            # a thread's id as spelled, metadata and times (relay/turns/threads.py)
            cur.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'relay_threads'"
            )
            present = {row[0] for row in cur.fetchall()}
            for name, kind in threads.DETAIL_COLUMNS.items():
                if name not in present:
                    cur.execute(f"ALTER TABLE relay_threads ADD COLUMN {name} {kind}")
            if "thread_id" not in present:
                cur.execute(threads.backfill("relay_threads", "relay_turns"))
                cur.execute(
                    "CREATE INDEX IF NOT EXISTS relay_threads_owner "
                    "ON relay_threads (owner, created_at DESC)"
                )

    # -- sync core (worker threads) -------------------------------------------------------

    def _create(self, record: TurnRecord) -> None:
        import psycopg

        columns = [*_COLUMNS, "owner"]
        values = [getattr(record, c) for c in _COLUMNS] + [self.instance_id]
        try:
            with self._cursor() as cur:
                cur.execute(
                    f"INSERT INTO relay_turns ({', '.join(columns)}) "
                    f"VALUES ({', '.join('%s' for _ in columns)})",
                    values,
                )
                # the first turn of a thread makes it its user's (a later one: no change)
                now = time.time() * 1000
                cur.execute(
                    _SQL.claim,
                    (record.thread_key, record.user_id, record.thread_id, "{}", now, now),
                )
                cur.execute(_SQL.touch, (now, record.thread_key))
        except psycopg.errors.UniqueViolation:
            raise TurnExists(record.turn_id) from None

    def _get(self, turn_id: str) -> TurnRecord | None:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM relay_turns WHERE turn_key = %s",
                (id_key(turn_id),),
            )
            row = cur.fetchone()
        return _record(row) if row else None

    def _update(self, turn_id: str, changes: dict[str, Any]) -> None:
        unknown = set(changes) - set(_COLUMNS)
        if unknown:
            raise ValueError(f"unknown turn fields {unknown}")
        if not changes:
            return
        changes = dict(changes)
        if changes.get("status") == RUNNING:  # whoever runs it now owns it
            changes["owner"] = self.instance_id
        sets = ", ".join(f"{k} = %s" for k in changes)
        with self._cursor() as cur:
            cur.execute(
                f"UPDATE relay_turns SET {sets} WHERE turn_key = %s",
                [*changes.values(), id_key(turn_id)],
            )
            if "status" in changes:  # its thread was updated
                cur.execute(_SQL.touch_of_turn, (time.time() * 1000, id_key(turn_id)))

    def _list(
        self,
        thread_id: str | None,
        limit: int,
        before: float | None,
        graph: str | None = None,
        status: str | None = None,
        user_id: str | None = None,
    ) -> list[TurnRecord]:
        clause, args = list_filter(thread_id, before, "%s", graph, status, user_id)
        with self._cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM relay_turns {clause} "
                "ORDER BY started_at DESC LIMIT %s",
                [*args, limit],
            )
            return [_record(row) for row in cur.fetchall()]

    def _mark_interrupted(self) -> int:
        with self._cursor() as cur:
            cur.execute(
                "UPDATE relay_turns SET status = 'interrupted', ended_at = %s "
                "WHERE status = %s AND owner = %s",
                (time.time() * 1000, RUNNING, self.instance_id),
            )
            return cur.rowcount

    def _renew_leases(self, leases: dict[str, int], until: float) -> set[str]:
        with self._cursor() as cur:
            return lease_store.pg_renew(cur, leases, until)

    def _claim_expired(
        self, now: float, until: float, exclude: list[str], startup: bool
    ) -> list[TurnRecord]:
        with self._cursor() as cur:
            rows = lease_store.pg_claim(
                cur, _COLUMNS, self.instance_id, now, until, exclude, startup
            )
        return [_record(row) for row in rows]

    def _free_thread(self, record: TurnRecord) -> bool:
        """The hung owner's session still holds the thread's advisory lock (a dead
        owner's went with its connection): end that session, and the lock with it."""
        from relay.store.schema import lock_key

        if not record.lock_holder:
            return False
        key = lock_key(self.schema, f"thread:{record.thread_id}")
        with self._cursor() as cur:
            return lease_store.pg_free_thread(cur, key, record.lock_holder)

    def _claim_thread(self, thread_id: str, user_id: str, metadata: dict[str, Any]) -> str:
        key = id_key(thread_id)
        now = time.time() * 1000
        text = threads.metadata_text(metadata)
        with self._cursor() as cur:  # a concurrent claim's insert commits first, or waits
            cur.execute(_SQL.claim, (key, user_id, thread_id, text, now, now))
            cur.execute(_OWNER, (key,))
            row = cur.fetchone()
        return str(row[0])

    def _get_thread(self, thread_id: str) -> ThreadRecord | None:
        with self._cursor() as cur:
            cur.execute(_SQL.one, (id_key(thread_id),))
            row = cur.fetchone()
        return threads.thread_row(row) if row else None

    def _patch_thread(
        self, thread_id: str, metadata: dict[str, Any], revive: bool
    ) -> ThreadRecord | None:
        key = id_key(thread_id)
        now = time.time() * 1000
        with self._cursor() as cur:  # the row locked from the read to the write
            cur.execute("SELECT 1 FROM relay_threads WHERE thread_key = %s FOR UPDATE", (key,))
            if cur.fetchone() is None:
                return None
            cur.execute(_SQL.one, (key,))
            row = cur.fetchone()
            if revive:
                cur.execute(_SQL.revive, (threads.metadata_text(metadata), now, now, key))
            else:
                merged = {**threads.thread_row(row).metadata, **metadata}
                cur.execute(_SQL.set_metadata, (threads.metadata_text(merged), now, key))
            cur.execute(_SQL.one, (key,))
            found = cur.fetchone()
        return threads.thread_row(found)

    def _delete_thread(self, thread_id: str) -> None:
        now = time.time() * 1000
        with self._cursor() as cur:
            cur.execute(_SQL.delete, (now, now, id_key(thread_id)))

    def _threads(self, user_id: str | None, keys: list[str] | None) -> list[ThreadRecord]:
        sql, args = _SQL.listing(user_id, keys)
        with self._cursor() as cur:
            cur.execute(sql, args)
            return [threads.thread_row(row) for row in cur.fetchall()]

    def _thread_owner(self, thread_id: str) -> str | None:
        with self._cursor() as cur:
            cur.execute(_OWNER, (id_key(thread_id),))
            row = cur.fetchone()
        return str(row[0]) if row else None

    # -- the thread lock (the async API comes from ThreadedTurnAPI) ---------------------

    async def lock_thread(self, thread_id: str) -> ThreadLock | None:
        """Hold the thread for one run, across every instance; None if another holds it.

        A session advisory lock on a connection of its own: released when the run ends,
        and by PostgreSQL itself if the instance dies with it, or the database goes away
        (no stale lock to clean). StoreUnavailable while the database is away."""
        return await asyncio.to_thread(self._lock_thread, thread_id)

    def _lock_thread(self, thread_id: str) -> ThreadLock | None:
        from relay.store.schema import lock_key

        key = lock_key(self.schema, f"thread:{thread_id}")
        return self._locks.try_lock(key, f"thread {thread_id}")

    def close(self) -> None:
        self._close_executor()
        for pool in self._opened:
            pool.close()


def _record(row: Any) -> TurnRecord:
    values = list(row)
    for i, name in enumerate(_COLUMNS):  # NULLs in columns added by a later migration
        if values[i] is None and name in _NOT_NULL_DEFAULTS:
            values[i] = _NOT_NULL_DEFAULTS[name]
    return TurnRecord(*values)


_NOT_NULL_DEFAULTS = {
    f.name: f.default
    for f in fields(TurnRecord)
    if f.default is not MISSING and f.default is not None
}


def open_turn_store(settings: Any) -> Any:
    """The turn store ``RELAY_STORE`` implies: SQLite under RELAY_DATA_DIR, or Postgres."""
    if settings.store.startswith(("postgresql://", "postgres://")):
        return PostgresTurnStore(
            settings.store, instance_id=settings.instance_id, schema=settings.pg_schema
        )
    from relay.turns.sqlite import SQLiteTurnStore

    return SQLiteTurnStore(settings.data_dir / "turns.db")
