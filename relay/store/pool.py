"""PostgreSQL connection pools for every user of the database (turn records, thread locks,
the span store; the LangGraph checkpointer builds its async pool with the same numbers),
and the rule that turns "the database is gone" into an answer instead of a 500.

Why pools, and why ``check``: a connection held for the life of the process dies with its
server (a restart, a fail-over, a proxy's idle cut) and stays dead; the next request fails
on it even when the database is back. A ``psycopg_pool`` pool built with
``check=ConnectionPool.check_connection`` makes one empty round trip on every checkout,
discards a connection that fails it and connects a new one, so after an outage the next
request works, with no restart.

While the database is away a checkout waits at most :data:`POOL_TIMEOUT_S`, then the pool
raises ``PoolTimeout``. That, and every ``psycopg.OperationalError`` (``PoolTimeout`` is
one), becomes :class:`relay.errors.StoreUnavailable` (``503 store_unavailable`` +
``Retry-After``) through :func:`unavailable_as`.

:data:`RECONNECT_TIMEOUT_S` bounds how long a pool retries one lost connection with
exponential backoff (psycopg_pool's default is 5 minutes, whose late retries are a minute
or more apart): with a short bound the pool gives up early and the next checkout starts a
fresh attempt at once, so a database that is back is found within seconds.

Every pool works in its deployment's schema (relay/store/schema.py): :func:`open_pool`
finds it on its first, plain connection (``RELAY_PG_SCHEMA``, created if missing, or the
connection's current schema) and each pooled connection has it first on its
``search_path``; :func:`pool_schema` says which it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from relay.errors import StoreUnavailable
from relay.store import schema as pg_schema

try:  # the 'postgres' extra; without it only unavailable_as is used here (SQLite's checkpointer)
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

    _UNAVAILABLE: tuple[type[Exception], ...] = (psycopg.OperationalError,)
except ImportError:  # pragma: no cover - no driver: no driver errors to translate
    _UNAVAILABLE = ()

#: the longest a request waits for a connection (the pool is full, or the database away)
POOL_TIMEOUT_S = 5.0
#: a readiness probe's own, shorter wait: /readyz must answer while a probe still waits
PING_TIMEOUT_S = 2.0
#: how long a pool keeps retrying a lost connection before the next checkout starts anew
RECONNECT_TIMEOUT_S = 10.0
#: connections per pool: each query is short, and they are only opened on demand
MAX_CONNECTIONS = 4
#: a connect to a host that does not answer at all (a refused port fails at once anyway)
CONNECT_TIMEOUT_S = 5.0


def connection_kwargs(connect_timeout_s: float = CONNECT_TIMEOUT_S) -> dict[str, Any]:
    """What every pooled connection is opened with."""
    return {"autocommit": True, "connect_timeout": max(1, int(connect_timeout_s))}


def open_pool(
    url: str,
    *,
    name: str,
    max_size: int = MAX_CONNECTIONS,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    schema: str | None = None,
    idle_in_transaction_s: float | None = None,
) -> ConnectionPool:
    """An open, checked pool of autocommit connections to ``url`` (one kept warm), each
    working in the deployment's schema: ``schema`` (``RELAY_PG_SCHEMA``, created if
    missing) or, when None, the current schema of ``url``'s connections.

    ``idle_in_transaction_s``: the server ends a session of this pool that sits that long
    inside a transaction (``idle_in_transaction_session_timeout``), releasing its row
    locks. A process frozen between a statement and its commit (SIGSTOP, a VM paused)
    would otherwise hold the rows it changed for as long as it is frozen: the turn
    records' claims skip locked rows (relay/turns/lease_store.py), so a hung owner could
    keep its turn from ever being taken over.

    One plain connection first: if the database cannot be reached at start-up, the
    process refuses to start with the driver's own reason ("connection refused", "no such
    database"), not the pool's "initialization incomplete"; the schema is found on it."""
    kwargs = connection_kwargs(connect_timeout_s)
    resolved = pg_schema.find(url, schema, kwargs)
    pool: ConnectionPool = ConnectionPool(
        url,
        name=name,
        kwargs=kwargs,
        configure=_configure(resolved, idle_in_transaction_s),
        min_size=1,
        max_size=max_size,
        open=False,
        check=ConnectionPool.check_connection,
        timeout=POOL_TIMEOUT_S,
        reconnect_timeout=RECONNECT_TIMEOUT_S,
    )
    pool.open(wait=True, timeout=connect_timeout_s + POOL_TIMEOUT_S)
    return pool


