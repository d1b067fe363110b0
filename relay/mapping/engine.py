"""Span -> events: the state machine that the live path, the replay and the receiver share.

``map_span(state, record, ended)`` is a pure function of its inputs: the same spans fed in
the same order into a fresh :class:`~relay.mapping.state.MappingState` give the same
events, payload for payload. That is why a replayed turn equals the live one. What a span
is comes from the rule table (:mod:`relay.mapping.rules`); what a node's children add up
to, from :mod:`relay.mapping.summary`; how a run ends, from :mod:`relay.mapping.answers`.

- Our run root (``relay.turn.id`` at start): start -> ``graph_topology``; end -> the run's
  terminal event, from ``relay.turn.outcome``. A span of a trace whose root the state has
  not seen maps to nothing.
- A *foreign* run (spans of another instrumentation, no ``relay.turn.id``): its turn id is
  the trace id. It begins at the first span that identifies a graph run (see ``activates``
  in the table) with a ``graph_topology`` (empty unless the root names its nodes) and ends
  at its root span's end with ``turn_completed`` (a ChatResponse built from the spans) or
  ``error``. Those instrumentations set their attributes only when a span ends, so a span
  may be recognised only at its end: it then yields its start event and its end event
  together ("late"), and the facts of children that ended before their node was known
  wait for it (bounded, per run).
- A start marker (``relay.start_of``, see :mod:`relay.conventions`) stands for the start
  of the span it names; that span's own start then yields nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.mapping.answers import foreign_end, foreign_node_ended, message_saved, root_end
from relay.mapping.rules import (
    NODE,
    ROLE_OPERATION,
    ROOT,
    TOOL,
    Facts,
    classify,
    json_attr,
    marker_attributes,
    suffix,
)
from relay.mapping.state import MappingState, Open, Run
from relay.mapping.summary import claim, merge, status_of, summarise, to_parent
from relay.spans import SpanRecord


def map_span(state: MappingState, record: SpanRecord, ended: bool) -> list[Event]:
    """The events for one span start (``ended=False``) or end (``ended=True``)."""
    attrs = record.attributes
    if attrs.get(c.OPERATION) == c.OP_SAVE_MESSAGE:
        return message_saved(record) if ended else []
    if c.START_OF in attrs:
        return [] if ended else _marker_started(state, record)
    if not ended and c.TURN_ID in attrs:
        run = state.runs.get(record.trace_id)
        if run is not None and run.root_span_id == record.span_id:
            return []  # its start marker came first
        return _root_started(state, record)
    run = state.runs.get(record.trace_id)
    if run is None:
        return _unknown_trace(state, record, ended)
    if ended and attrs.get(c.TURN_ID) == run.turn_id:
        state.forget_run(run.trace_id)
        return root_end(run, record)
    if not ended:
        return _span_started(state, run, record)
    return _span_ended(state, run, record)


# -- start markers ------------------------------------------------------------------------

def _marker_started(state: MappingState, marker: SpanRecord) -> list[Event]:
    """A start marker: the start of the span it names, unless that span started already."""
    attributes = marker_attributes(marker)
    span_id = str(marker.attributes.get(c.START_OF, "")).lower()
    if attributes is None or len(span_id) != 16:
        return []  # cut or malformed: the real span's end still gives a (late) start
    # a marker is a child of its span (then it names the span's parent, if any, in
    # relay.start.parent) or a sibling (then its own parent is the span's)
    parent = marker.attributes.get(c.START_PARENT)
    if not parent and marker.parent_span_id != span_id:
        parent = marker.parent_span_id
    record = SpanRecord(
        trace_id=marker.trace_id, span_id=span_id,
        parent_span_id=str(parent).lower() if parent else None,
        name=marker.name.removeprefix(c.START_PREFIX), start_ns=marker.start_ns, end_ns=None,
        attributes=attributes)
    run = state.runs.get(marker.trace_id)
    if run is not None and (run.root_span_id == span_id or span_id in state.spans):
        return []
    return map_span(state, record, False)


# -- run root -----------------------------------------------------------------------------

def _root_started(state: MappingState, record: SpanRecord) -> list[Event]:
    attrs = record.attributes
    run = Run(
        turn_id=str(attrs[c.TURN_ID]),
        thread_id=str(attrs.get(c.CONVERSATION_ID, "")),
        trace_id=record.trace_id,
        kind=str(attrs.get(c.RUN_KIND, "chat")),
        root_span_id=record.span_id,
    )
    state.remember(run)
    topology, ok = json_attr(attrs, c.GRAPH_TOPOLOGY, {"nodes": [], "edges": []})
    fields: dict[str, Any] = {
        "graph_id": str(attrs.get(c.GRAPH_ID, "")),
        "nodes": topology.get("nodes", []),
        "edges": topology.get("edges", []),
        "run_kind": run.kind,
    }
    if not ok:
        fields["truncated"] = True
    return [run.event(ev.GRAPH_TOPOLOGY, record.start_ns, fields)]


# -- foreign runs (another instrumentation's spans) ---------------------------------------

def _unknown_trace(state: MappingState, record: SpanRecord, ended: bool) -> list[Event]:
    """A span of a trace with no run: it begins a foreign run when a rule says so."""
    if record.trace_id in state.ended:
        return []
    facts = classify(record)
    if facts is None or not facts.activates:
        return []
    run = Run(turn_id=record.trace_id, thread_id=facts.thread_id or "",
              trace_id=record.trace_id, kind="chat", foreign=True)
    state.remember(run)
    topology = facts.topology or {"nodes": [], "edges": []} if facts.role == ROOT \
        else {"nodes": [], "edges": []}
    events = [run.event(ev.GRAPH_TOPOLOGY, record.start_ns, {
        "graph_id": facts.graph_id or "",
        "nodes": topology["nodes"],
        "edges": topology["edges"],
        "run_kind": run.kind,
    })]
    if facts.role == ROOT and not ended:
        run.root_span_id = record.span_id
        return events
    if ended:
        if facts.role == ROOT:
            run.root_span_id = record.span_id
        return events + _span_ended(state, run, record, facts)
    return events + _span_started(state, run, record, facts)


def _inside(state: MappingState, run: Run, parent_span_id: str | None) -> bool:
    """Whether a span with this parent sits under the run's root or one of its nodes."""
    if parent_span_id is None:
        return False
    if parent_span_id == run.root_span_id:
        return True
    parent = state.spans.get(parent_span_id)
    return parent is not None and parent.node_span_id is not None


