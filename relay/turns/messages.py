"""Assistant messages and their feedback.

After a turn completes, the app saves the answer as a message (in its own span, so the
``message_saved`` event comes from the spans like every other event: live and replay
agree) and the person can rate it with ``POST /messages/{id}/feedback``. Saving never
holds up the answer: ``turn_completed`` is on the bus before the save starts, and a
failed save only means no ``message_saved``.

SQLite under RELAY_DATA_DIR by default; with ``RELAY_STORE=postgresql://...`` the answers
live in PostgreSQL (relay/turns/postgres_messages.py), so that every replica rates the
answers of every other (:func:`relay.turns.postgres_messages.open_message_store`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

RATINGS = ("up", "down")


@dataclass(slots=True)
class Message:
    message_id: str
    turn_id: str
    thread_id: str
    text: str
    created_at: float
    rating: str | None = None
    comment: str | None = None


class MessageStore(Protocol):
    """Where saved answers live: :class:`SQLiteMessageStore`, or
    :class:`relay.turns.postgres_messages.PostgresMessageStore`."""

    async def save(self, message: Message) -> None: ...

    async def get(self, message_id: str) -> Message | None: ...

    async def rate(self, message_id: str, rating: str, comment: str | None) -> bool: ...

    def close(self) -> None: ...


class ThreadedMessageAPI(ABC):
    """The async API of a message store whose sync core (``_save``, ``_get``, ``_rate``)
    runs in a worker thread: SQLite and PostgreSQL share it.

    A store subclasses it and writes that sync core, the abstract methods below; the
    async methods of :class:`MessageStore` that call them come from here. The store adds
    ``close``."""

    # -- the sync core a store writes (each call runs in a worker thread) ---------------

    @abstractmethod
    def _save(self, message: Message) -> None:
        """Save ``message`` (a message of the same id is replaced)."""

    @abstractmethod
    def _get(self, message_id: str) -> Message | None:
        """The message ``message_id``, or None."""

    @abstractmethod
    def _rate(self, message_id: str, rating: str, comment: str | None) -> bool:
        """Rate the message ``message_id``; False when there is no such message."""

    # -- the async API ------------------------------------------------------------------

    async def save(self, message: Message) -> None:
        await asyncio.to_thread(self._save, message)

    async def get(self, message_id: str) -> Message | None:
        return await asyncio.to_thread(self._get, message_id)

    async def rate(self, message_id: str, rating: str, comment: str | None) -> bool:
        return await asyncio.to_thread(self._rate, message_id, rating, comment)


class SQLiteMessageStore(ThreadedMessageAPI):
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # as the other stores: see README
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS messages (message_id TEXT PRIMARY KEY, "
            "turn_id TEXT NOT NULL, thread_id TEXT NOT NULL, text TEXT NOT NULL, "
            "created_at REAL NOT NULL, rating TEXT, comment TEXT, rated_at REAL)"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS messages_turn ON messages (turn_id)")

    def _save(self, message: Message) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO messages (message_id, turn_id, thread_id, text, "
                "created_at) VALUES (?, ?, ?, ?, ?)",
                (
                    message.message_id,
                    message.turn_id,
                    message.thread_id,
                    message.text,
                    message.created_at,
                ),
            )

    def _get(self, message_id: str) -> Message | None:
        with self._lock:
            row = self._db.execute(
                "SELECT message_id, turn_id, thread_id, text, created_at, rating, comment "
                "FROM messages WHERE message_id = ?",
                (message_id,),
            ).fetchone()
        return Message(*row) if row else None

    def _rate(self, message_id: str, rating: str, comment: str | None) -> bool:
        with self._lock:
            cur = self._db.execute(
                "UPDATE messages SET rating = ?, comment = ?, rated_at = ? WHERE message_id = ?",
                (rating, comment, time.time() * 1000, message_id),
            )
            return cur.rowcount == 1

    def close(self) -> None:
        with self._lock:
            self._db.close()
