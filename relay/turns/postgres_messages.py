"""Saved answers in PostgreSQL (``RELAY_STORE=postgresql://...``): the API of
:class:`relay.turns.messages.SQLiteMessageStore`, shared by every replica, so an answer
saved by the instance that ran its turn is rated on any other
(``POST /messages/{id}/feedback``).

psycopg 3 from a checked pool (relay/store/pool.py): while the database is away every call
raises StoreUnavailable (a 503 on the feedback route; a failed save only means no
``message_saved``, as with SQLite), and the next call after it is back works.

The table lives in the deployment's schema (relay/store/schema.py: ``RELAY_PG_SCHEMA``, or
the connection's current schema), created under an advisory lock whose key is that
schema's own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from relay.turns.messages import (
    Message,
    MessageStore,
    SQLiteMessageStore,
    ThreadedMessageAPI,
)


class PostgresMessageStore(ThreadedMessageAPI):
    def __init__(self, url: str, connect_timeout_s: float = 5.0, schema: str | None = None) -> None:
        """``schema``: the deployment's schema (``RELAY_PG_SCHEMA``, created if missing);
        None: the current schema of ``url``'s connections."""
        from relay.store.pool import open_pool, pool_schema
        from relay.store.schema import lock_key

        self._pool = open_pool(
            url, name="relay-messages", connect_timeout_s=connect_timeout_s, schema=schema
        )
        try:
            #: the schema the table lives in
            self.schema = pool_schema(self._pool)
            with self._cursor() as cur:
                # one migration at a time, per schema
                cur.execute(
                    "SELECT pg_advisory_xact_lock(%s)", (lock_key(self.schema, "messages"),)
                )
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS relay_messages (message_id TEXT PRIMARY KEY, "
                    "turn_id TEXT NOT NULL, thread_id TEXT NOT NULL, text TEXT NOT NULL, "
                    "created_at DOUBLE PRECISION NOT NULL, rating TEXT, comment TEXT, "
                    "rated_at DOUBLE PRECISION)"
                )
                cur.execute(
                    "CREATE INDEX IF NOT EXISTS relay_messages_turn ON relay_messages (turn_id)"
                )
        except BaseException:
            self._pool.close()  # its worker threads must not outlive a failed start
            raise

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        from relay.store.pool import transaction_cursor

        with transaction_cursor(self._pool, "saved answers") as cur:
            yield cur

    def _save(self, message: Message) -> None:
        with self._cursor() as cur:
            cur.execute(
                "INSERT INTO relay_messages (message_id, turn_id, thread_id, text, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (message_id) DO UPDATE SET "
                "turn_id = EXCLUDED.turn_id, thread_id = EXCLUDED.thread_id, "
                "text = EXCLUDED.text, created_at = EXCLUDED.created_at",
                (
                    message.message_id,
                    message.turn_id,
                    message.thread_id,
                    message.text,
                    message.created_at,
                ),
            )

    def _get(self, message_id: str) -> Message | None:
        with self._cursor() as cur:
            cur.execute(
                "SELECT message_id, turn_id, thread_id, text, created_at, rating, "
                "comment FROM relay_messages WHERE message_id = %s",
                (message_id,),
            )
            row = cur.fetchone()
        return Message(*row) if row else None

    def _rate(self, message_id: str, rating: str, comment: str | None) -> bool:
        with self._cursor() as cur:
            cur.execute(
                "UPDATE relay_messages SET rating = %s, comment = %s, rated_at = %s "
                "WHERE message_id = %s",
                (rating, comment, time.time() * 1000, message_id),
            )
            return bool(cur.rowcount == 1)

    def close(self) -> None:
        self._pool.close()


def open_message_store(settings: Any) -> MessageStore:
    """The message store ``RELAY_STORE`` implies: SQLite under RELAY_DATA_DIR, or Postgres."""
    if settings.store.startswith(("postgresql://", "postgres://")):
        return PostgresMessageStore(settings.store, schema=settings.pg_schema)
    return SQLiteMessageStore(settings.data_dir / "messages.db")
