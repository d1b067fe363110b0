"""The event contract (docs/events.md) as checks, shared by the tests that read streams."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relay.events import Event
from relay.mapping.feed import feed
from relay.mapping.order import ordered_phases
from relay.mapping.state import MappingState
from relay.spans import SpanRecord

ENVELOPE = {
    "v": int,
    "type": str,
    "seq": int,
    "thread_id": str,
    "turn_id": str,
    "trace_id": str,
    "ts": float,
}
TYPE_FIELDS: dict[str, dict[str, Any]] = {
    "graph_topology": {"graph_id": str, "nodes": list, "edges": list},
    "node_started": {
        "node": str,
        "span_id": str,
        "parent_span_id": (str, type(None)),
        "step": (int, type(None)),
        "task_id": (str, type(None)),
    },
    "node_completed": {
        "node": str,
        "span_id": str,
        "status": str,
        "duration_ms": float,
        "summary": dict,
    },
    "tool_started": {"tool": str, "span_id": str, "node": (str, type(None))},
    "tool_completed": {
        "tool": str,
        "span_id": str,
        "node": (str, type(None)),
        "duration_ms": float,
        "status": str,
    },
    "paused": {"interrupts": list, "resume": dict},
    "error": {"code": str, "message": str, "node": (str, type(None)), "retryable": bool},
    "turn_completed": {"response": dict},
    "text_delta": {"message_id": str, "delta": str, "node": (str, type(None)), "span_id": str},
    "message_saved": {"message_id": str},
    "turn_recovered": {"attempt": int, "reason": str, "resumed_from": (str, type(None))},
    "custom": {
        "node": (str, type(None)),
        "namespace": list,
        "name": (str, type(None)),
        "data": object,
        "span_id": str,
    },
}
RESPONSE = {
    "thread_id": str,
    "turn_id": str,
    "trace_id": str,
    "status": str,
    "answer": str,
    "citations": list,
    "interrupts": list,
    "nodes": list,
}
NODE_STATUSES = {"ok", "error", "paused", "cancelled", "retrying"}


def _check(obj: dict[str, Any], spec: dict[str, Any], where: str) -> None:
    for name, kind in spec.items():
        assert name in obj, f"{where}: missing {name!r} in {obj}"
        value = obj[name]
        if kind is float:
            kind = (int, float)
        assert isinstance(value, kind), f"{where}: {name}={value!r} is not {kind}"


def check_event(event: dict[str, Any]) -> None:
    _check(event, ENVELOPE, "envelope")
    assert event["v"] == 1
    assert event["seq"] >= 1
    assert len(event["trace_id"]) == 32
    spec = TYPE_FIELDS.get(event["type"])
    if spec is None:
        return  # additive: unknown types are allowed
    _check(event, spec, event["type"])
    if event["type"] == "node_completed":
        assert event["status"] in NODE_STATUSES
        if event["status"] == "retrying":  # an attempt LangGraph's RetryPolicy runs again
            assert isinstance(event["attempt"], int) and event["attempt"] >= 1
    if event["type"] == "tool_started":  # the call's arguments, or a word that they were cut
        assert isinstance(event.get("args", {}), dict)
        assert event.get("args_truncated", True) is True
    if event["type"] == "turn_completed":
        check_response(event["response"])
    if event["type"] == "turn_recovered":  # a run that took the turn up again (Recovery)
        assert event["attempt"] >= 1
        assert event["reason"] in {"owner_lost", "handed_over"}


def check_response(response: dict[str, Any]) -> None:
    _check(response, RESPONSE, "ChatResponse")
    assert set(response) == set(RESPONSE), f"ChatResponse has extra fields: {set(response)}"
    for node in response["nodes"]:
        # a subgraph's node also says its enclosing nodes (its ``namespace``)
        assert {"name", "status", "duration_ms"} <= set(node)
        assert set(node) <= {"name", "status", "duration_ms", "namespace"}


def check_stream(events: list[dict[str, Any]]) -> None:
    """Every event valid; seq strictly increasing; exactly one terminal event, last."""
    assert events, "no events"
    for event in events:
        check_event(event)
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)), f"seq not strictly increasing: {seqs}"
    if events[-1]["type"] == "message_saved":  # the answer's save may trail its completion
        assert events[-2]["type"] == "turn_completed", [e["type"] for e in events]
        assert events[-1]["turn_id"] == events[-2]["turn_id"]
        events = events[:-1]
    terminal = [e for e in events if e["type"] in ("turn_completed", "paused", "error")]
    assert len(terminal) == 1 and terminal[0] is events[-1], [e["type"] for e in events]
    assert events[0]["type"] == "graph_topology"


def sequence(events: list[dict[str, Any]]) -> list[str]:
    """``type`` or ``type:node`` for node/tool events: the shape of a stream (text deltas
    and the trailing ``message_saved`` left out: tested on their own)."""
    out = []
    for e in events:
        if e["type"] in ("text_delta", "message_saved"):
            continue
        if "node" in e and e["type"].startswith("node_"):
            out.append(f"{e['type']}:{e['node']}")
        elif e["type"].startswith("tool_"):
            out.append(f"{e['type']}:{e['tool']}")
        else:
            out.append(e["type"])
    return out


def deltas(events: list[dict[str, Any]]) -> dict[str, str]:
    """The text of each message, from its ``text_delta`` events in order."""
    out: dict[str, str] = {}
    for e in events:
        if e["type"] == "text_delta":
            out[e["message_id"]] = out.get(e["message_id"], "") + e["delta"]
    return out


def reference_events(records: Sequence[SpanRecord]) -> list[Event]:
    """The events of a turn's finished spans the plain way, which the streaming replay
    (``relay.mapping.feed.replay_events``, ``iter_replay_events``) must equal: every
    phase sorted at once (``ordered_phases``), fed to a fresh state, numbered from 1."""
    events: list[Event] = []
    feed(MappingState(), ordered_phases(records), events.append, read=None)
    return [event.stamped(seq) for seq, event in enumerate(events, 1)]