def _effective(state: MappingState, run: Run, record: SpanRecord,
               facts: Facts | None) -> Facts | None:
    """Resolve a ``root`` row by where the span sits (see :data:`~relay.mapping.rules.RULES`)."""
    if facts is None or facts.role != ROOT or facts.source == "relay":
        return facts
    if record.span_id == run.root_span_id:
        return facts
    if _inside(state, run, record.parent_span_id):
        if facts.source == "genai":  # a sub-agent
            facts.role = NODE
            return facts
        return None
    if run.foreign and run.root_span_id is None:
        return facts
    return None


# -- spans under a run --------------------------------------------------------------------

def _span_started(state: MappingState, run: Run, record: SpanRecord,
                  facts: Facts | None = None) -> list[Event]:
    if record.span_id in state.spans:
        return []  # its start marker came first
    attrs = record.attributes
    parent = state.spans.get(record.parent_span_id or "")
    if facts is None:
        facts = classify(record)
    facts = _effective(state, run, record, facts)
    if facts is not None and facts.role == ROOT:
        run.root_span_id = record.span_id
        if not run.thread_id and facts.thread_id:
            run.thread_id = facts.thread_id
        return []
    if facts is not None and facts.role == NODE and not _same_task(state, parent, facts):
        node = facts.name if facts.source != "relay" else attrs.get(c.NODE_NAME)
        opened = Open(run, record.span_id, str(node), is_node=True, task=facts.task)
        state.spans[record.span_id] = opened
        claim(state, record.span_id, opened)
        if not run.thread_id and facts.thread_id:
            run.thread_id = facts.thread_id
        return [_node_started(run, record, str(node), facts)]
    node_span_id = parent.node_span_id if parent else None
    node_name = parent.node if parent else None
    opened = Open(run, node_span_id, node_name)
    state.spans[record.span_id] = opened
    if facts is not None and facts.role == TOOL:
        opened.tool_started = True
        return [_tool_started(run, record, facts, node_name or facts.langgraph_node)]
    return []


