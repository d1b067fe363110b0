"""Which received spans wait in the settle window (relay/ingest/settle.py ``ready``): only
those whose parent the mapping has not seen start, and a run's root; our start markers
and Logfire's pending spans announce a span's start."""

from __future__ import annotations

import json
from typing import Any

from relay import conventions as c
from relay.ingest.settle import ready
from relay.mapping import MappingState
from relay.mapping.feed import feed, ordered_phases
from relay.spans import SpanRecord

TRACE = "a" * 32
ROOT, PLAN, CHAT, ACT = "1" * 16, "2" * 16, "3" * 16, "4" * 16
ROOT_START = {c.TURN_ID: "turn-1", c.CONVERSATION_ID: "th", c.GRAPH_ID: "g"}


def span(span_id: str, parent: str | None, name: str, attrs: dict[str, Any]) -> SpanRecord:
    return SpanRecord(TRACE, span_id, parent, name, 10, 20, attrs)


def marker(of: str, parent: str | None, name: str, attrs: dict[str, Any]) -> SpanRecord:
    extra = {c.START_PARENT: parent} if parent else {}
    return SpanRecord(
        TRACE,
        "e" + of[1:],
        of,
        c.START_PREFIX + name,
        10,
        10,
        {c.START_OF: of, c.START_ATTRIBUTES: json.dumps(attrs), **extra},
    )


def pending(of: str, parent: str | None, name: str, attrs: dict[str, Any]) -> SpanRecord:
    return SpanRecord(
        TRACE,
        "f" + of[1:],
        of,
        name,
        10,
        10,
        {
            **attrs,
            "logfire.span_type": "pending_span",
            "logfire.pending_parent_id": parent or "0" * 16,
        },
    )


def followed(start: SpanRecord) -> MappingState:
    """A state that has mapped the run's start (from ``start``, a marker)."""
    state = MappingState()
    feed(state, ordered_phases([start]), lambda e: None, read=None)
    assert TRACE in state.runs
    return state


def test_a_run_roots_start_goes_at_once_its_end_waits() -> None:
    for announce in (marker, pending):
        start = announce(ROOT, None, "invoke_agent x", ROOT_START)
        assert ready(MappingState(), [start]) == [start]
        root = span(ROOT, None, "invoke_agent x", ROOT_START)
        assert ready(followed(start), [root]) == []


def test_a_span_under_a_started_span_goes_and_an_orphan_waits() -> None:
    for announce in (marker, pending):
        state = followed(announce(ROOT, None, "invoke_agent x", ROOT_START))
        plan = span(PLAN, ROOT, "node plan", {c.NODE_NAME: "plan"})
        chat = span(CHAT, PLAN, "chat m", {c.OPERATION: c.OP_CHAT})
        act = span(ACT, ROOT, "node act", {c.NODE_NAME: "act"})
        assert ready(state, [plan]) == [plan]
        assert ready(state, [chat]) == []  # plan has not started: it may still come
        assert ready(state, [chat, plan]) == [chat, plan]  # its parent came with it
        root = span(ROOT, None, "invoke_agent x", ROOT_START)
        assert ready(state, [act, root]) == [act]  # the root alone waits
        act_start = announce(ACT, ROOT, "node act", {c.NODE_NAME: "act"})
        tool = span("5" * 16, ACT, "execute_tool t", {c.OPERATION: c.OP_TOOL})
        assert ready(state, [tool, act_start]) == [tool, act_start]


def test_nothing_goes_in_a_trace_no_run_follows() -> None:
    plan = span(PLAN, ROOT, "node plan", {c.NODE_NAME: "plan"})
    plan_start = marker(PLAN, ROOT, "node plan", {c.NODE_NAME: "plan"})
    assert ready(MappingState(), [plan]) == []
    assert ready(MappingState(), [plan_start]) == []
