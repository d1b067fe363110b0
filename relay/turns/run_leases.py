"""The lease side of :class:`relay.turns.runs.RunManager`: which runs hold a lease, and
what happens to a run whose turn another instance took over.

relay/turns/leases.py renews the leases (one statement for all of :meth:`LeasedRuns.
leases`) and calls :meth:`LeasedRuns.lose` for a turn a renewal found no longer ours. A
run also checks, at its end, that its turn is still its own before it publishes the end
(:meth:`LeasedRuns._still_ours`): a process that hung past its lease and woke must not end
a turn twice, nor flip back the record its claimer wrote; its checkpoint writes ask the
same before each write (relay/turns/fencing.py).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol, runtime_checkable

from relay.turns.records import TurnStore, lease_until

log = logging.getLogger("relay.runs")


@runtime_checkable
class Disowning(Protocol):
    """A shared bus that can stop writing a turn's log (relay/bus/redis.py)."""

    def disown(self, turn_id: str) -> None: ...


class LeasedRuns:
    """Mixed into RunManager, which sets these."""

    _runs: dict[str, Any]  # turn id -> its _Run
    bus: Any
    turns: TurnStore
    lease_s: float | None

    def leases(self) -> dict[str, int]:
        """The turns whose lease this instance holds: turn id -> the attempt it runs."""
        return {
            turn_id: run.attempt
            for turn_id, run in self._runs.items()
            if run.lease_until and not run.ending and not run.lost
        }

    def turn_ids(self) -> list[str]:
        """Every turn with a run here (ending ones too): never claimed by this instance."""
        return list(self._runs)

    def renewed(self, turn_ids: set[str], until: float) -> None:
        for turn_id in turn_ids:
            if (run := self._runs.get(turn_id)) is not None:
                run.lease_until = until

    def lose(self, turn_id: str) -> bool:
        """Another instance claimed the turn (its lease ran out here: the process hung):
        cancel the run, which ends without a terminal event or a record (the claimer
        wrote both). False when the run is gone or already ending."""
        run = self._runs.get(turn_id)
        if run is None or run.ending or run.task is None or run.task.done():
            return False
        run.lost = True
        if isinstance(self.bus, Disowning):  # its run's last events are not the turn's
            self.bus.disown(turn_id)
        run.cancel_reason = "taken over by another instance"
        run.task.cancel(run.cancel_reason)
        return True

    async def _still_ours(self, run: Any) -> bool:
        """At the run's end: may it publish its end? Yes while its lease holds; a run past
        its lease (the process hung) asks the store first, renewing the lease if so."""
        if run.lost:
            return False
        if self.lease_s is None or not run.lease_until or time.time() * 1000 < run.lease_until:
            return True
        until = lease_until(self.lease_s)
        try:
            ours = run.turn_id in await self.turns.renew_leases({run.turn_id: run.attempt}, until)
        except Exception:  # the store is away: end as ever (the record waits for it)
            log.exception("relay: could not check the lease of turn %s", run.turn_id)
            return True
        run.lost = not ours
        if ours:
            run.lease_until = until
        return ours