def _span_ended(state: MappingState, run: Run, record: SpanRecord,
                facts: Facts | None = None) -> list[Event]:
    attrs = record.attributes
    opened = state.spans.pop(record.span_id, None)
    end = record.end_ns or record.start_ns
    if opened is not None and opened.is_node:
        claim(state, record.span_id, opened)
        return [_node_completed(run, record, opened)]
    if facts is None:
        facts = classify(record)
    facts = _effective(state, run, record, facts)
    if facts is not None and facts.role == ROOT and run.foreign:
        state.end_foreign(run.trace_id)
        return foreign_end(run, record)
    if facts is not None and facts.role == NODE and facts.source != "relay":
        # recognised only now (attributes set at end): start and end together
        late = Open(run, record.span_id, str(facts.name), is_node=True, task=facts.task)
        if opened is not None:
            merge(late, opened)
        claim(state, record.span_id, late)
        if not run.thread_id and facts.thread_id:
            run.thread_id = facts.thread_id
        return [_node_started(run, record, str(facts.name), facts),
                _node_completed(run, record, late)]
    operation = attrs.get(c.OPERATION)
    if operation is None and facts is not None:
        operation = ROLE_OPERATION.get(facts.role)
    events: list[Event] = []
    node_name = opened.node if opened is not None else None
    if facts is not None and facts.role == TOOL:
        node_name = node_name or facts.langgraph_node
        if opened is None or not opened.tool_started:  # recognised only now: a late start
            events.append(_tool_started(run, record, facts, node_name))
    if opened is None or opened.node_span_id is None:
        # no enclosing node known: keep the facts for it (an ancestor may be recognised
        # later as a node), and finish a foreign tool
        to_parent(state, run, record, operation, facts, opened)
        started = opened is not None and opened.tool_started
        if facts is not None and facts.role == TOOL and (run.foreign or events or started):
            events.append(_tool_completed(run, record, facts, node_name, end))
        return events
    node = state.spans.get(opened.node_span_id)
    if node is not None:
        summarise(node, record, operation, facts)
    if operation == c.OP_TOOL or (facts is not None and facts.role == TOOL):
        events.append(_tool_completed(run, record, facts, opened.node, end))
    return events


def _same_task(state: MappingState, parent: Open | None, facts: Facts) -> bool:
    """A foreign 'node' inside the node of the same LangGraph task is an inner span."""
    if parent is None or parent.node_span_id is None or facts.task is None:
        return False
    node = state.spans.get(parent.node_span_id)
    return node is not None and node.task == facts.task


def _node_started(run: Run, record: SpanRecord, node: str, facts: Facts) -> Event:
    return run.event(ev.NODE_STARTED, record.start_ns, {
        "node": node,
        "span_id": record.span_id,
        "parent_span_id": record.parent_span_id,
        "step": facts.step,
        "task_id": facts.task_id,
    })


def _node_completed(run: Run, record: SpanRecord, opened: Open) -> Event:
    status = status_of(record, c.NODE_OUTCOME)
    if run.foreign:
        status = foreign_node_ended(run, record, opened.node, status)
    opened.children.sort(key=lambda ch: (ch["start_ts"], ch["span_id"]))  # start order
    return run.event(ev.NODE_COMPLETED, record.end_ns or record.start_ns, {
        "node": opened.node,
        "span_id": record.span_id,
        "status": status,
        "duration_ms": record.duration_ms,
        "summary": opened.summary,
        "children": opened.children,
    })


def _tool_started(run: Run, record: SpanRecord, facts: Facts, node: str | None) -> Event:
    fields: dict[str, Any] = {
        "tool": facts.name,
        "span_id": record.span_id,
        "node": node,
        "call_id": facts.call_id,
    }
    if c.TOOL_LABEL in record.attributes:
        fields["label"] = str(record.attributes[c.TOOL_LABEL])
    return run.event(ev.TOOL_STARTED, record.start_ns, fields)


def _tool_completed(run: Run, record: SpanRecord, facts: Facts | None, node: str | None,
                    end: int) -> Event:
    attrs = record.attributes
    name = facts.name if facts is not None and facts.name is not None \
        else str(attrs.get(c.TOOL_NAME, suffix(record.name)))
    return run.event(ev.TOOL_COMPLETED, end, {
        "tool": name,
        "span_id": record.span_id,
        "node": node,
        "call_id": facts.call_id if facts is not None else attrs.get(c.TOOL_CALL_ID),
        "duration_ms": record.duration_ms,
        "status": status_of(record, c.SPAN_OUTCOME),
    })


# -- span events: text as it is written ---------------------------------------------------

def map_span_event(state: MappingState, record: SpanRecord,
                   event: Mapping[str, Any]) -> list[Event]:
    """The events for one span event (``{name, time_ns, attributes}``) of an open span.

    A ``gen_ai.content.delta`` event on a model-call span is a ``text_delta``: the chunk,
    the message it belongs to (one per model call unless the event names one), and the
    node the call runs in. A processor never sees ``add_event``; the live path hands the
    event over with :meth:`relay.ingest.processor.RelaySpanProcessor.add_event`, the
    replay reads it from the stored span."""
    if event.get("name") != c.DELTA_EVENT:
        return []
    run = state.runs.get(record.trace_id)
    attributes = event.get("attributes") or {}
    text = attributes.get(c.DELTA_TEXT)
    if run is None or not isinstance(text, str) or not text:
        return []
    opened = state.spans.get(record.span_id)
    return [run.event(ev.TEXT_DELTA, int(event.get("time_ns") or record.start_ns), {
        "message_id": str(attributes.get(c.DELTA_MESSAGE_ID) or f"msg_{record.span_id}"),
        "delta": text,
        "node": opened.node if opened is not None else None,
        "span_id": record.span_id,
    })]
