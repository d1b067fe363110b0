"""The short paths for our own node spans and the GenAI spans inside them
(relay/mapping/own.py) map every phase to the events the general path gives, payload
for payload: on the recorded turns of the demo agent (its graph spanned by GraphAgent's
instrumentation) and on generated turns of node spans, nested nodes, GenAI children
(some with another instrumentation's attributes too), namespaces, outcomes, lost starts
and stray traces."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay import conventions as c
from relay.ingest.tracefile import parse_trace_file
from relay.mapping import engine
from relay.mapping.feed import END, LEAF, START, as_live, feed, ordered_phases
from relay.mapping.state import MappingState
from relay.spans import SpanRecord

FIXTURES = Path(__file__).parent.parent / "store" / "fixtures"


def _events(
    phases: list[tuple[SpanRecord, str, Any]], short: bool = True, read: Any = as_live
) -> list[dict[str, Any]]:
    """The events of ``phases``, with the short path (``short``) or with the general path
    only (the short path patched out for this call); ``read`` as ``feed`` takes it
    (``None``: the finished records as they are, as a replay feeds them)."""
    out: list[Any] = []
    with contextlib.ExitStack() as stack:
        if not short:
            stack.enter_context(mock.patch.object(engine, "node_phase", lambda *a: None))
            stack.enter_context(mock.patch.object(engine, "child_phase", lambda *a: None))
        feed(MappingState(), phases, out.append, read=read)
    return [e.to_dict() for e in out]


@pytest.mark.parametrize("name", ["refund", "failed"])
def test_recorded_turns_map_alike(name: str) -> None:
    _, records = parse_trace_file((FIXTURES / f"{name}.otlp.jsonl").read_text())
    phases = list(ordered_phases(records))
    short = _events(phases, True)
    assert any(e["type"] == "node_started" for e in short)
    assert short == _events(phases, False)


_OUTCOMES = st.sampled_from([None, "ok", "error", "paused", "cancelled", "weird"])
_CHILD = st.sampled_from(
    [
        "node",
        "node",
        "node",
        c.OP_CHAT,
        c.OP_TOOL,
        c.OP_TOOL,
        c.OP_RETRIEVAL,
        c.OP_GUARDRAIL,
        "plain",
        "node+op",
        "marker",
    ]
)
#: what a GenAI child may carry besides its operation (another instrumentation's kind or
#: LangGraph metadata: the short path leaves those to the general one)
_EXTRA = st.sampled_from(
    [
        {},
        {},
        {},
        {c.TOOL_CALL_ID: "call-1"},
        {c.TOOL_LABEL: "Search"},
        {"traceloop.association.properties.langgraph_node": "n1"},
        {"openinference.span.kind": "TOOL"},
        {"traceloop.span.kind": "task"},
        {c.SPAN_OUTCOME: "error"},
    ]
)


@st.composite
def turns(draw: st.DrawFn) -> list[tuple[SpanRecord, str, Any]]:
    """A run root (topology declared or not, instrumented or not) and spans under it or
    each other, their phases in an order where each span starts before it ends (some
    starts lost), plus a trace with no root."""
    trace = "a" * 32
    stray = "b" * 32
    n = draw(st.integers(1, 9))
    root_attrs: dict[str, Any] = {
        c.TURN_ID: "t1",
        c.CONVERSATION_ID: "th",
        c.RUN_KIND: "chat",
        c.GRAPH_ID: "g",
    }
    if draw(st.booleans()):
        root_attrs[c.GRAPH_TOPOLOGY] = json.dumps({"nodes": [], "edges": []})
    if draw(st.booleans()):
        root_attrs[c.GRAPH_INSTRUMENTED] = True
    root = SpanRecord(trace, "f" * 16, None, "invoke_agent a", 1_000, None, root_attrs)
    spans: list[SpanRecord] = []
    for i in range(n):
        kind = draw(_CHILD)
        parent = draw(st.integers(-1, i - 1))
        parent_id = root.span_id if parent < 0 else spans[parent].span_id
        attrs: dict[str, Any] = {}
        if kind.startswith("node"):
            attrs[c.NODE_NAME] = f"n{draw(st.integers(0, 3))}"
            if draw(st.booleans()):
                attrs[c.NODE_STEP] = i
                attrs[c.NODE_TASK_ID] = f"task{i}"
            ns = draw(st.sampled_from([None, ["outer"], [], '["x"]', "bad", ("a", "b")]))
            if ns is not None:
                attrs[c.NODE_NAMESPACE] = ns
            if kind == "node+op":
                attrs[c.OPERATION] = c.OP_CHAT
        elif kind == "marker":
            attrs[c.START_OF] = f"{i:016x}"
        elif kind != "plain":
            attrs[c.OPERATION] = kind
            if draw(st.booleans()):
                attrs[c.TOOL_NAME] = "search"
            attrs.update(draw(_EXTRA))
            if kind == c.OP_CHAT:
                attrs.update({c.REQUEST_MODEL: "m", c.INPUT_TOKENS: 2, c.OUTPUT_TOKENS: 1})
            elif kind == c.OP_RETRIEVAL:
                attrs[c.RETRIEVAL_DOCUMENTS] = 3
            elif kind == c.OP_GUARDRAIL:
                attrs.update({c.GUARDRAIL_NAME: "pii", c.GUARDRAIL_DECISION: "allow"})
        tid = stray if draw(st.integers(0, 9)) == 0 else trace
        spans.append(
            SpanRecord(tid, f"{i + 1:016x}", parent_id, f"span {i}", 2_000 + i, None, attrs)
        )
    order: list[tuple[SpanRecord, str, Any]] = [(root, START, None)]
    pending = list(range(n))
    started: list[int] = []
    while pending or started:
        pick_start = pending and (not started or draw(st.booleans()))
        if pick_start:
            i = pending.pop(draw(st.integers(0, min(1, len(pending) - 1))))
            if draw(st.integers(0, 7)) != 0:  # else its start is lost
                order.append((spans[i], START, None))
            started.append(i)
        else:
            i = started.pop(draw(st.integers(0, len(started) - 1)))
            end_attrs = dict(spans[i].attributes)
            outcome = draw(_OUTCOMES)
            if outcome is not None:
                end_attrs[c.NODE_OUTCOME] = outcome
            s = spans[i]
            ended = SpanRecord(
                s.trace_id,
                s.span_id,
                s.parent_span_id,
                s.name,
                s.start_ns,
                s.start_ns + 1_234_567,
                end_attrs,
                status=draw(st.sampled_from(["unset", "ok", "error"])),
            )
            order.append((ended, END, None))
    end_attrs = {
        **root_attrs,
        c.TURN_OUTCOME: "answered",
        c.TURN_RESPONSE: json.dumps({"status": "answered", "answer": "x"}),
    }
    order.append(
        (SpanRecord(trace, root.span_id, None, root.name, 1_000, 9_000_000, end_attrs), END, None)
    )
    return order


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phases=turns())
def test_generated_turns_map_alike(phases: list[tuple[SpanRecord, str, Any]]) -> None:
    assert _events(phases, True) == _events(phases, False)


def _finished(phases: list[tuple[SpanRecord, str, Any]]) -> list[tuple[SpanRecord, str, Any]]:
    """The phases as a replay feeds them: each span's finished record at every phase."""
    last = {(r.trace_id, r.span_id): r for r, kind, _ in phases if kind == END}
    return [(last.get((r.trace_id, r.span_id), r), kind, ev) for r, kind, ev in phases]


