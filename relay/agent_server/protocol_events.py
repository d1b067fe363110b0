"""One turn's log as the events of LangGraph's streaming protocol (``@langchain/protocol``,
the ``POST /threads/{thread_id}/stream/events`` stream; relay/agent_server/thread_events.py
follows a thread's turns): the event ids, the stream filter, and :class:`TurnEncoder`.

An event, as the protocol frames it (SSE ``event:`` its ``method``, ``id:`` its ``seq``,
``data:`` the JSON)::

    {"type": "event", "event_id": "<turn id>:<relay seq>:<n>", "seq": <int>,
     "method": "lifecycle" | "values" | "updates" | "messages" | "custom"
               | "input.requested",
     "params": {"namespace": [], "timestamp": <epoch ms>, "data": ..., "node"?: ...}}

**Ids.** ``seq`` is durable and ordered across the whole thread: the turn's place in the
thread (its ordinal: 1 for the thread's first turn, by start time), the relay event's
``seq`` in the turn's log, and the event's place among those that relay event makes
(:func:`event_seq`; each part has a fixed width, :data:`ORDINAL_BITS` + :data:`SEQ_BITS`
+ :data:`SUB_BITS` = 53 bits, a JavaScript safe integer). The same turn re-encoded
anywhere (another replica, after a restart, from the stored spans) makes the same events
with the same ids, so a cursor (``since`` in the body, or ``Last-Event-ID``) means the
same thing on every replica. ``event_id`` spells the same position with the turn id.

**What each relay event makes** (the run stream's encoder, relay/agent_server/stream.py,
does the ``values``/``updates``/``messages``/``custom`` part; this module reshapes it):

- the run's first event: ``lifecycle`` ``{"event": "running", "graph_name"}`` (also the
  first event of a resumed run);
- ``values``: the state after each step (``__interrupt__`` taken out: a pause's interrupts
  are ``input.requested`` ``{"interrupt_id", "payload"}`` events instead, then
  ``lifecycle`` ``interrupted``);
- ``updates``: ``{"node", "values"}`` per task of each finished step, ``params.node`` the
  node;
- ``messages``: an AI message streamed token by token as ``message-start`` (``role``
  ``ai``, ``id``), ``content-block-start`` (index 0, ``{"type": "text", "text": ""}``),
  ``content-block-delta`` (``text-delta``) per token, ``content-block-finish`` (the whole
  text) and ``message-finish`` when its node's step ends or another message starts; a
  message a node returned without streaming it, whole (start, block, finish);
- ``custom``: ``{"payload"}`` (and ``name`` when the writer named it);
- the run's end: ``lifecycle`` ``completed``, ``failed`` (``error``: the message), or,
  at a pause, ``interrupted``.

Checkpoints are read as the run stream reads them (relay/agent_server/stream.py), at each
top-level node's start and at the run's end, chosen by the run's trace and the step, so
that a later reading finds what an earlier one did. Only the root namespace (``[]``) is
streamed: no subgraph events yet.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from relay.agent_server.jsonable import jsonable
from relay.agent_server.stream import RunStreamEncoder, ThreadCheckpoints
from relay.errors import ApiError
from relay.events import (
    ERROR,
    MESSAGE_SAVED,
    NODE_STARTED,
    PAUSED,
    RUN_TERMINAL,
    TURN_COMPLETED,
    Event,
)

#: bits of an event's ``seq`` (:func:`event_seq`): the turn's ordinal in its thread, the
#: relay event's seq in the turn's log, the event's place among those the relay event made
ORDINAL_BITS, SEQ_BITS, SUB_BITS = 21, 20, 12
#: the largest ``seq`` (and cursor) there is
MAX_CURSOR = (1 << (ORDINAL_BITS + SEQ_BITS + SUB_BITS)) - 1
#: the deepest ``depth`` a stream request may ask for
MAX_DEPTH = 1000
#: the channels of the protocol (``custom:<name>`` too); those served send events
CHANNELS = frozenset(
    {
        "values",
        "updates",
        "messages",
        "tools",
        "lifecycle",
        "input",
        "checkpoints",
        "tasks",
        "custom",
    }
)
#: the run stream modes a turn is encoded with (all of them: a connection filters)
_MODES = ("values", "updates", "messages-tuple", "custom")
#: a message's type -> its protocol role (a tool's message is not a transcript message)
_ROLES = {"ai": "ai", "AIMessageChunk": "ai", "human": "human", "system": "system"}


def event_seq(ordinal: int, seq: int, sub: int) -> int:
    """The ``seq`` of the ``sub``-th protocol event of relay event ``seq`` of the thread's
    ``ordinal``-th turn (see the module docstring)."""
    if not (0 < ordinal < 1 << ORDINAL_BITS and 0 <= seq < 1 << SEQ_BITS):
        raise ValueError(f"event ({ordinal}, {seq}) is past what an event id can say")
    if not 0 <= sub < 1 << SUB_BITS:
        raise ValueError(f"relay event {seq} of turn {ordinal} made too many events")
    return (ordinal << (SEQ_BITS + SUB_BITS)) | (seq << SUB_BITS) | sub


def position_of(cursor: int) -> tuple[int, int, int]:
    """``(ordinal, seq, sub)`` of an event's ``seq`` (the inverse of :func:`event_seq`)."""
    sub = cursor & ((1 << SUB_BITS) - 1)
    seq = (cursor >> SUB_BITS) & ((1 << SEQ_BITS) - 1)
    return cursor >> (SEQ_BITS + SUB_BITS), seq, sub


