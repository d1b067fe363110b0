"""The LangGraph checkpointer: SQLite under RELAY_DATA_DIR (default), or PostgreSQL so
that replicas share threads (a turn paused on one instance resumes on another).

``RELAY_CHECKPOINTER``: ``sqlite`` or a ``postgresql://`` URL; unset, it follows
``RELAY_STORE`` (a ``postgresql://`` store puts the checkpoints in the same database).

PostgreSQL: the saver works on a psycopg_pool ``AsyncConnectionPool`` (LangGraph accepts
one as its ``conn``), never on a single connection: a single connection dies with the
server and every later turn fails on it, while the pool checks each connection before use
and replaces a dead one, so turns work again as soon as PostgreSQL is back (the pool's
numbers are those of relay/store/pool.py, which opens it). LangGraph needs ``autocommit``,
``prepare_threshold=0`` and ``dict_row`` on its connections.
:func:`check_checkpointer` is the app's readiness check (``Relay.add_readiness_check``),
and :func:`read_checkpoints` bounds a request's read and answers 503 while it is away.

LangGraph's tables (``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes``,
``checkpoint_migrations``) land in the deployment's schema (relay/store/schema.py:
``RELAY_PG_SCHEMA``, created if missing, or the connection's current schema): it is first
on each pooled connection's ``search_path``, so LangGraph's unqualified statements find
and create them there, and the setup lock's key is that schema's own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from relay.errors import StoreUnavailable
from relay.settings import ConfigError, RelaySettings

T = TypeVar("T")
#: a request's read of the checkpoints: a pool timeout (5 s), and a margin
READ_TIMEOUT_S = 6.0

_POSTGRES = ("postgresql://", "postgres://")


def checkpointer_url(settings: RelaySettings, env: Mapping[str, str]) -> str | None:
    """The Postgres URL of the checkpointer, or None for SQLite."""
    raw = (env.get("RELAY_CHECKPOINTER") or "").strip()
    if raw in ("", "auto"):
        return settings.store if settings.store.startswith(_POSTGRES) else None
    if raw == "sqlite":
        return None
    if raw.startswith(_POSTGRES):
        return raw
    raise ConfigError(f"RELAY_CHECKPOINTER={raw!r}: use 'sqlite' or a postgresql:// URL")


@asynccontextmanager
async def open_checkpointer(
    settings: RelaySettings, env: Mapping[str, str], serde: Any = None
) -> AsyncIterator[Any]:
    """The checkpointer, set up, for the life of the block. ``serde``: the serializer
    it reads and writes with (langgraph.json's ``checkpointer.serde``,
    relay/langgraph/checkpointer_config.py); None: LangGraph's default."""
    url = checkpointer_url(settings, env)
    if url is None:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        # AsyncSqliteSaver.from_conn_string, with the serializer it does not take
        async with aiosqlite.connect(str(settings.data_dir / "checkpoints.db")) as conn:
            sqlite_saver = AsyncSqliteSaver(conn, serde=serde)
            await sqlite_saver.setup()  # WAL (LangGraph's own setup), then:
            # WAL + synchronous=NORMAL, as the turn records and the span store: a commit
            # no longer waits for the disk (an fsync per checkpoint under every running
            # turn), and survives a crash of the process; only an OS crash or a power loss
            # can take the last commits back (README, "Durability")
            await sqlite_saver.conn.execute("PRAGMA synchronous=NORMAL")
            yield sqlite_saver
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row

    from relay.store.pool import open_async_pool
    from relay.store.schema import lock_key, migrating

    # the driver's own reason if PostgreSQL is not there at start-up (see open_pool), and
    # the schema the checkpoints live in, first on every pooled connection's search_path
    pool, schema = await open_async_pool(
        url,
        name="relay-checkpoints",
        schema=settings.pg_schema,
        prepare_threshold=0,
        row_factory=dict_row,
    )
    try:
        saver = AsyncPostgresSaver(pool, serde=serde)
        # instances that start together must not run the migrations at the same time
        async with migrating(url, lock_key(schema, "checkpoints")):
            await saver.setup()
        yield saver
    finally:
        await pool.close()


@contextlib.contextmanager
def checkpoints_unavailable() -> Iterator[None]:
    """Around a use of the saver outside a run: the driver's "cannot do it now" errors
    become StoreUnavailable, answered 503. SQLite raises none of them: nothing changes
    there."""
    from relay.store.pool import unavailable_as  # without the postgres extra: a no-op

    with unavailable_as("checkpoints"):
        yield


async def read_checkpoints(read: Awaitable[T]) -> T:
    """A request's look at a thread's checkpoints (``graph.aget_state``), bounded: the
    saver runs one operation at a time behind its own lock even on a pool, so while the
    database is away requests would queue there for a pool timeout each; past
    READ_TIMEOUT_S this one answers 503 instead of waiting its turn in that queue."""
    with checkpoints_unavailable():
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                return await read
        except TimeoutError:
            raise StoreUnavailable(
                "checkpoints", f"no answer within {READ_TIMEOUT_S:g} s"
            ) from None


async def check_checkpointer(saver: Any) -> None:
    """Readiness: a round trip through the saver's pool, with a short wait; for SQLite's
    saver, a lookup of a thread that does not exist (the file opens and answers)."""
    from relay.store.pool import PING_TIMEOUT_S

    try:
        from psycopg_pool import AsyncConnectionPool
    except ImportError:  # no 'postgres' extra: the saver is SQLite's
        AsyncConnectionPool = None  # type: ignore[assignment,misc]

    pool = getattr(saver, "conn", None)
    with checkpoints_unavailable():
        if AsyncConnectionPool is not None and isinstance(pool, AsyncConnectionPool):
            async with pool.connection(timeout=PING_TIMEOUT_S) as conn:
                await conn.execute("SELECT 1")
        else:
            await saver.aget_tuple(
                {"configurable": {"thread_id": "relay-readyz", "checkpoint_ns": ""}}
            )