def _as_leaves(phases: list[tuple[SpanRecord, str, Any]]) -> list[tuple[SpanRecord, str, Any]]:
    """Each start followed right away by its span's end, as one ``LEAF`` phase."""
    out: list[tuple[SpanRecord, str, Any]] = []
    for record, kind, event in phases:
        if kind == END and out and out[-1][1] == START and out[-1][0] is record:
            out[-1] = (record, LEAF, None)
        else:
            out.append((record, kind, event))
    return out


@pytest.mark.parametrize("name", ["refund", "failed"])
def test_recorded_leaves_map_as_their_start_and_end(name: str) -> None:
    _, records = parse_trace_file((FIXTURES / f"{name}.otlp.jsonl").read_text())
    phases = list(ordered_phases(records))
    leaves = _as_leaves(phases)
    assert any(kind == LEAF for _, kind, _ in leaves)
    assert _events(leaves, read=None) == _events(phases, read=None)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phases=turns())
def test_generated_leaves_map_as_their_start_and_end(
    phases: list[tuple[SpanRecord, str, Any]],
) -> None:
    """A ``LEAF`` gives the events of its start and its end, and leaves the state as they
    do: on the short path (``child_leaf``) and off it, whatever the span is."""
    finished = _finished(phases)
    assert _events(_as_leaves(finished), read=None) == _events(finished, read=None)