@dataclasses.dataclass(frozen=True, slots=True)
class EventFilter:
    """What one connection asked for: its channels and namespaces (``depth`` is read and
    changes nothing while only the root namespace is streamed)."""

    channels: frozenset[str]
    namespaces: tuple[tuple[str, ...], ...] | None = None

    def matches(self, event: Mapping[str, Any]) -> bool:
        if self.namespaces is not None and () not in self.namespaces:
            return False  # every event here is the root's: only the prefix [] holds it
        method = str(event.get("method"))
        channel = "input" if method == "input.requested" else method
        if channel in self.channels:
            return True
        if channel == "custom":
            name = event["params"]["data"].get("name")
            return name is not None and f"custom:{name}" in self.channels
        return False


@dataclasses.dataclass(frozen=True, slots=True)
class StreamRequest:
    """An ``EventStreamRequest``: the filter and the cursor (``since``: None for none)."""

    filter: EventFilter
    since: int | None


def _invalid(message: str) -> ApiError:
    return ApiError(422, "invalid_request", message)


def stream_request(body: Mapping[str, Any]) -> StreamRequest:
    """The ``EventStreamRequest`` a body asks for, or a 422 that names what is wrong."""
    unknown = sorted(set(body) - {"channels", "namespaces", "depth", "since"})
    if unknown:
        raise ApiError(422, "unknown_fields", f"Unknown fields: {', '.join(unknown)}.")
    channels = body.get("channels")
    if not isinstance(channels, list) or not channels:
        raise _invalid("'channels' is required: a non-empty list of channel names.")
    bad = [
        repr(c)
        for c in channels
        if not isinstance(c, str) or (c not in CHANNELS and not _custom_channel(c))
    ]
    if bad:
        raise _invalid(
            f"'channels' has unknown channels: {', '.join(bad[:5])}; the channels are "
            f"{', '.join(sorted(CHANNELS))} and custom:<name>."
        )
    namespaces = body.get("namespaces")
    found: tuple[tuple[str, ...], ...] | None = None
    if namespaces is not None:
        if not isinstance(namespaces, list) or not all(
            isinstance(ns, list) and all(isinstance(part, str) for part in ns) for ns in namespaces
        ):
            raise _invalid("'namespaces' must be a list of namespaces (lists of strings).")
        found = tuple(tuple(ns) for ns in namespaces)
    depth = body.get("depth")
    if depth is not None and (whole_number(depth) is None or not 0 <= depth <= MAX_DEPTH):
        raise _invalid(f"'depth' must be a whole number from 0 to {MAX_DEPTH}.")
    return StreamRequest(EventFilter(frozenset(channels), found), cursor_of(body.get("since")))


