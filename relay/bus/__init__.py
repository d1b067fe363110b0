"""The bus: one append-only event log per turn, with readers that tail it.

A turn's task publishes; streams only read. A reader is a cursor (the last ``seq`` it
has), so a stream can start late, drop, and come back with ``Last-Event-ID`` with no gap
and no duplicate, and several readers can follow one turn.
"""

from relay.bus.base import Bus, CursorExpired, LogReader, UnknownTurn
from relay.bus.memory import MemoryBus

__all__ = ["Bus", "CursorExpired", "LogReader", "MemoryBus", "UnknownTurn"]
