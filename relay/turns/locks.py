"""Thread locks across replicas: a PostgreSQL session advisory lock, held by one run.

A session lock belongs to a connection, so a run holds one connection of its own for its
whole duration; the connections come from a pool of their own (:class:`AdvisoryLocks`),
apart from the turn records' pool, so that long runs never starve the short queries. A
checkout is checked like any other (relay/store/pool.py): a connection that died in the pool
is replaced, not handed to a run.

A lock ends with its session: when the instance dies, or when the database goes away,
PostgreSQL frees it. So a lock whose connection died is simply gone; releasing it closes
what is left and never raises into the run (it logs that the thread was unguarded for
the rest of the run). A connection goes back to the pool only after
``pg_advisory_unlock_all()`` succeeded on it: a pooled session never carries a lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from psycopg_pool import ConnectionPool

from relay.store.pool import describe, open_pool, ping, unavailable_as

log = logging.getLogger("relay.locks")

#: runs that hold a thread on one instance at once; one more waits for a connection up to
#: POOL_TIMEOUT_S and then gets 503 store_unavailable. Connections open only on demand
#: (one kept warm) and close after psycopg_pool's max_idle (10 min)
MAX_HELD = 64


class AdvisoryLocks:
    def __init__(
        self,
        url: str,
        *,
        max_held: int = MAX_HELD,
        connect_timeout_s: float = 5.0,
        schema: str | None = None,
    ) -> None:
        """``schema``: the deployment's (relay/store/schema.py); the keys a caller locks
        are derived from it (:func:`relay.store.schema.lock_key`)."""
        self._pool = open_pool(
            url,
            name="relay-thread-locks",
            max_size=max_held,
            connect_timeout_s=connect_timeout_s,
            schema=schema,
        )

    def try_lock(self, key: int, label: str) -> ThreadLock | None:
        """Hold ``key`` on a connection of its own; None if another session holds it.
        Blocking: call it from a worker thread."""
        with unavailable_as("thread locks"):
            conn = self._pool.getconn()
            try:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                held = bool(row and row[0])
            except BaseException:
                self._pool.putconn(conn)  # broken: the pool discards it and connects anew
                raise
        if not held:
            self._pool.putconn(conn)  # it holds nothing
            return None
        return ThreadLock(self._pool, conn, label)

    def ping(self) -> None:
        ping(self._pool, "thread locks")

    def close(self) -> None:
        self._pool.close()


class ThreadLock:
    """A thread held by one run (see :meth:`AdvisoryLocks.try_lock`)."""

    def __init__(self, pool: ConnectionPool, conn: Any, label: str) -> None:
        self._pool = pool
        self._conn: Any = conn
        self.label = label
        #: the PostgreSQL session (backend pid) that holds the lock: a peer that takes the
        #: turn over from a hung instance ends that session to free the thread
        self.holder: int = int(conn.info.backend_pid)

    async def release(self) -> None:
        await asyncio.to_thread(self._release)

    def _release(self) -> None:
        conn = self._conn
        self._conn = None
        if conn is None:  # released already
            return
        try:
            conn.execute("SELECT pg_advisory_unlock_all()")
        except Exception as exc:
            # the session is gone, and its lock with it: PostgreSQL freed it when the
            # connection died, so another instance could have taken the thread since
            log.warning(
                "relay: the lock on %s was lost with its database connection "
                "before the run ended (%s)",
                self.label,
                describe(exc),
            )
            with contextlib.suppress(Exception):
                conn.close()  # never back to the pool as a usable session
        try:
            self._pool.putconn(conn)  # a closed one is discarded and replaced
        except Exception:  # the pool is closed (shutdown): the connection goes with it
            with contextlib.suppress(Exception):
                conn.close()