def cursor_of(value: Any) -> int | None:
    """A cursor (``since``, or ``Last-Event-ID`` as an int), or a 422; None for none."""
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit() and len(value) <= 16:
        value = int(value)
    value = whole_number(value)
    if value is None or not 0 <= value <= MAX_CURSOR:
        raise _invalid(
            "The cursor ('since', or Last-Event-ID) must be the 'seq' of an event of this "
            "stream, a whole number."
        )
    return value


def whole_number(value: Any) -> int | None:
    """A JSON whole number (``5`` or ``5.0``) as an int; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (value.is_integer() and abs(value) < 2**63):
        return None
    return int(value)


def _custom_channel(channel: str) -> bool:
    return channel.startswith("custom:") and len(channel) > len("custom:")


def _frames(data: bytes) -> list[tuple[str, Any]]:
    """The ``(event, data)`` of the run stream's SSE frames (one-line JSON each)."""
    found: list[tuple[str, Any]] = []
    for block in data.decode().split("\n\n"):
        name, payload = "", None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                payload = json.loads(line[len("data: ") :])
        if name:
            found.append((name, payload))
    return found


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")
        )
    return ""


class TurnEncoder:
    """The protocol events of one turn, relay event by relay event, from the turn's first
    (the encoding keeps state: the checkpoints sent, the open message). ``ordinal``: the
    turn's place in its thread."""

    def __init__(
        self,
        ordinal: int,
        turn_id: str,
        thread_id: str,
        graph_name: str,
        graph: Any,
    ) -> None:
        self.ordinal = ordinal
        self.turn_id = turn_id
        self.graph_name = graph_name
        self.run = RunStreamEncoder(turn_id, thread_id, _MODES, ThreadCheckpoints(graph, thread_id))
        self._in_run = False
        #: the message being streamed: (id, node, text so far)
        self._open: tuple[str, str, str] | None = None

    async def encode(self, event: Event) -> list[dict[str, Any]]:
        """The protocol events relay event ``event`` makes (in order; their ids follow)."""
        made: list[tuple[str, Any, str | None]] = []  # (method, data, node)
        if not self._in_run and event.type != MESSAGE_SAVED:  # (the answer's, after its end)
            self._in_run = True
            made.append(("lifecycle", self._lifecycle("running"), None))
        if event.type == NODE_STARTED and not event.fields.get("namespace"):
            made += self._finish_message()
        for name, data in _frames(await self.run.frames([event])):
            made += self._reshape(name, data, event)
        if event.type in RUN_TERMINAL:
            self._in_run = False
            made += self._finish_message()
            made += self._end(event)
        return [self._envelope(event, n, *item) for n, item in enumerate(made)]

    # -- reshaping the run stream's frames -------------------------------------------------

    def _reshape(self, name: str, data: Any, event: Event) -> list[tuple[str, Any, str | None]]:
        if name == "values":
            values = data if isinstance(data, dict) else {"value": data}
            interrupts = values.pop("__interrupt__", None)
            out: list[tuple[str, Any, str | None]] = [("values", values, None)]
            for interrupt in interrupts or []:
                request = {"interrupt_id": interrupt.get("id"), "payload": interrupt.get("value")}
                out.append(("input", request, None))
            return out
        if name == "updates":
            out = []
            for node, update in (data or {}).items():
                if node == "__interrupt__":
                    continue  # said by the values' input.requested
                out += self._finish_message(node)
                values = update if isinstance(update, dict) else {"value": update}
                out.append(("updates", {"node": node, "values": jsonable(values)}, node))
            return out
        if name == "messages":
            chunk, metadata = data
            return self._message(chunk, str(metadata.get("langgraph_node") or ""))
        if name == "custom":
            custom: dict[str, Any] = {"payload": data}
            if isinstance(event.fields.get("name"), str):
                custom["name"] = event.fields["name"]
            return [("custom", custom, None)]
        return []  # the run stream's own error frame: the run's end says it

    def _message(self, chunk: Mapping[str, Any], node: str) -> list[tuple[str, Any, str | None]]:
        role = _ROLES.get(str(chunk.get("type")))
        message_id = str(chunk.get("id") or "")
        text = _text_of(chunk.get("content"))
        if str(chunk.get("type")) != "AIMessageChunk":  # a whole message a node returned
            if role is None:
                return []
            return [
                *self._finish_message(),
                *self._started_message(message_id, role, node),
                ("messages", _block_finish(text), node),
                ("messages", {"event": "message-finish"}, node),
            ]
        out: list[tuple[str, Any, str | None]] = []
        if self._open is None or self._open[0] != message_id:
            out += self._finish_message()
            out += self._started_message(message_id, "ai", node)
            self._open = (message_id, node, "")
        _, _, so_far = self._open
        self._open = (message_id, node, so_far + text)
        delta = {"event": "content-block-delta", "index": 0}
        out.append(("messages", {**delta, "delta": {"type": "text-delta", "text": text}}, node))
        return out

    def _started_message(
        self, message_id: str, role: str, node: str
    ) -> list[tuple[str, Any, str | None]]:
        start = {"event": "message-start", "role": role, "id": message_id}
        block = {
            "event": "content-block-start",
            "index": 0,
            "content": {"type": "text", "text": ""},
        }
        return [("messages", start, node), ("messages", block, node)]

    def _finish_message(self, node: str | None = None) -> list[tuple[str, Any, str | None]]:
        """The end of the message being streamed (of ``node``'s, when given)."""
        if self._open is None or (node is not None and self._open[1] != node):
            return []
        _, at, text = self._open
        self._open = None
        return [
            ("messages", _block_finish(text), at),
            ("messages", {"event": "message-finish"}, at),
        ]

    def _end(self, event: Event) -> list[tuple[str, Any, str | None]]:
        if event.type == PAUSED:
            return [("lifecycle", self._lifecycle("interrupted"), None)]
        if event.type == ERROR:
            failed = self._lifecycle("failed")
            failed["error"] = str(event.fields.get("message") or event.fields.get("code"))
            return [("lifecycle", failed, None)]
        if event.type == TURN_COMPLETED:
            return [("lifecycle", self._lifecycle("completed"), None)]
        return []

    def _lifecycle(self, status: str) -> dict[str, Any]:
        return {"event": status, "graph_name": self.graph_name}

    def _envelope(
        self, event: Event, sub: int, method: str, data: Any, node: str | None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"namespace": [], "timestamp": int(event.ts), "data": data}
        if node:
            params["node"] = node
        return {
            "type": "event",
            "event_id": f"{self.turn_id}:{event.seq}:{sub}",
            "seq": event_seq(self.ordinal, event.seq, sub),
            "method": "input.requested" if method == "input" else method,
            "params": params,
        }


def _block_finish(text: str) -> dict[str, Any]:
    return {"event": "content-block-finish", "index": 0, "content": {"type": "text", "text": text}}


def sse_of(event: Mapping[str, Any]) -> bytes:
    """One protocol event as an SSE frame: ``event:`` its method, ``id:`` its seq."""
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"event: {event['method']}\nid: {event['seq']}\ndata: {data}\n\n".encode()


def sse_all(events: Sequence[Mapping[str, Any]]) -> bytes:
    return b"".join(sse_of(e) for e in events)
