"""The turn feed: every change of a turn's status, as it is written, for whoever watches.

:class:`WatchedTurns` wraps a :class:`~relay.turns.records.TurnStore`: a record created,
or updated with a new ``status``, is read back once and handed to :class:`TurnFeed`, which
gives it to every watcher (``GET /turns`` with ``Accept: text/event-stream``, the SPA's
live list of turns; ``GET /turns/{id}/events?wait=S``, which waits for a turn to appear).
A store write costs nothing more while nobody watches.

A watcher's queue is bounded (:data:`QUEUE`): one that stops reading loses the oldest
changes and is told so (``overflowed``), never slowing a writer. With several replicas
sharing a Redis bus, each announces the turns whose status it writes (``announce``,
:mod:`relay.bus.redis_turn_changes`) and hands the others' to its watchers
(:meth:`WatchedTurns.heard`, their records read from the shared store): a watcher on
any replica sees every replica's turns.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from relay.turns.records import HeldThread, TurnRecord, TurnStore
from relay.turns.threads import ThreadRecord

#: changes a watcher may fall behind by before the oldest are dropped
QUEUE = 256


class Watcher:
    """One reader of the feed: changes as they come, a bounded queue."""

    def __init__(self, feed: TurnFeed, accepts: Callable[[TurnRecord], bool]) -> None:
        self._feed = feed
        self.accepts = accepts
        self._items: deque[TurnRecord] = deque(maxlen=QUEUE)
        self._wake = asyncio.Event()
        self.overflowed = False

    def put(self, record: TurnRecord) -> None:
        if not self.accepts(record):
            return
        if len(self._items) == QUEUE:
            self.overflowed = True
        self._items.append(record)
        self._wake.set()

    async def next(self, timeout: float | None) -> list[TurnRecord]:
        """The changes since the last call; [] when ``timeout`` passed without one."""
        if not self._items:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                return []
        items = list(self._items)
        self._items.clear()
        return items

    def close(self) -> None:
        self._feed._watchers.discard(self)

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TurnFeed:
    def __init__(self) -> None:
        self._watchers: set[Watcher] = set()

    def watch(self, accepts: Callable[[TurnRecord], bool] = lambda _: True) -> Watcher:
        watcher = Watcher(self, accepts)
        self._watchers.add(watcher)
        return watcher

    @property
    def watched(self) -> bool:
        return bool(self._watchers)

    def publish(self, record: TurnRecord) -> None:
        for watcher in list(self._watchers):
            watcher.put(record)


class WatchedTurns:
    """A turn store whose status changes reach a :class:`TurnFeed`; every call is the
    wrapped store's."""

    def __init__(self, inner: TurnStore, feed: TurnFeed) -> None:
        self.inner = inner
        self.feed = feed
        #: tells the other instances of a change (the wiring's, with a shared bus)
        self.announce: Callable[[str], None] | None = None

    async def heard(self, turn_id: str) -> None:
        """Another instance changed ``turn_id``'s status: its record, as the shared store
        has it, to this instance's watchers."""
        if not self.feed.watched:
            return
        record = await self.inner.get(turn_id)
        if record is not None:
            self.feed.publish(record)

    async def create(self, record: TurnRecord) -> None:
        await self.inner.create(record)
        if self.feed.watched:
            self.feed.publish(record)
        if self.announce is not None:
            self.announce(record.turn_id)

    async def get(self, turn_id: str) -> TurnRecord | None:
        return await self.inner.get(turn_id)

    async def update(self, turn_id: str, **changes: Any) -> None:
        await self.inner.update(turn_id, **changes)
        if "status" not in changes and "message" not in changes:
            return
        if self.feed.watched:
            record = await self.inner.get(turn_id)
            if record is not None:
                self.feed.publish(record)
        if self.announce is not None:
            self.announce(turn_id)

    async def list(
        self,
        thread_id: str | None = None,
        limit: int = 50,
        before: float | None = None,
        *,
        graph: str | None = None,
        status: str | None = None,
        user_id: str | None = None,
    ) -> list[TurnRecord]:
        return await self.inner.list(
            thread_id, limit, before, graph=graph, status=status, user_id=user_id
        )

    async def mark_interrupted(self) -> int:
        return await self.inner.mark_interrupted()

    async def renew_leases(self, leases: Mapping[str, int], until: float) -> set[str]:
        return await self.inner.renew_leases(leases, until)

    async def claim_expired(
        self, now: float, until: float, exclude: Sequence[str], startup: bool
    ) -> Sequence[TurnRecord]:
        return await self.inner.claim_expired(now, until, exclude, startup)

    async def free_thread(self, record: TurnRecord) -> bool:
        return await self.inner.free_thread(record)

    async def claim_thread(
        self, thread_id: str, user_id: str, metadata: Mapping[str, Any] | None = None
    ) -> str:
        return await self.inner.claim_thread(thread_id, user_id, metadata)

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        return await self.inner.get_thread(thread_id)

    async def patch_thread(
        self, thread_id: str, metadata: Mapping[str, Any], *, revive: bool = False
    ) -> ThreadRecord | None:
        return await self.inner.patch_thread(thread_id, metadata, revive=revive)

    async def delete_thread(self, thread_id: str) -> None:
        await self.inner.delete_thread(thread_id)

    async def threads(
        self, user_id: str | None = None, thread_ids: Sequence[str] | None = None
    ) -> Sequence[ThreadRecord]:
        return await self.inner.threads(user_id, thread_ids)

    async def thread_owner(self, thread_id: str) -> str | None:
        return await self.inner.thread_owner(thread_id)

    async def lock_thread(self, thread_id: str) -> HeldThread | None:
        return await self.inner.lock_thread(thread_id)

    async def ping(self) -> None:
        await self.inner.ping()

    def close(self) -> None:
        self.inner.close()
