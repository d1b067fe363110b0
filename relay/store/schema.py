"""The PostgreSQL schema a deployment's tables live in, so that several deployments (or an
older install) can share one database without touching each other's tables.

Every PostgreSQL store of the relay (turn records, thread locks, saved answers, spans, the
LangGraph checkpointer and long-term store) works in one schema: the one named by
``RELAY_PG_SCHEMA``, created here if it is missing, or else the connection's current
schema (``current_schema()``: the first schema of its ``search_path`` that exists, as set
by the URL's ``options=-csearch_path=...``, the role or the database). :func:`find`
(:func:`resolve` on a connection of its own) finds it once, on a plain connection at
start-up, creating a named schema that is missing; :func:`pin` (and :func:`apin` for an
async pool) puts it first on every pooled connection's ``search_path``, so that each
unqualified ``CREATE TABLE``, ``ALTER TABLE`` and query, the relay's and LangGraph's,
lands in it and finds its own table before any same-named one further down the path. The
rest of the path stays after it (an extension's types, ``vector`` for instance, are found
where they were installed).

A question to the catalog (``information_schema``, ``pg_catalog``) filters on
``current_schema()``, never on a table's name alone; an advisory lock's key is derived from
the schema too (:func:`lock_key`): advisory locks are per database, and two deployments in
two schemas must neither wait on each other's migrations nor hold each other's threads.

The pin is a session setting, as the thread locks are session locks: behind a pooler
(PgBouncer) the relay needs session mode (deploy/RUNBOOK.md §13.2).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from relay.setting import ConfigError, check_schema_name


def find(url: str, named: str | None, kwargs: dict[str, Any]) -> str:
    """:func:`resolve` on a plain connection to ``url`` (opened with ``kwargs``, which
    must ask for autocommit), closed after. Blocking."""
    import psycopg

    with psycopg.connect(url, **kwargs) as conn:
        return resolve(conn, named)


def resolve(conn: Any, named: str | None) -> str:
    """The deployment's schema, on ``conn`` (autocommit): ``named``, created if it does not
    exist yet, or else the connection's current schema. ConfigError if there is none (the
    ``search_path`` names no schema that exists)."""
    from psycopg import sql

    if named:
        check_schema_name("RELAY_PG_SCHEMA", named)
        # instances that start together take turns: two concurrent CREATE SCHEMA IF NOT
        # EXISTS of one name can both find it missing, and the second fails
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(named, "schema"),))
            exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (named,))
            if exists.fetchone() is None:
                # only when missing: CREATE SCHEMA IF NOT EXISTS checks the right to create
                # schemas in the database even when the schema is there, and a role that
                # was given its schema (USAGE, CREATE on it) need not have that right
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(named)))
        return named
    row = conn.execute("SELECT current_schema()").fetchone()
    if row is None or row[0] is None:
        path = conn.execute("SHOW search_path").fetchone()
        raise ConfigError(
            f"the PostgreSQL search_path ({path[0] if path else '?'}) names no schema that "
            "exists: create it, or name the schema in RELAY_PG_SCHEMA (the relay creates it)"
        )
    return str(row[0])


def search_path(conn: Any, schema: str) -> Any:
    """The statement that puts ``schema`` first on ``conn``'s search_path, keeping the rest
    of it after (a composed ``psycopg.sql`` statement)."""
    from psycopg import sql

    return sql.SQL(
        "SELECT set_config('search_path', "
        "concat_ws(', ', {}, nullif(current_setting('search_path'), '')), false)"
    ).format(sql.Literal(sql.Identifier(schema).as_string(conn)))


def pin(schema: str) -> Callable[[Any], None]:
    """A ``configure`` callback for a ``psycopg_pool.ConnectionPool`` of autocommit
    connections: each new connection works in ``schema`` first."""

    def configure(conn: Any) -> None:
        conn.execute(search_path(conn, schema))

    return configure


def apin(schema: str) -> Callable[[Any], Awaitable[None]]:
    """:func:`pin` for an ``AsyncConnectionPool`` of autocommit connections."""

    async def configure(conn: Any) -> None:
        await conn.execute(search_path(conn, schema))

    return configure


def lock_key(schema: str, purpose: str) -> int:
    """A signed 64-bit advisory-lock key for ``purpose`` (a migration's name, a thread),
    unique to ``schema``: deployments in two schemas of one database never share one."""
    digest = hashlib.sha256(f"{schema}\x00{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@asynccontextmanager
async def migrating(url: str, key: int) -> AsyncIterator[None]:
    """Hold advisory lock ``key`` (:func:`lock_key`) on a connection of its own while the
    body runs a store's migrations, so that instances starting together run them one at a
    time. Polled, never waited for in a statement: LangGraph's migrations CREATE INDEX
    CONCURRENTLY, which waits for every statement in progress, and one waiting for this
    lock would wait for the holder in turn (a deadlock PostgreSQL cannot see: the holder
    waits for its own CREATE INDEX on another connection)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as lock:
        while True:
            row = await (await lock.execute("SELECT pg_try_advisory_lock(%s)", (key,))).fetchone()
            if row and row[0]:
                break
            await asyncio.sleep(0.1)
        try:
            yield
        finally:
            await lock.execute("SELECT pg_advisory_unlock(%s)", (key,))
