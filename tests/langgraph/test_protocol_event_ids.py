"""The ids and filter of the streaming protocol's events (relay/agent_server/
protocol_events.py): an event's ``seq`` orders the thread's events by turn, relay event
and place, and reads back as the same position; a stream request's filter."""

from __future__ import annotations

import pytest

from relay.agent_server.protocol_events import (
    MAX_CURSOR,
    EventFilter,
    cursor_of,
    event_seq,
    position_of,
    stream_request,
)
from relay.errors import ApiError


def test_event_seqs_order_turns_then_events_then_places() -> None:
    positions = [(1, 1, 0), (1, 1, 7), (1, 2, 0), (1, 900_000, 4095), (2, 1, 0), (9, 0, 0)]
    seqs = [event_seq(*p) for p in positions]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [position_of(s) for s in seqs] == positions
    assert event_seq((1 << 21) - 1, (1 << 20) - 1, (1 << 12) - 1) == MAX_CURSOR
    assert MAX_CURSOR == 2**53 - 1  # a JavaScript safe integer
    for bad in ((0, 1, 0), (1 << 21, 0, 0), (1, 1 << 20, 0), (1, 1, 1 << 12), (1, -1, 0)):
        with pytest.raises(ValueError):
            event_seq(*bad)


def test_cursors_and_stream_requests() -> None:
    assert cursor_of(None) is None
    assert cursor_of("4294971392") == cursor_of(4294971392) == cursor_of(4294971392.0)
    for bad in ("x", -1, True, 1.5, MAX_CURSOR + 1, "1" * 17, [1]):
        with pytest.raises(ApiError):
            cursor_of(bad)
    asked = stream_request({"channels": ["values", "custom:tool"], "namespaces": [[]]})
    assert asked.since is None and asked.filter.namespaces == ((),)
    named = {"method": "custom", "params": {"data": {"name": "tool", "payload": 1}}}
    unnamed = {"method": "custom", "params": {"data": {"payload": 1}}}
    assert asked.filter.matches(named) and not asked.filter.matches(unnamed)
    assert asked.filter.matches({"method": "values", "params": {"data": {}}})
    inputs = EventFilter(frozenset({"input"}))
    assert inputs.matches({"method": "input.requested", "params": {"data": {}}})
    subgraphs_only = EventFilter(frozenset({"values"}), (("child",),))
    assert not subgraphs_only.matches({"method": "values", "params": {"data": {}}})
    for bad in ({"channels": ["values"], "depth": 1001}, {"channels": [1]}, {"channels": "values"}):
        with pytest.raises(ApiError):
            stream_request(bad)