def test_a_node_that_starts_after_its_child_ended_claims_its_facts() -> None:
    """A child's facts wait under its parent's id until that node's start (the orphans)."""
    trace = "a" * 32
    root_id = "f" * 16
    node_id = "1" * 16
    attrs = {c.TURN_ID: "t1", c.CONVERSATION_ID: "th", c.GRAPH_ID: "g"}
    root = SpanRecord(trace, root_id, None, "invoke_agent a", 1_000, None, attrs)
    chat = {c.OPERATION: c.OP_CHAT, c.REQUEST_MODEL: "m", c.INPUT_TOKENS: 3}
    child = SpanRecord(trace, "2" * 16, node_id, "chat m", 3_000, 4_000, chat)
    node = SpanRecord(trace, node_id, root_id, "node n", 2_000, None, {c.NODE_NAME: "n"})
    ended = SpanRecord(trace, node_id, root_id, "node n", 2_000, 5_000, {c.NODE_NAME: "n"})
    phases = [
        (root, START, None),
        (child.at_start(), START, None),
        (child, END, None),
        (node, START, None),
        (ended, END, None),
    ]
    short = _events(phases, True)
    assert short[-1]["summary"] == {"model": "m", "input_tokens": 3}
    assert short == _events(phases, False)


@pytest.mark.parametrize("instrumented", [False, True])
def test_a_tool_that_ends_after_its_node(instrumented: bool) -> None:
    """In a run our instrumentation spans, a GenAI span whose node ended first is no
    longer under our nodes: a plain span (placement.effective), no ``tool_completed``."""
    trace = "a" * 32
    root_id = "f" * 16
    node_id = "1" * 16
    attrs: dict[str, Any] = {c.TURN_ID: "t1", c.CONVERSATION_ID: "th", c.GRAPH_ID: "g"}
    if instrumented:
        attrs[c.GRAPH_INSTRUMENTED] = True
    root = SpanRecord(trace, root_id, None, "invoke_agent a", 1_000, None, attrs)
    node = SpanRecord(trace, node_id, root_id, "node n", 2_000, None, {c.NODE_NAME: "n"})
    tool = SpanRecord(
        trace,
        "2" * 16,
        node_id,
        "execute_tool t",
        3_000,
        6_000,
        {c.OPERATION: c.OP_TOOL, c.TOOL_NAME: "t"},
    )
    ended = SpanRecord(trace, node_id, root_id, "node n", 2_000, 5_000, {c.NODE_NAME: "n"})
    phases = [
        (root, START, None),
        (node, START, None),
        (tool.at_start(), START, None),
        (ended, END, None),
        (tool, END, None),
    ]
    short = _events(phases, True)
    assert [e["type"] for e in short].count("tool_completed") == (0 if instrumented else 1)
    assert short == _events(phases, False)


def test_a_leaf_takes_the_facts_that_waited_for_it() -> None:
    """A model call that ended before its parent tool started waits under the tool's id;
    the tool, a ``LEAF`` on the short path, hands it on to the node with its own facts."""
    trace = "a" * 32
    root_id = "f" * 16
    node_id = "1" * 16
    tool_id = "2" * 16
    attrs = {c.TURN_ID: "t1", c.CONVERSATION_ID: "th", c.GRAPH_ID: "g"}
    root = SpanRecord(trace, root_id, None, "invoke_agent a", 1_000, 9_000, attrs)
    node = SpanRecord(trace, node_id, root_id, "node n", 2_000, 8_000, {c.NODE_NAME: "n"})
    chat = SpanRecord(
        trace,
        "3" * 16,
        tool_id,
        "chat m",
        3_000,
        4_000,
        {c.OPERATION: c.OP_CHAT, c.REQUEST_MODEL: "m", c.INPUT_TOKENS: 3},
    )
    tool = SpanRecord(
        trace,
        tool_id,
        node_id,
        "execute_tool t",
        5_000,
        6_000,
        {c.OPERATION: c.OP_TOOL, c.TOOL_NAME: "t"},
    )
    phases = [
        (root, START, None),
        (node, START, None),
        (chat, START, None),
        (chat, END, None),
        (tool, START, None),
        (tool, END, None),
        (node, END, None),
    ]
    leaves = _as_leaves(phases)
    assert [kind for _, kind, _ in leaves].count(LEAF) == 2
    events = _events(leaves, read=None)
    completed = next(e for e in events if e["type"] == "node_completed")
    assert completed["summary"] == {"model": "m", "input_tokens": 3, "tools": ["t"]}
    assert [ch["name"] for ch in completed["children"]] == ["chat m", "execute_tool t"]
    assert events == _events(phases, read=None)
