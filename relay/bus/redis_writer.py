"""The Redis bus's writer: one task that copies what Redis lacks from the local logs.

``publish`` (sync, never blocks) only marks the turn unwritten (:meth:`RedisWriter.
published`); the task copies from the local log (there is no second queue to overflow),
pipelining ``XADD`` in seq order, with an explicit entry id ``{seq}-0`` and the ``seq``
and the event JSON in the entry, ``MAXLEN ~`` bounding the stream, and one ``EXPIRE`` per
stream and batch (``RELAY_BUS_RETENTION_S`` once the turn has finished, a day while it
lives). Explicit ids make a retried write idempotent and make two writers of one ``seq``
fail loudly instead of interleaving. Events that left the local log before Redis had
them are counted in ``lost`` and logged: readers elsewhere meet the gap, loudly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from redis.exceptions import ResponseError

from relay.bus.memory import MemoryBus
from relay.bus.redis_health import REDIS_ERRORS, RedisHealth
from relay.events import Event

log = logging.getLogger("relay.bus.redis")

#: TTL of a live turn's stream (refreshed by every write): a crashed owner's turn goes too
LIVE_TTL_S = 24 * 3600
WRITE_BATCH = 500


class RedisWriter:
    def __init__(
        self,
        local: MemoryBus,
        health: RedisHealth,
        key: Callable[[str], str],
        *,
        max_events_per_turn: int,
        retention_s: float,
    ) -> None:
        self.local = local
        self.health = health
        self.key = key
        self.max_events_per_turn = max_events_per_turn
        self.retention_s = retention_s
        #: turns with events not yet in Redis: turn id -> the last seq published here
        self.unwritten_turns: OrderedDict[str, int] = OrderedDict()
        #: turn id -> the last seq in Redis, for the turns in ``unwritten_turns``
        self.written_seq: dict[str, int] = {}
        self._wake: asyncio.Event | None = None
        #: True while the bus runs its monitor (between start and stop): a write waits
        #: for it to see Redis back rather than retrying on its own
        self.monitored = False
        self.lost = 0  # events that left the local log before they reached Redis
        self.written = 0
        #: turns written again after Redis lost its data: their streams are replaced
        #: whole (a write that slipped in before the loss was seen would block the rest)
        self.replace: set[str] = set()
        self.backlog = 0  # events published here and not in Redis yet (an int: metrics
        # read it from their own thread)

    def arm(self) -> None:
        """Make the wake-up (on the running loop): from now on a publish wakes the task."""
        self._wake = asyncio.Event()

    def poke(self) -> None:
        """Redis is back: write what waited."""
        if self.unwritten_turns and self._wake is not None:
            self._wake.set()

    async def drain(self, deadline: float) -> None:
        """Let the task write what is pending while Redis answers, until ``deadline``."""
        while self.unwritten_turns and self.health.problem is None and time.monotonic() < deadline:
            assert self._wake is not None
            self._wake.set()
            await asyncio.sleep(0.02)

    # -- bookkeeping (sync, on the event loop) ------------------------------------------

    def published(self, stamped: Event) -> None:
        """``stamped`` is in the local log: mark its turn unwritten up to it."""
        turn_id = stamped.turn_id
        written = self.written_seq.get(turn_id)
        if written is not None and written >= stamped.seq:
            # the turn's local log began again (it had expired): what the old one did
            # not hand to Redis is gone with it
            self.forget(turn_id)
            written = None
        if written is None:
            self.written_seq[turn_id] = stamped.seq - 1
        self.unwritten_turns[turn_id] = stamped.seq
        self.backlog += 1
        if self._wake is not None:
            self._wake.set()

    def rewrite(self, turn_ids: list[str]) -> None:
        """Redis lost its data: write each of ``turn_ids`` again from the oldest event its
        local log holds (what it no longer holds is gone with Redis: the loss itself is
        counted, in ``RedisHealth.losses``, and readers meet any gap as such)."""
        for turn_id in turn_ids:
            held = self.local.held(turn_id, 0, 0)
            if held is None:
                continue
            base = held[0]
            last = self.local.last_seq(turn_id)
            if last <= base:
                continue
            if turn_id in self.unwritten_turns:
                written = self.written_seq[turn_id]
                if written <= base:
                    continue  # none of what it holds reached Redis: written as it is
                self.backlog += written - base
            else:
                self.backlog += last - base
            self.written_seq[turn_id] = base
            self.unwritten_turns[turn_id] = last
            self.replace.add(turn_id)
        if self._wake is not None:
            self._wake.set()

    def forget(self, turn_id: str) -> None:
        """Stop writing the turn; what it had not written yet is lost (and said so)."""
        last = self.unwritten_turns.pop(turn_id, None)
        written = self.written_seq.pop(turn_id, None)
        self.replace.discard(turn_id)
        if last is not None and written is not None and last > written:
            self.lost += last - written
            self.backlog -= last - written
            log.error(
                "relay: events %d..%d of turn %s left this instance before they reached Redis",
                written + 1,
                last,
                turn_id,
            )

    def next_batch(self) -> list[Event]:
        """Up to WRITE_BATCH events not yet in Redis, each turn's in seq order, from the
        local logs. Events a log no longer holds (trimmed, or the log expired while Redis
        was down) are counted in ``lost``: readers elsewhere meet the gap, loudly."""
        batch: list[Event] = []
        for turn_id in list(self.unwritten_turns):
            written = self.written_seq[turn_id]
            held = self.local.held(turn_id, written, WRITE_BATCH - len(batch))
            if held is None:
                self.forget(turn_id)
                continue
            base, events = held
            if written < base:
                self.lost += base - written
                self.backlog -= base - written
                log.error(
                    "relay: events %d..%d of turn %s were trimmed from the local log "
                    "before they reached Redis",
                    written + 1,
                    base,
                    turn_id,
                )
                self.written_seq[turn_id] = base
            if not events:  # nothing of this log is unwritten: never spin on it
                self.forget(turn_id)
                continue
            batch += events
            if len(batch) >= WRITE_BATCH:
                break
        return batch

    def mark_written(self, batch: list[Event]) -> None:
        """The batch is in Redis. A turn forgotten meanwhile (its log replaced by a run on
        another instance while the batch was in flight) has been accounted for already."""
        for event in batch:
            written = self.written_seq.get(event.turn_id)
            if written is not None and event.seq > written:
                self.written_seq[event.turn_id] = event.seq
                self.backlog -= 1
        for turn_id in {event.turn_id for event in batch}:
            last = self.unwritten_turns.get(turn_id)
            if last is not None and last <= self.written_seq[turn_id]:
                del self.unwritten_turns[turn_id]
                del self.written_seq[turn_id]

    # -- the task -----------------------------------------------------------------------

    async def run(self) -> None:
        assert self._wake is not None
        health = self.health
        backoff = 0.1
        while True:
            if not self.unwritten_turns:
                self._wake.clear()
                await self._wake.wait()
                continue
            if health.problem is not None and self.monitored:
                # wait for the monitor to see Redis back (or retry after a while)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):
                        await self._wake.wait()
                backoff = min(backoff * 2, 2.0)
                if health.problem is not None:
                    await health.check()
                    if health.problem is not None:
                        continue
            batch = self.next_batch()
            if not batch:
                continue
            try:
                await self.write(batch)
            except REDIS_ERRORS as exc:
                health.down(exc)
                continue
            except Exception:  # never let the one writer die: the events stay unwritten
                log.exception("relay: writing %d event(s) to Redis failed", len(batch))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.1
            self.mark_written(batch)
            self.written += len(batch)

    async def write(self, batch: list[Event]) -> None:
        assert self.health.client is not None
        pipe = self.health.client.pipeline(transaction=False)
        ttl: dict[str, int] = {}  # one EXPIRE per stream, set by its last event here
        replaced = self.replace & {event.turn_id for event in batch}
        for turn_id in replaced:
            pipe.delete(self.key(turn_id))
        for event in batch:
            key = self.key(event.turn_id)
            pipe.xadd(
                key,
                {"seq": event.seq, "e": event.to_json()},
                id=f"{event.seq}-0",
                maxlen=self.max_events_per_turn,
                approximate=True,
            )
            ttl[key] = int(self.retention_s) if event.is_turn_terminal else LIVE_TTL_S
        for key, seconds in ttl.items():
            pipe.expire(key, seconds)
        results = await pipe.execute(raise_on_error=False)
        self.replace -= replaced
        results = results[len(replaced) :]
        for event, result in zip(batch, results[: len(batch)], strict=True):
            if isinstance(result, ResponseError):
                if "equal or smaller" in str(result):
                    continue  # written before (a retried batch): idempotent
                self.lost += 1
                log.error(
                    "relay: Redis refused event %s of turn %s: %s", event.seq, event.turn_id, result
                )
            elif isinstance(result, Exception):
                raise result
