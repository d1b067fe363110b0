"""Turn changes between the instances that share the Redis bus: one live list of turns.

Each instance's turn feed (:mod:`relay.turns.feed`: ``GET /turns`` as a stream, the SPA's
live list) sees the status changes it writes itself. With replicas, a turn another
instance runs or receives changes in the shared turn records (PostgreSQL) without this
instance writing anything. So every instance announces the turns whose status it wrote
on the ``relay:turns:{db}`` channel (:mod:`relay.bus.redis_channel`), and every other
instance, hearing one, reads that turn's record from the shared store and hands it to
its own watchers: a watcher on any replica sees every replica's turns.

An announcement carries this process's own random id (never the instance id, which two
workers of one host may share) and the turn id; a process ignores its own. Lost while a
listener reconnects: a watcher reconnecting after a Redis outage gets the list again in
its first frame, as any reconnecting watcher does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable

from relay.bus.base import BusUnavailable
from relay.bus.redis_channel import RedisChannel, channel_name

log = logging.getLogger("relay.bus.redis")

CHANNEL = "relay:turns"
#: announcements on their way at once; past it, new ones are dropped (and logged)
MAX_PENDING = 1000


class TurnChanges(RedisChannel):
    """Announces this process's turn changes (:meth:`announce`) and hands the other
    processes' to ``on_change(turn_id)``."""

    def __init__(self, url: str, on_change: Callable[[str], Awaitable[None]]) -> None:
        super().__init__(url, channel_name(CHANNEL, url), self._on_text, "turn changes")
        self.on_change = on_change
        self.process_id = secrets.token_hex(8)
        self._pending: set[asyncio.Task[None]] = set()

    def announce(self, turn_id: str) -> None:
        """Tell the other instances that ``turn_id``'s status changed (in the background:
        a write never waits for Redis)."""
        if self.client is None or len(self._pending) >= MAX_PENDING:
            if self.client is not None:
                log.warning("relay: turn change of %s not announced (too many pending)", turn_id)
            return
        self._spawn(self._announce(turn_id))

    async def _announce(self, turn_id: str) -> None:
        with contextlib.suppress(BusUnavailable):  # Redis away: the bus says so already
            await self.publish(f"{self.process_id} {turn_id}")

    def _on_text(self, text: str) -> None:
        process_id, _, turn_id = text.partition(" ")
        if process_id != self.process_id and turn_id:
            self._spawn(self._changed(turn_id))

    async def _changed(self, turn_id: str) -> None:
        try:
            await self.on_change(turn_id)
        except Exception:  # a listener must outlive one turn it could not read
            log.exception("relay: reading turn %s another instance changed failed", turn_id)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def stop(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await super().stop()
