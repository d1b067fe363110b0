"""langgraph.json's ``checkpointer.ttl`` with ``strategy: "delete"``: threads whose last
checkpoint is older than ``default_ttl`` minutes are deleted from the relay's
checkpointer, every ``sweep_interval_minutes`` (default 5), at most ``sweep_limit``
(default 1000) a sweep.

langgraph-checkpoint-sqlite 3.1 and -postgres 3.2 keep no expiry of their own, so the
relay sweeps: :class:`ThreadSweeper`, run by ``Relay.lifespan``. A thread's age is its
newest checkpoint's id: LangGraph's checkpoint ids are UUIDv6, ordered by their time,
so one query per sweep (``GROUP BY thread_id HAVING MAX(checkpoint_id) < cutoff``) finds
the threads idle for longer than the TTL, and each is deleted with the saver's own
``adelete_thread`` (every checkpoint, blob and write of the thread).

A deletion never meets a run of the same thread:

- in this process, :class:`ThreadGate`: a run holds its thread from before the graph
  reads its checkpoint until its last write (``GraphAgent`` enters the gate around the
  graph's run); a thread in use is skipped, and a run that arrives while its thread is
  being deleted waits for the deletion and starts on an empty thread (the thread had
  expired);
- across instances (PostgreSQL), the thread lock every run holds
  (``TurnStore.lock_thread``, a session advisory lock): the sweeper takes it too, skips a
  thread another instance runs, and a run that starts elsewhere during the deletion is
  refused as on any busy thread (409 ``thread_busy``).

Under the lock the thread's age is read again, so a thread that a run touched between the
query and the lock is kept. What stays: the turn records and spans of the thread's turns
(their own retention, RELAY_STORE_RETENTION_S); a paused turn of an expired thread can no
longer be resumed. Graphs compiled with a checkpointer of their own are not swept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger("relay.threads")

#: 100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch
_UUID_EPOCH = 0x01B21DD213814000


@dataclass(frozen=True, slots=True)
class ThreadTTL:
    """``checkpointer.ttl``, checked (relay/langgraph/checkpointer_config.py)."""

    default_ttl: float  # minutes since the thread's last checkpoint
    sweep_interval_minutes: float = 5.0
    sweep_limit: int = 1000


class HeldThread(Protocol):
    async def release(self) -> None: ...


class ThreadGate:
    """In one process: a thread is either used by runs or being deleted, never both."""

    def __init__(self) -> None:
        self._using: dict[str, int] = {}
        self._deleting: dict[str, asyncio.Event] = {}

    @contextlib.asynccontextmanager
    async def using(self, thread_id: str) -> AsyncIterator[None]:
        """Around a run of the thread: waits while the thread is being deleted."""
        while (deleted := self._deleting.get(thread_id)) is not None:
            await deleted.wait()
        self._using[thread_id] = self._using.get(thread_id, 0) + 1
        try:
            yield
        finally:
            left = self._using[thread_id] - 1
            if left:
                self._using[thread_id] = left
            else:
                del self._using[thread_id]

    @contextlib.asynccontextmanager
    async def deleting(self, thread_id: str) -> AsyncIterator[bool]:
        """Around a deletion: yields False (delete nothing) while a run uses the thread."""
        if thread_id in self._using or thread_id in self._deleting:
            yield False
            return
        done = asyncio.Event()
        self._deleting[thread_id] = done
        try:
            yield True
        finally:
            del self._deleting[thread_id]
            done.set()


def cutoff_id(older_than_s: float, now_s: float | None = None) -> str:
    """The smallest UUIDv6 checkpoint id of the moment ``older_than_s`` seconds ago: a
    checkpoint id below it was made before that moment."""
    now_ns = time.time_ns() if now_s is None else int(now_s * 1e9)
    stamp = (now_ns - int(older_than_s * 1e9)) // 100 + _UUID_EPOCH
    value = ((stamp >> 12) & 0xFFFFFFFFFFFF) << 80 | 0x6 << 76 | (stamp & 0x0FFF) << 64
    return str(uuid.UUID(int=value | 0x8000 << 48))  # the RFC 4122 variant, as uuid6's


class ThreadSweeper:
    """Deletes the relay's checkpointer's threads idle for longer than the TTL."""

    def __init__(
        self,
        saver: Any,
        ttl: ThreadTTL,
        gate: ThreadGate,
        lock_thread: Callable[[str], Awaitable[HeldThread | None]],
    ) -> None:
        self.saver = saver
        self.ttl = ttl
        self.gate = gate
        self.lock_thread = lock_thread
        self._task: asyncio.Task[None] | None = None

    async def sweep(self) -> int:
        """One sweep; the number of threads deleted."""
        cutoff = cutoff_id(self.ttl.default_ttl * 60)
        deleted = 0
        for thread_id in await self._expired(cutoff, self.ttl.sweep_limit):
            if await self._delete(thread_id, cutoff):
                deleted += 1
        if deleted:
            log.info(
                "relay: deleted %d thread(s) idle for over %g min", deleted, self.ttl.default_ttl
            )
        return deleted

    async def _delete(self, thread_id: str, cutoff: str) -> bool:
        async with self.gate.deleting(thread_id) as free:
            if not free:
                return False
            held = await self.lock_thread(thread_id)
            if held is None:  # another instance runs it
                return False
            try:
                if await self._expired(cutoff, 1, thread_id) != [thread_id]:
                    return False  # a run wrote to it since the query
                await self.saver.adelete_thread(thread_id)
                return True
            finally:
                await held.release()

    async def _expired(self, cutoff: str, limit: int, thread_id: str | None = None) -> list[str]:
        where = "WHERE thread_id = {p} " if thread_id is not None else ""
        sql = (
            "SELECT thread_id FROM checkpoints "
            + where
            + "GROUP BY thread_id HAVING MAX(checkpoint_id) < {p} LIMIT {p}"
        )
        args = (*([thread_id] if thread_id is not None else []), cutoff, limit)
        conn = self.saver.conn
        if hasattr(conn, "connection"):  # a psycopg_pool pool: AsyncPostgresSaver's
            async with conn.connection() as pg:
                cur = await pg.execute(sql.format(p="%s"), args)
                return [_first(row) for row in await cur.fetchall()]
        async with self.saver.lock:  # AsyncSqliteSaver: one aiosqlite connection
            async with conn.execute(sql.format(p="?"), args) as cur:
                return [_first(row) for row in await cur.fetchall()]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ThreadSweeper]:
        """Sweeps every ``sweep_interval_minutes`` while the block runs."""
        self._task = asyncio.create_task(self._loop(), name="relay thread TTL sweeper")
        try:
            yield self
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.ttl.sweep_interval_minutes * 60)
            try:
                await self.sweep()
            except Exception:
                log.exception("relay: the thread TTL sweep failed; the next one retries")


def _first(row: Any) -> str:
    return str(row["thread_id"] if isinstance(row, dict) else row[0])
