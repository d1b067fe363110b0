"""Leases: a turn outlives the process that ran it only as long as that process lives.

The instance running a turn holds a lease on its record (``lease_until``, epoch ms) from
the run's first write (relay/turns/runs.py) and renews it from a task of its own
(:meth:`Leases.renew`), never from the graph's code: a node that runs for an hour keeps
its turn while its process lives. One statement a round renews every turn the instance
runs, ``RELAY_LEASE_S / 3`` apart; a turn the round finds taken over (another instance
claimed it while this one hung) is cancelled here without a word (the claimer ended it).

A lease that was not renewed for ``RELAY_LEASE_S`` means the owner is gone (killed, or
hung). Every instance that shares the turn records (PostgreSQL) sweeps for such turns a
few seconds apart, with jitter, and claims each with one conditional ``UPDATE ...
RETURNING`` (relay/turns/lease_store.py): exactly one claimer per turn, one more
``attempt``, the claimer's lease. With SQLite (one instance) only a start claims: every
turn left running is its dead predecessor's, whatever its instance id. With PostgreSQL a
start also claims at once the turns its own instance id left running.

The claimer first frees the turn's thread: a dead owner's thread lock went with its
connection; a hung owner's session still holds it, so that session is ended
(``pg_terminate_backend`` of the backend the record names in ``lock_holder``, only while
it holds that thread's advisory lock). The lock stays a PostgreSQL session lock, which
frees itself when an owner dies, and one statement per takeover frees it when the owner
only hangs. Then it asks :attr:`Leases.recover` (relay/turns/recovering.py) whether the
turn is taken up again from its checkpoint (the hook then started its run, and the turn
is its own); when not, it ends the turn (:meth:`Leases.end`) as the hook says:

1. with a shared bus, one terminal ``error`` event at the turn's next seq, code
   ``interrupted`` (with a ``reason``), or ``recovery_exhausted``: readers on every
   replica get it;
2. the record says ``interrupted``, with that event's seq and words (a reader that comes
   after the bus log is gone gets the same event from the record). When the shared log
   already ends the run (the owner published its end and died before recording it), no
   event is added and the record says what that end says.

``relay.turns.recovered`` counts the takeovers by outcome (the hook's; ``ended`` without
one).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from relay.bus.base import AdoptingBus, Bus
from relay.turns.foreign import end_changes
from relay.turns.records import TurnRecord, TurnStore, lease_until
from relay.turns.recovering import ENDED, Ending
from relay.turns.recovery import ended_response, terminal_event
from relay.turns.response import ChatResponse
from relay.turns.runs import RunManager

log = logging.getLogger("relay.leases")

#: the status and ``error.code`` of a turn whose owner stopped
INTERRUPTED = "interrupted"
#: the sweep's period at most (before jitter): with RELAY_LEASE_S=15 a dead owner's turn
#: is claimed within 15 s + 2.5 s x 1.4 of its last renewal
SWEEP_MAX_S = 2.5
SWEEP_MIN_S = 0.2

#: decides, for a claimed turn, whether it is taken up again; None: the hook did so and
#: the turn is its own; an Ending: the claimer ends it so
Recover = Callable[[TurnRecord], Awaitable[Ending | None]]


async def never_recover(record: TurnRecord) -> Ending | None:
    """The default :data:`Recover`: every claimed turn ends ``interrupted``."""
    return ENDED


class Leases:
    def __init__(
        self,
        turns: TurnStore,
        runs: RunManager,
        bus: Bus,
        *,
        lease_s: float,
        shared: bool,
        claimed: Callable[[str], None] = lambda outcome: None,
        recover: Recover = never_recover,
    ) -> None:
        """``shared``: other instances use these records (PostgreSQL): sweep for their
        dead turns. ``claimed(outcome)``: counts a takeover by outcome (the metrics:
        ``recovered``, or the ending's)."""
        if not lease_s > 0:
            raise ValueError(f"lease_s must be positive, not {lease_s}")
        self.turns = turns
        self.runs = runs
        self.bus = bus
        self.lease_s = lease_s
        self.shared = shared
        self.claimed = claimed
        self.recover = recover
        self.renew_s = lease_s / 3
        self.sweep_s = min(max(lease_s / 6, SWEEP_MIN_S), SWEEP_MAX_S)
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> int:
        """Claim what a dead predecessor left running, then renew and (shared) sweep in
        the background; how many turns were claimed at start."""
        claimed = await self.sweep(startup=True)
        self._tasks.append(
            asyncio.create_task(self._every(self.renew_s, self.renew), name="lease renewal")
        )
        if self.shared:
            self._tasks.append(
                asyncio.create_task(
                    self._every(self.sweep_s, self.sweep, jitter=True), name="lease sweep"
                )
            )
        return claimed

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []

    @staticmethod
    async def _every(
        period_s: float, work: Callable[[], Awaitable[Any]], jitter: bool = False
    ) -> None:
        while True:
            await asyncio.sleep(period_s * (random.uniform(0.6, 1.4) if jitter else 1.0))
            try:
                await work()
            except Exception:  # the store is away, say: the next round tries again
                log.exception("relay: lease work failed (%s)", getattr(work, "__name__", work))

    # -- the owner's side -------------------------------------------------------------

    async def renew(self) -> None:
        """One statement for every turn this instance runs; a turn not renewed was
        claimed by another instance: its run here is cancelled quietly."""
        held = self.runs.leases()
        if not held:
            return
        until = lease_until(self.lease_s)
        ours = await self.turns.renew_leases(held, until)
        self.runs.renewed(ours, until)
        for turn_id in held.keys() - ours:
            if self.runs.lose(turn_id):
                log.warning(
                    "relay: turn %s was taken over by another instance while this one did "
                    "not renew its lease (the process hung?); its run here is cancelled",
                    turn_id,
                )

    # -- the claimer's side -----------------------------------------------------------

    async def sweep(self, startup: bool = False) -> int:
        """Claim the turns whose owner is gone and take each over; how many."""
        now = time.time() * 1000
        mine = self.runs.turn_ids()
        records = await self.turns.claim_expired(now, lease_until(self.lease_s), mine, startup)
        for record in records:
            log.warning(
                "relay: turn %s was running on an instance that is gone (its lease ran out); "
                "taking it over (attempt %d)",
                record.turn_id,
                record.attempt,
            )
            try:
                await self._free_thread(record)
                ending = await self.recover(record)
                if ending is not None:
                    await self.end(record, ending)
                self.claimed(ending.outcome if ending is not None else "recovered")
            except Exception:  # its lease (ours now) runs out: the next sweep claims it
                log.exception("relay: could not take over turn %s", record.turn_id)
        return len(records)

    async def _free_thread(self, record: TurnRecord) -> None:
        """A hung owner's session still holds the turn's thread: end it."""
        if record.lock_holder > 0:
            try:
                if await self.turns.free_thread(record):
                    log.warning(
                        "relay: ended the database session that held thread %s for turn %s",
                        record.thread_id,
                        record.turn_id,
                    )
            except Exception:  # no right to end it: the thread stays busy until it goes
                log.exception(
                    "relay: could not free thread %s of turn %s (the replicas must share "
                    "one database role, or have pg_signal_backend)",
                    record.thread_id,
                    record.turn_id,
                )

    async def end(self, record: TurnRecord, ending: Ending = ENDED) -> None:
        """End a claimed turn: one terminal event on the shared bus, the record
        ``interrupted``."""
        changes = await self._publish_end(record, ending)
        await self.turns.update(record.turn_id, **changes)

    async def _publish_end(self, record: TurnRecord, ending: Ending) -> dict[str, Any]:
        """The terminal event on a shared bus; the record's changes that go with it."""
        now = time.time() * 1000
        ended = dataclasses.replace(
            record, status=INTERRUPTED, response=None, ended_at=now, lease_until=0.0
        )
        changes: dict[str, Any] = {"status": INTERRUPTED, "ended_at": now, "lease_until": 0.0}
        bus = self.bus
        if not (bus.shared and isinstance(bus, AdoptingBus)):
            # the log died with its process: readers get the record's end, at the seq
            # after the record's (relay/turns/recovery.py settles a later cursor)
            if ending == ENDED:
                return changes
            response = ChatResponse(
                record.thread_id,
                record.turn_id,
                record.root_trace_id or "",
                INTERRUPTED,
                answer=ending.message,
            )
            return {
                **changes,
                "last_seq": max(record.last_seq, record.run_after_seq) + 1,
                "response": ended_response(response, ending.said()),
            }
        last, terminal = await bus.adopt(record.turn_id)
        if terminal is not None and terminal.seq > record.run_after_seq:
            # the run published its end, and its process died before recording it
            return {**end_changes(terminal), "lease_until": 0.0}
        base = max(last, record.last_seq, record.run_after_seq)
        bus.open_turn(record.turn_id, base)
        seq = bus.publish(terminal_event(ended, base, ending.said())).seq
        response = ChatResponse(
            record.thread_id,
            record.turn_id,
            record.root_trace_id or "",
            INTERRUPTED,
            answer=ending.message,
        )
        return {**changes, "last_seq": seq, "response": ended_response(response, ending.said())}
