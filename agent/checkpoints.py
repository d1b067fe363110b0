"""The LangGraph checkpointer: SQLite under RELAY_DATA_DIR (default), or PostgreSQL so
that replicas share threads (a turn paused on one instance resumes on another).

``RELAY_CHECKPOINTER``: ``sqlite`` or a ``postgresql://`` URL; unset, it follows
``RELAY_STORE`` (a ``postgresql://`` store puts the checkpoints in the same database).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from relay.settings import ConfigError, RelaySettings

_POSTGRES = ("postgresql://", "postgres://")
#: pg_advisory_lock key for the checkpointer's migrations ("lg-ckpts")
_SETUP_LOCK = 0x6C672D636B707473


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
async def open_checkpointer(settings: RelaySettings, env: Mapping[str, str]
                            ) -> AsyncIterator[Any]:
    url = checkpointer_url(settings, env)
    if url is None:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(
                str(settings.data_dir / "checkpoints.db")) as saver:
            yield saver
        return
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        # instances that start together must not run the migrations at the same time
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as lock:
            await lock.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK,))
            try:
                await saver.setup()
            finally:
                await lock.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
        yield saver
