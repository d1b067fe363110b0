"""The event contract, version 1 (see docs/events.md).

An :class:`Event` is what the mapping produces from a span and what the bus stores.
The bus stamps ``seq`` when it appends the event to a turn's log; everything else is
fixed by the span that produced it, so a replay from stored spans yields equal events.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

VERSION = 1

GRAPH_TOPOLOGY = "graph_topology"
GRAPH_DISCOVERED = "graph_discovered"  # a run without a topology: the graph seen so far
NODE_STARTED = "node_started"
NODE_COMPLETED = "node_completed"
TOOL_STARTED = "tool_started"
TOOL_COMPLETED = "tool_completed"
PAUSED = "paused"
ERROR = "error"
TURN_COMPLETED = "turn_completed"
TEXT_DELTA = "text_delta"
MESSAGE_SAVED = "message_saved"
CUSTOM = "custom"  # a payload a node sent: its stream writer, a custom callback event
#: a run that takes up the turn its cut run left (relay/turns/recovering.py)
TURN_RECOVERED = "turn_recovered"

#: Events that end a run: the response to POST /chat or /chat/resume stops after one.
RUN_TERMINAL = frozenset({TURN_COMPLETED, PAUSED, ERROR})

#: the words of an ``error`` ``interrupted`` with ``reason`` ``tool_running``: a turn cut
#: while a tool ran, which is not run again on its own (sending again runs that tool again)
TOOL_RUNNING_MESSAGE = (
    "The server stopped while a tool of this turn was running ({tool}), so the turn "
    "was not taken up again on its own: the tool may have done its work. Sending your "
    "message again runs it again."
)
#: the words of an ``error`` ``recovery_exhausted``
RECOVERY_EXHAUSTED_MESSAGE = (
    "This turn was cut short by its server {attempts} times and was not taken up "
    "again. Please send your message again."
)

#: the words of an ``error`` ``interrupted``: a turn cut short by its server's stop (its
#: live terminal event, the one rebuilt from its record, the one a takeover sends)
INTERRUPTED_MESSAGE = (
    "The server stopped while this turn was running, so it did not finish. "
    "Please send your message again."
)
#: Events that end a turn: GET /turns/{id}/events stops after one (it waits through a pause).
TURN_TERMINAL = frozenset({TURN_COMPLETED, ERROR})


def dumps(value: Any) -> str:
    """The one JSON encoding used on every wire: compact, UTF-8, keys in insertion order.

    ``orjson`` writes it (the same text as ``json.dumps(value, ensure_ascii=False,
    separators=(",", ":"))`` for what events hold, about eight times faster: this runs
    once per event on the serving loop). A NaN or an infinity becomes ``null`` rather
    than invalid JSON. What ``orjson`` refuses (an int past 64 bits, a lone surrogate,
    nesting past 254 levels) falls back to the standard library, which raises for NaN and
    writes a lone surrogate (it cannot be UTF-8) as a ``\\u`` escape.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        try:
            text.encode()
        except UnicodeEncodeError:
            text = json.dumps(value, separators=(",", ":"), allow_nan=False)
        return text


@dataclass(slots=True)
class Event:
    """One event of a turn. ``fields`` holds the type-specific fields."""

    type: str
    thread_id: str
    turn_id: str
    trace_id: str
    ts: float
    fields: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    _json: str | None = field(default=None, repr=False, compare=False)
    #: the event's bytes in one wire framing, ``(kind, bytes)``: see :meth:`frame`
    _frame: tuple[str, bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def is_run_terminal(self) -> bool:
        return self.type in RUN_TERMINAL

    @property
    def is_turn_terminal(self) -> bool:
        return self.type in TURN_TERMINAL

    def to_dict(self) -> dict[str, Any]:
        envelope: dict[str, Any] = {
            "v": VERSION,
            "type": self.type,
            "seq": self.seq,
            "thread_id": self.thread_id,
            "turn_id": self.turn_id,
            "trace_id": self.trace_id,
            "ts": self.ts,
        }
        envelope.update(self.fields)
        return envelope

    def to_json(self) -> str:
        """The event as one line of JSON, encoded once and cached (every reader shares it)."""
        if self._json is None:
            self._json = dumps(self.to_dict())
        return self._json

    def stamped(self, seq: int) -> Event:
        """This event numbered ``seq``, as a bus appends it: the event itself when it has
        no number and no encoding or frame yet (fresh from the mapping: one object per event, not
        two), else a copy (an event published again, e.g. a retry after a bus raised)."""
        if self.seq == 0 and self._json is None and self._frame is None:
            self.seq = seq
            return self
        return self.with_seq(seq)

    def frame(self, kind: str, build: Callable[[Event], bytes]) -> bytes:
        """The event's bytes in the wire framing ``kind`` (``build`` makes them), built
        once and shared: every reader of a turn in that framing writes the same ``bytes``
        object. One framing is kept (the last asked for): a turn's readers mostly share
        one, and a mix costs a rebuild, never a wrong frame."""
        cached = self._frame
        if cached is not None and cached[0] == kind:
            return cached[1]
        data = build(self)
        self._frame = (kind, data)
        return data

    def with_seq(self, seq: int) -> Event:
        return Event(
            self.type, self.thread_id, self.turn_id, self.trace_id, self.ts, self.fields, seq
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        envelope = {"v", "type", "seq", "thread_id", "turn_id", "trace_id", "ts"}
        return cls(
            type=data["type"],
            thread_id=data["thread_id"],
            turn_id=data["turn_id"],
            trace_id=data["trace_id"],
            ts=float(data["ts"]),
            fields={k: v for k, v in data.items() if k not in envelope},
            seq=int(data.get("seq", 0)),
        )
