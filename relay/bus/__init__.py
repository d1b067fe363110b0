"""The bus: one append-only event log per turn, with readers that tail it.

A turn's task publishes; streams only read. A reader is a cursor (the last ``seq`` it
has), so a stream can start late, drop, and come back with ``Last-Event-ID`` with no gap
and no duplicate, and several readers can follow one turn.

``RELAY_BUS=memory`` (default): in-process logs (:mod:`relay.bus.memory`).
``RELAY_BUS=redis://...``: the same logs, shared through Redis Streams so that any
instance can serve any turn's stream (:mod:`relay.bus.redis`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from relay.bus.base import Bus, BusUnavailable, CursorExpired, LogReader, UnknownTurn
from relay.bus.memory import MemoryBus

if TYPE_CHECKING:
    from relay.bus.redis_cancels import CancelChannel
    from relay.bus.redis_handoffs import HandoffChannel
    from relay.bus.redis_turn_changes import TurnChanges
    from relay.settings import RelaySettings


def open_bus(settings: RelaySettings) -> Bus:
    """The bus ``RELAY_BUS`` names: in process, or shared through Redis."""
    if settings.bus.startswith(("redis://", "rediss://")):
        from relay.bus.redis import RedisBus

        return RedisBus(
            settings.bus,
            max_events_per_turn=settings.bus_max_events_per_turn,
            max_finished_turns=settings.bus_max_turns,
            retention_s=settings.bus_retention_s,
        )
    return MemoryBus(
        max_events_per_turn=settings.bus_max_events_per_turn,
        max_finished_turns=settings.bus_max_turns,
        retention_s=settings.bus_retention_s,
    )


def open_cancels(
    settings: RelaySettings, on_cancel: Callable[[str], object]
) -> CancelChannel | None:
    """Cancel requests between the instances sharing a Redis bus (None in process)."""
    if settings.bus.startswith(("redis://", "rediss://")):
        from relay.bus.redis_cancels import CancelChannel

        return CancelChannel(settings.bus, on_cancel)
    return None


def open_turn_changes(
    settings: RelaySettings, on_change: Callable[[str], Awaitable[None]]
) -> TurnChanges | None:
    """Turn changes between the instances sharing a Redis bus (None in process)."""
    if settings.bus.startswith(("redis://", "rediss://")):
        from relay.bus.redis_turn_changes import TurnChanges

        return TurnChanges(settings.bus, on_change)
    return None


def open_handoffs(settings: RelaySettings) -> HandoffChannel | None:
    """Stray spans handed between the instances sharing a Redis bus (None in process)."""
    if settings.bus.startswith(("redis://", "rediss://")):
        from relay.bus.redis_handoffs import HandoffChannel

        return HandoffChannel(settings.bus)
    return None


__all__ = [
    "Bus",
    "BusUnavailable",
    "CursorExpired",
    "LogReader",
    "MemoryBus",
    "UnknownTurn",
    "open_bus",
    "open_cancels",
    "open_handoffs",
    "open_turn_changes",
]