def _configure(schema: str, idle_in_transaction_s: float | None) -> Callable[[Any], None]:
    """Each new connection: in ``schema`` first and, when asked, with the server's bound
    on a transaction left idle (set for the session, so a URL's own ``options`` stand)."""
    pin = pg_schema.pin(schema)
    if idle_in_transaction_s is None:
        return pin
    bound_ms = max(1, int(idle_in_transaction_s * 1000))

    def configure(conn: Any) -> None:
        pin(conn)
        conn.execute(f"SET idle_in_transaction_session_timeout = {bound_ms}")

    return configure


async def open_async_pool(
    url: str, *, name: str, schema: str | None = None, **extra: Any
) -> tuple[AsyncConnectionPool[Any], str]:
    """:func:`open_pool` for asyncio users of PostgreSQL (LangGraph's checkpointer and
    store): an open, checked ``AsyncConnectionPool`` with the same numbers, its
    connections opened with :func:`connection_kwargs` and ``extra`` (LangGraph needs
    ``prepare_threshold=0`` and ``row_factory=dict_row``), each working in the
    deployment's schema first; and that schema's name."""
    resolved = await asyncio.to_thread(pg_schema.find, url, schema, connection_kwargs())
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url,
        name=name,
        kwargs={**connection_kwargs(), **extra},
        min_size=1,
        max_size=MAX_CONNECTIONS,
        open=False,
        check=AsyncConnectionPool.check_connection,
        configure=pg_schema.apin(resolved),
        timeout=POOL_TIMEOUT_S,
        reconnect_timeout=RECONNECT_TIMEOUT_S,
    )
    await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S + POOL_TIMEOUT_S)
    return pool, resolved


def pool_schema(pool: ConnectionPool) -> str:
    """The schema ``pool``'s connections work in (the first on their search_path)."""
    with pool.connection() as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
    if row is None or row[0] is None:  # the schema was dropped under the pool
        raise RuntimeError("the pool's connections have no current schema")
    return str(row[0])


def describe(exc: BaseException) -> str:
    """A driver error in one short line (for logs and /readyz)."""
    if isinstance(exc, PoolTimeout):
        return f"no database connection ({' '.join(str(exc).split())})"
    return " ".join(str(exc).split())[:200] or type(exc).__name__


@contextlib.contextmanager
def unavailable_as(what: str) -> Iterator[None]:
    """Re-raise the driver's "cannot do it now" errors as :class:`StoreUnavailable`
    naming ``what``. Works around ``await`` too (a plain ``with`` in async code).
    Integrity errors (a duplicate key) and programming errors pass through as they are."""
    try:
        yield
    except _UNAVAILABLE as exc:  # psycopg.OperationalError: PoolTimeout and PoolClosed too
        raise StoreUnavailable(what, describe(exc)) from exc


@contextlib.contextmanager
def transaction_cursor(pool: ConnectionPool, what: str) -> Iterator[Any]:
    """A cursor of a pooled connection inside one transaction, committed when the block
    ends (rolled back if it raises); the database's "cannot do it now" errors as
    :class:`StoreUnavailable` naming ``what``."""
    with unavailable_as(what), pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
        yield cur


def ping(pool: ConnectionPool, what: str, timeout_s: float = PING_TIMEOUT_S) -> None:
    """One round trip through ``pool`` (a readiness probe); StoreUnavailable if none."""
    with unavailable_as(what), pool.connection(timeout=timeout_s) as conn:
        conn.execute("SELECT 1")
