"""The bus interface that the processor, the runs and the stream writer program against."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from relay.events import Event


class UnknownTurn(LookupError):
    """The bus holds no log for this turn (never seen, or retention dropped it)."""


class CursorExpired(LookupError):
    """The reader's cursor is older than the oldest event the log still holds."""

    def __init__(self, turn_id: str, cursor: int, oldest: int) -> None:
        super().__init__(
            f"turn {turn_id}: events after seq {cursor} are no longer retained "
            f"(oldest kept is {oldest})"
        )
        self.turn_id = turn_id
        self.cursor = cursor
        self.oldest = oldest


class BusUnavailable(RuntimeError):
    """The shared bus (Redis) cannot be reached: a reader cannot go on, a request that
    needs the bus is answered 503. Never a silent gap."""


class BusLost(RuntimeError):
    """A note, not an end: the reader's connection to the shared bus broke (Redis went
    away, perhaps losing its data). The reader goes on from its cursor once the bus is
    back, with no gap; the stream tells its client (a ``reset`` frame, code
    ``bus_lost``) and goes on."""

    def __init__(self, turn_id: str, last_seq: int) -> None:
        super().__init__(
            f"turn {turn_id}: the shared event log went away after event {last_seq}; "
            "this stream goes on from the next event once it is back"
        )
        self.last_seq = last_seq


class LogReader(Protocol):
    cursor: int

    def take(self, limit: int = 256) -> list[Event]:
        """Up to ``limit`` events after the cursor that are available now; advances the
        cursor past them. (A bounded batch: what one reader holds at a time.)"""
        ...

    def wait(self, timeout: float | None) -> Awaitable[bool]:
        """Wait until an event after the cursor exists (True) or ``timeout`` passes (False).
        An awaitable (a coroutine, or a future of the reader's): ``await`` it, or pass it
        to ``asyncio.ensure_future``."""
        ...

    def close(self) -> None: ...

    @property
    def exhausted(self) -> bool:
        """True once nothing more will ever come (a fixed list sent whole); a live log's
        reader never is."""
        ...


class PushReader(LogReader, Protocol):
    """A reader that can call its stream back when events come, instead of being waited
    on (the in-process log: :class:`relay.bus.memory.MemoryReader`). A stream of such a
    reader waits in its own task on one future of its own, which the log, the disconnect,
    the shutdown and the heartbeat timer resolve alike: no task and no ``asyncio.wait``
    per event. Readers that must do I/O to learn of new events (Redis) are waited on
    instead (:meth:`LogReader.wait`)."""

    def watch(self, wake: Callable[[], None]) -> bool:
        """Arrange for ``wake()`` to be called once, on the loop, as soon as an event
        after the cursor exists; False (and nothing armed) when one already does (take
        it). All the events published before the woken reader runs are there for one
        ``take``: wakes are per batch, not per event. A later ``watch`` replaces the
        armed one."""
        ...

    def unwatch(self) -> None:
        """Disarm what :meth:`watch` armed (nothing if it fired or was never armed)."""
        ...


class Bus(Protocol):
    """A bus: the in-process one (:class:`relay.bus.memory.MemoryBus`) or one that
    instances share (:class:`relay.bus.redis.RedisBus`). The lifecycle and health methods
    are part of every bus; an in-process bus answers them trivially."""

    def open_turn(self, turn_id: str, last_seq: int = 0) -> None:
        """Make sure a log exists; a new log continues after ``last_seq`` (never reuses)."""
        ...

    def publish(self, event: Event) -> Event:
        """Append, stamping the next ``seq``. Called on the event loop; never blocks."""
        ...

    def last_seq(self, turn_id: str) -> int: ...

    def has_turn(self, turn_id: str) -> bool: ...

    def finished(self, turn_id: str) -> bool: ...

    def terminal_seq(self, turn_id: str) -> int | None: ...

    def reader(self, turn_id: str, after: int = 0) -> LogReader: ...

    def reader_count(self, turn_id: str) -> int: ...

    async def lookup(self, turn_id: str) -> None:
        """Learn about a turn another instance runs (a shared bus): afterwards
        ``has_turn``/``last_seq``/``finished``/``reader`` answer for it. Raises
        :class:`BusUnavailable` when the shared bus cannot be reached."""
        ...

    # -- lifecycle and health (trivial for an in-process bus) ---------------------------

    async def start(self) -> None:
        """Connect (a shared bus) and start its background work; call on the event loop."""
        ...

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is pending (a shared bus, within ``timeout``) and disconnect."""
        ...

    def unavailable(self) -> str | None:
        """Why the bus cannot take a new turn now (a shared bus that is unreachable), or
        None."""
        ...

    async def problems(self) -> list[str]:
        """For readiness: a live check of the bus, one line per problem."""
        ...

    @property
    def shared(self) -> bool:
        """True when other instances share the logs (Redis): the bus then has a writer
        ``backlog`` and ``lost`` events to report (relay/export/metrics.py)."""
        ...

    @property
    def backlog(self) -> int:
        """Events published here and not yet in the shared store (0 in process)."""
        ...

    @property
    def lost(self) -> int:
        """Events that left this instance before they reached the shared store."""
        ...

    @property
    def losses(self) -> int:
        """Times the shared store was found to have lost its data (a Redis restarted
        without persistence): each a loss that every reader of a turn was told of."""
        ...


# -- what a shared bus can do beyond the protocol (relay/bus/redis.py) ---------------------


@runtime_checkable
class AdoptingBus(Protocol):
    """A shared bus that can take up a gone owner's log: what this instance held of the
    turn is dropped, and the shared log says where it stands (its last seq, its last
    turn-terminal event or None). Takeovers (relay/turns/leases.py, recovering.py) and
    stray root ends (relay/ingest/strays.py) use it."""

    async def adopt(self, turn_id: str) -> tuple[int, Event | None]: ...


@runtime_checkable
class LogHistory(Protocol):
    """A shared bus that can read a turn's log back (None: not whole)."""

    async def history(self, turn_id: str, after: int) -> list[Event] | None: ...
