"""One check-and-start at a time per turn and per thread, not one for the whole process.

``/chat``, ``/chat/resume`` and ``/agui`` check what a request may do (a known turn id
attaches, a busy or paused thread is a 409) and then start its run; two requests that name
the same turn or the same thread must not both pass the check (duplicates attach, never
rerun). Requests that share neither wait for nothing: under load, a start no longer queues
behind every other start's round trips to the stores (issue 18, first byte under load).

:meth:`StartLocks.hold` takes the locks of every key a request names, in one order (sorted),
so two requests never wait for each other in a cycle. A key's lock lives while someone holds
or waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from relay.turns.records import id_key


class StartLocks:
    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # key -> (lock, users)

    @staticmethod
    def keys(*, turn: str | None = None, thread: str | None = None) -> list[str]:
        """The keys of a turn and a thread, in any spelling of their ids."""
        out = []
        if turn is not None:
            out.append("turn:" + id_key(turn))
        if thread is not None:
            out.append("thread:" + id_key(thread))
        return out

    def held(self) -> int:
        """Keys held or waited for now."""
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, keys: list[str]) -> AsyncIterator[None]:
        """Hold every key of ``keys`` (no key: nothing to wait for)."""
        ordered = sorted(set(keys))
        for key in ordered:
            lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
            self._locks[key] = (lock, users + 1)
        taken: list[asyncio.Lock] = []
        try:
            for key in ordered:
                lock = self._locks[key][0]
                await lock.acquire()
                taken.append(lock)
            yield
        finally:
            for lock in reversed(taken):
                lock.release()
            for key in ordered:
                lock, users = self._locks[key]
                if users > 1:
                    self._locks[key] = (lock, users - 1)
                else:
                    del self._locks[key]
