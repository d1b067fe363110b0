"""Which turn a received run may go into: decided once per trace, before it goes out.

A received span names its turn (``relay.turn.id``, or the paused foreign turn it resumes),
and anyone holding the receivers' credential can send any. :class:`ReceivedTurns` keeps
the receiver's decisions, per trace:

- **admitted**: a new turn, or a turn the store knows whose record its run may change
  (it names the turn's user: :func:`relay.turns.foreign.may_change`; a turn published
  from here whose record is not written yet takes runs of its first run's user alone);
- **ignored**: a run of a turn this relay runs or ran itself (naming that turn's user:
  the in-process double of what it published, an agent that exports its spans here
  too), of a turn another instance publishes (the run's spans split over replicas:
  counted in ``stats["published_elsewhere"]`` and logged once per trace; its spans are
  handed over to that instance: :meth:`ReceivedTurns.elsewhere`,
  :mod:`relay.ingest.strays`), or a run
  refused (another user, or none, on a turn that has one: counted in
  ``stats["kept_apart"]`` and logged with its ids alone). An ignored trace's spans are
  still stored, under no turn; nothing of it is published or indexed.

:meth:`ReceivedTurns.admit` looks records up, and asks a shared bus about the turn (I/O:
it runs on the receiver's outbox task,
:mod:`relay.ingest.outbox`); :meth:`ReceivedTurns.may_publish` is the last check before
the bus, on the event loop: a turn not yet published from here may have begun running
here, or on another instance of the shared bus, meanwhile. Bounded: each memory keeps
``max_turns`` entries.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING

from relay.events import Event
from relay.ingest.bounded import bounded_add
from relay.ingest.outbox import Batch
from relay.turns.foreign import may_change
from relay.turns.threads import joins

if TYPE_CHECKING:
    from relay.bus.base import Bus
    from relay.turns.records import TurnStore

log = logging.getLogger("relay.receiver")


class ReceivedTurns:
    def __init__(
        self,
        turns: TurnStore,
        bus: Bus,
        running: Callable[[str], bool],
        users: Mapping[str, str],
        stats: MutableMapping[str, int],
        max_turns: int,
    ) -> None:
        """``running``: is this turn run by this relay itself; ``users``: the user each
        received run's root names, by trace id (:class:`relay.turns.foreign.NotedRuns`);
        ``stats``: the receiver's counts (``kept_apart``)."""
        self.turns = turns
        self.bus = bus
        self.running = running
        self.users = users
        self.stats = stats
        self.max_turns = max_turns
        self._owned: OrderedDict[str, None] = OrderedDict()  # turns published from here
        self._ignored: OrderedDict[str, None] = OrderedDict()  # traces not published
        self._admitted: OrderedDict[str, None] = OrderedDict()  # traces admitted
        self._first_users: OrderedDict[str, str] = OrderedDict()  # a new turn's first user
        #: traces of a turn another instance publishes -> that turn (handed over to it)
        self._elsewhere_traces: OrderedDict[str, str] = OrderedDict()

    def ignores(self, trace_id: str) -> bool:
        """Whether nothing of this trace goes out any more."""
        return trace_id in self._ignored

    def elsewhere(self, trace_id: str) -> str | None:
        """The turn of this trace when another instance publishes it (its spans are
        handed over to that instance: :mod:`relay.ingest.strays`), else None."""
        return self._elsewhere_traces.get(trace_id)

    def publishes(self, turn_id: str, trace_id: str) -> bool:
        """Whether this instance publishes run ``trace_id`` of ``turn_id`` (admitted it,
        and owns the turn's log): a part of it another instance got is this one's."""
        return trace_id in self._admitted and turn_id in self._owned

    async def admit(self, batch: Batch) -> None:
        """Decide for each trace of ``batch`` not decided yet (see the module)."""
        pairs = [(e.turn_id, e.trace_id) for e in batch.events]
        pairs += [(r.turn_id, r.trace_id) for r in batch.runs]
        for turn_id, trace_id in dict.fromkeys(pairs):
            if trace_id in self._admitted or trace_id in self._ignored:
                continue
            user = self.users.get(trace_id, "")
            try:
                if turn_id not in self._owned:  # another instance may publish it: the
                    # shared bus learns its log, so that may_publish sees it
                    await self.bus.lookup(turn_id)
                known = await self.turns.get(turn_id)
            except Exception:  # fail closed: whose turn it is cannot be told
                log.exception(
                    "relay: could not read the record (or the shared log) of received "
                    "turn %s; trace %s is not published (its spans are stored)",
                    turn_id,
                    trace_id,
                )
                bounded_add(self._ignored, trace_id, self.max_turns)
                continue
            if known is not None and known.graph and joins(known.user_id, user):
                self.ignore_own(turn_id, trace_id)  # its own spans, exported here too
            elif (known is not None and not may_change(known, user)) or (
                known is None
                and turn_id in self._owned
                and not joins(self._first_users.get(turn_id), user)
            ):
                self._refuse(turn_id, trace_id)
            else:
                bounded_add(self._admitted, trace_id, self.max_turns)
                if known is None and turn_id not in self._first_users:
                    self._first_users[turn_id] = user
                    while len(self._first_users) > self.max_turns:
                        self._first_users.popitem(last=False)

    def may_publish(self, event: Event) -> bool:
        """Whether an admitted event goes out: not of an ignored trace, and the first of
        its turn from here only when this relay does not run that turn itself (live
        here, or on the shared bus)."""
        if event.trace_id in self._ignored:
            return False
        if event.turn_id not in self._owned:
            if self.running(event.turn_id):
                self.ignore_own(event.turn_id, event.trace_id)
                return False
            if self.bus.has_turn(event.turn_id):
                self._elsewhere(event.turn_id, event.trace_id)
                return False
            bounded_add(self._owned, event.turn_id, self.max_turns)
        return True

    def _elsewhere(self, turn_id: str, trace_id: str) -> None:
        """Another instance publishes this turn (the shared bus has its log): its run's
        spans were split over replicas (a balancer that does not route by trace id), or
        it runs there in-process and its agent exports here too. Once per trace."""
        self.stats["published_elsewhere"] += 1
        log.warning(
            "relay: received spans of trace %s, of turn %s, which another instance "
            "publishes: not published here (stored; handed over to that instance). A "
            "run's spans must all reach one relay: route OTLP by trace id (RUNBOOK, "
            "'Scaling out'); or the agent runs on another replica and exports its spans "
            "here too",
            trace_id,
            turn_id,
        )
        bounded_add(self._ignored, trace_id, self.max_turns)
        self._elsewhere_traces[trace_id] = turn_id
        while len(self._elsewhere_traces) > self.max_turns:
            self._elsewhere_traces.popitem(last=False)

    def ignore_own(self, turn_id: str, trace_id: str) -> None:
        log.warning(
            "relay: received spans of turn %s, a turn this relay runs or ran itself (its "
            "agent exports its spans here too?): not published again",
            turn_id,
        )
        bounded_add(self._ignored, trace_id, self.max_turns)

    def _refuse(self, turn_id: str, trace_id: str) -> None:
        self.stats["kept_apart"] += 1
        log.warning(
            "relay: received run (trace %s) of turn %s names another user than the turn's "
            "own, or none: not published into its stream nor indexed under it, its record "
            "left as it was (its spans are stored)",
            trace_id,
            turn_id,
        )
        bounded_add(self._ignored, trace_id, self.max_turns)
