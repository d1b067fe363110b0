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
  the trace id, or the paused turn it resumes (:mod:`relay.mapping.links`). It begins at
  the first span that identifies a graph run (see ``activates`` in the table) with a
  ``graph_topology`` (the declared or named graph, else discovered as it runs:
  :mod:`relay.mapping.discovery`) and ends at its root span's end with ``paused`` (a node
  left on an interrupt: :mod:`relay.mapping.interrupts`), ``turn_completed`` (a
  ChatResponse built from the spans) or ``error``. Those instrumentations set their
  attributes only when a span ends, so a trace no rule recognises yet is followed
  tentatively, and a node may be recognised only at its end or at the end of a span
  inside it (:mod:`relay.mapping.placement`): its ``node_started`` is then late (stamped
  with the span's own start), but still comes before anything inside it, whose events
  wait for it, and before its ``node_completed``.
- A start marker (``relay.start_of``, see :mod:`relay.conventions`) or Logfire's pending
  span stands for the start of the span it names (:mod:`relay.mapping.markers`); that
  span's own start then yields nothing.
- Our own node spans in our runs, and the GenAI spans inside them, take a short path
  (:mod:`relay.mapping.own`).
"""

from __future__ import annotations

from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.mapping.answers import (
    answer_of,
    discovery_end,
    foreign_end,
    message_of,
    message_saved,
    root_end,
)
from relay.mapping.discovery import Discovery, node_discovered
from relay.mapping.facts import NODE, ROLE_OPERATION, ROOT, TOOL, Facts
from relay.mapping.foreign_attributes import LF_PENDING, LF_SPAN_TYPE, declared_topology, placement
from relay.mapping.links import awaits_resume, link_resume
from relay.mapping.markers import started_span
from relay.mapping.own import CHILD_OPERATIONS, child_phase, node_phase
from relay.mapping.payloads import (
    node_completed,
    node_started,
    recovery_fields,
    tool_completed_fields,
    tool_fields,
)
from relay.mapping.placement import (
    claim_nodes,
    effective,
    emit_or_hold,
    namespace_attr,
    namespace_from_parents,
    place,
    release,
    release_all,
    segments,
)
from relay.mapping.rules import classify
from relay.mapping.state import MappingState, Open, Run
from relay.mapping.summary import claim, merge, summarise, to_parent
from relay.spans import SpanRecord


def map_span(state: MappingState, record: SpanRecord, ended: bool) -> list[Event]:
    """The events for one span start (``ended=False``) or end (``ended=True``)."""
    attrs = record.attributes
    if c.START_OF in attrs or attrs.get(LF_SPAN_TYPE) == LF_PENDING:  # a span's start
        # (our start marker, Logfire's pending span: relay/mapping/markers.py)
        return [] if ended else _marker_started(state, record)
    if c.NODE_NAME in attrs and (events := node_phase(state, record, ended)) is not None:
        return events  # one of our node spans, on the short path (relay/mapping/own.py)
    operation = attrs.get(c.OPERATION)
    if (
        operation in CHILD_OPERATIONS
        and (events := child_phase(state, record, ended, operation)) is not None
    ):
        return events  # a GenAI span inside one of our nodes, on the short path
    if operation == c.OP_SAVE_MESSAGE:
        return message_saved(record) if ended else []
    if not ended and c.TURN_ID in attrs:
        run = state.runs.get(record.trace_id)
        if run is not None and run.root_span_id == record.span_id:
            return []  # its start marker came first
        return _root_started(state, record)
    run = state.runs.get(record.trace_id) or state.run_of(record.trace_id)
    if run is None:
        return _unknown_trace(state, record, ended)
    if ended and attrs.get(c.TURN_ID) == run.turn_id:
        held = release_all(run)
        events = held + discovery_end(state, run, record) + root_end(run, record)
        state.forget_run(run.trace_id)  # (after: a root that cannot be mapped keeps its run)
        return events
    if not ended:
        return _span_started(state, run, record)
    return _span_ended(state, run, record)


# -- start markers ------------------------------------------------------------------------


def _marker_started(state: MappingState, marker: SpanRecord) -> list[Event]:
    """A start marker (or Logfire's pending span): the start of the span it names, unless
    that span started already (:mod:`relay.mapping.markers`)."""
    record = started_span(marker)
    if record is None:
        return []  # cut or malformed: the real span's end still gives a (late) start
    run = state.run_of(marker.trace_id)
    if run is not None and (run.root_span_id == record.span_id or record.span_id in state.spans):
        return []
    return map_span(state, record, False)


# -- run root -----------------------------------------------------------------------------


def _root_started(state: MappingState, record: SpanRecord) -> list[Event]:
    attrs = record.attributes
    if record.trace_id in state.ended:  # its run ended already (unmappable spans)
        return []
    if record.trace_id in state.tentative:  # some of its spans came first: start over
        state.forget_run(record.trace_id)
    run = Run(
        turn_id=str(attrs[c.TURN_ID]),
        thread_id=str(attrs.get(c.CONVERSATION_ID, "")),
        trace_id=record.trace_id,
        kind=str(attrs.get(c.RUN_KIND, "chat")),
        root_span_id=record.span_id,
        instrumented=attrs.get(c.GRAPH_INSTRUMENTED) is True,
    )
    run.graph_id = str(attrs.get(c.GRAPH_ID, ""))
    run.message = str(attrs.get(c.TURN_MESSAGE, ""))
    state.note("start", run, record)
    if run.instrumented and run.graph_id:  # a GraphAgent: its graph's own route
        run.resume_path = f"/graphs/{run.graph_id}/chat/resume"
    if state.resume_route is not None and state.resume_route(run.graph_id) is None:
        run.resume_path = None  # the serving process offers none (a relay-only server)
    state.remember(run)
    topology, ok = state.topology(attrs.get(c.GRAPH_TOPOLOGY))
    fields: dict[str, Any] = {
        "graph_id": str(attrs.get(c.GRAPH_ID, "")),
        "nodes": topology.get("nodes", []),
        "edges": topology.get("edges", []),
        "run_kind": run.kind,
    }
    if c.GRAPH_TOPOLOGY not in attrs:  # none sent: discovered as its nodes run
        paused = state.paused.get(run.thread_id) if run.kind == "resume" else None
        if paused is not None and paused.turn_id == run.turn_id:
            del state.paused[run.thread_id]
        run.discovery = (
            paused.discovery
            if paused is not None and paused.discovery
            else Discovery(fields["graph_id"])
        )
        shape = run.discovery.topology()
        fields.update(nodes=shape["nodes"], edges=shape["edges"], discovered=True)
    if not ok:
        fields["truncated"] = True
    run.begun = True
    topology_event = run.event(ev.GRAPH_TOPOLOGY, record.start_ns, fields)
    if c.RECOVERY_ATTEMPT not in attrs:
        return [topology_event]
    return [run.event(ev.TURN_RECOVERED, record.start_ns, recovery_fields(attrs)), topology_event]


# -- foreign runs (another instrumentation's spans) ---------------------------------------


def _unknown_trace(state: MappingState, record: SpanRecord, ended: bool) -> list[Event]:
    """A span of a trace with no run: it begins a foreign run when a rule says so; else
    the trace is followed tentatively from this start on (another instrumentation may say
    only at a span's end that it is a graph run)."""
    if record.trace_id in state.ended:
        return []
    facts = classify(record)
    run = Run(
        turn_id=record.trace_id,
        thread_id="",
        trace_id=record.trace_id,
        kind="chat",
        foreign=True,
        active=False,
    )
    if facts is None or not facts.activates:
        if ended or (facts is not None and facts.source == "relay"):
            return []
        state.follow(run)
        return _span_started(state, run, record, facts)
    if facts.role == ROOT:
        run.root_span_id = record.span_id
        if not ended and awaits_resume(state, facts.thread_id, record.attributes):
            # its thread waits on a resume and this root says nothing of its input: the
            # first node says (its task) whether it is that resume
            run.thread_id = facts.thread_id or ""
            state.follow(run)
            return []
    events = _activate(state, run, record, facts)
    if facts.role == ROOT and not ended:
        return events
    if ended:
        return events + _span_ended(state, run, record, facts)
    return events + _span_started(state, run, record, facts)


def _activate(state: MappingState, run: Run, record: SpanRecord, facts: Facts) -> list[Event]:
    """A foreign run begins: its ``graph_topology``, stamped with its root's start when
    the root is known (empty unless the root lists the graph's nodes)."""
    if run.active and run.trace_id in state.runs:
        return []
    state.activate(run)
    if not run.thread_id and facts.thread_id:
        run.thread_id = facts.thread_id
    run.resume_path = None  # its agent runs elsewhere: resumed there, not here
    start = record.start_ns
    graph_id = facts.graph_id if facts.role == ROOT else None
    root = state.spans.get(run.root_span_id or "")
    if root is not None and run.root_span_id != record.span_id:
        start = root.start_ns
        graph_id = graph_id or root.name
    run.graph_id = graph_id or ""
    run.started_ns = start
    run.message = run.message or message_of(record.attributes)  # (or its root's, seen)
    link_resume(state, run, record, facts)
    # the one the agent declared (relay.graph.topology, or in metadata), else its root's
    topology, declared_id = declared_topology(record.attributes)
    run.graph_id = declared_id or run.graph_id
    if topology is None:
        topology = facts.topology if facts.role == ROOT and facts.topology else run.topology
    run.topology = topology
    fields: dict[str, Any] = {"graph_id": run.graph_id}
    if topology is None:  # nodes as they run (relay/mapping/discovery.py)
        if run.discovery is None:
            run.discovery = Discovery(run.graph_id)
        fields.update(run.discovery.topology())
        fields["graph_id"] = run.graph_id or run.discovery.graph_id
    else:
        fields.update(nodes=topology["nodes"], edges=topology["edges"])
    fields["run_kind"] = run.kind
    state.note("start", run, record)
    run.begun = True
    return [run.event(ev.GRAPH_TOPOLOGY, start, fields)]


# -- spans under a run --------------------------------------------------------------------


def _span_started(
    state: MappingState, run: Run, record: SpanRecord, facts: Facts | None = None
) -> list[Event]:
    if record.span_id in state.spans:
        return []  # its start marker came first
    attrs = record.attributes
    if facts is None:
        facts = classify(record)
    if facts is None or facts.source != "relay" or run.instrumented:  # (else: as it is)
        facts = effective(state, run, record, facts)
    if facts is not None and facts.role == ROOT:
        run.root_span_id = record.span_id
        if not run.thread_id and facts.thread_id:
            run.thread_id = facts.thread_id
        if run.foreign:  # (it may come after a node began the run)
            if run.active:
                run.started_ns = min(run.started_ns or record.start_ns, record.start_ns)
            run.message = run.message or message_of(attrs)
        return []
    parent = state.spans.get(record.parent_span_id or "")
    opened = Open(run, record.parent_span_id, record.name, record.start_ns)
    if parent is not None and parent.firm:  # under one of our nodes: no late nodes
        opened.firm = True
        opened.owner = parent if parent.is_node else parent.owner
    elif facts is None and c.OPERATION not in attrs and not run.instrumented:
        opened.maybe_node = True
    state.spans[record.span_id] = opened  # state.open, inlined: once per span
    run.span_ids.add(record.span_id)
    if facts is None:
        return []
    if facts.role == NODE and (
        facts.source == "relay" or (facts.task is None and facts.langgraph_node is None)
    ):
        return _own_node(state, run, record, opened, facts, parent)
    events: list[Event] = []
    if facts.role == NODE or (
        facts.langgraph_node is not None
        and (not run.active or place(state, run, record.parent_span_id)[1] is not None)
    ):
        events += _claim(state, run, record, facts, opened if facts.role == NODE else None)
        if opened.is_node:
            return events
    if facts.role == TOOL:
        opened.tool_started = True
        events += emit_or_hold(
            state,
            run,
            record.parent_span_id,
            ev.TOOL_STARTED,
            record.start_ns,
            tool_fields(record, facts),
            opened.owner,
        )
    return events


def _own_node(
    state: MappingState,
    run: Run,
    record: SpanRecord,
    opened: Open,
    facts: Facts,
    parent: Open | None,
) -> list[Event]:
    """A span that names itself a node (ours: ``relay.node.name``; a sub-agent; a foreign
    node that gives no LangGraph namespace)."""
    if not run.active and not facts.activates:
        return []  # ours, in a trace whose run root was not seen: nothing to follow
    attrs = record.attributes
    relay = facts.source == "relay"
    opened.is_node = True
    opened.firm = relay
    opened.node = str(attrs.get(c.NODE_NAME)) if relay else str(facts.name)
    namespace = namespace_attr(attrs) if relay and c.NODE_NAMESPACE in attrs else None
    if namespace is None and parent is not None:  # else at the top (under the root)
        namespace = namespace_from_parents(state, run, record.parent_span_id)
    if namespace:
        opened.namespace = namespace
    if state.orphans:
        claim(state, record.span_id, opened)
    events = [] if run.active else _activate(state, run, record, facts)
    if not run.thread_id and facts.thread_id:
        run.thread_id = facts.thread_id
    return [
        *events,
        *node_discovered(run, opened),
        node_started(run, record.span_id, opened, facts.step, facts.task_id),
    ]


def _claim(
    state: MappingState, run: Run, record: SpanRecord, facts: Facts, own: Open | None
) -> list[Event]:
    """The nodes a span's LangGraph metadata names (its own, when ``own``), recognised now:
    the run's ``graph_topology`` when it begins here, their ``node_started`` (outermost
    first), then what waited for them."""
    where = segments(facts.task, facts.langgraph_node or facts.name)
    claimed = claim_nodes(
        state,
        run,
        record.parent_span_id,
        where,
        facts.step,
        (record.span_id, own) if own is not None else None,
    )
    events: list[Event] = []
    if (claimed or facts.activates) and not run.active:
        events += _activate(state, run, record, facts)
    if not run.thread_id and facts.thread_id:
        run.thread_id = facts.thread_id
    for opened, span_id, step, task_id in claimed:
        events += node_discovered(run, opened)
        events.append(node_started(run, span_id, opened, step, task_id))
    if claimed:
        events += release(state, run, {span_id for _, span_id, _, _ in claimed})
    return events


def _span_ended(
    state: MappingState, run: Run, record: SpanRecord, facts: Facts | None = None
) -> list[Event]:
    attrs = record.attributes
    opened = state.spans.get(record.span_id)
    if opened is not None and opened.is_node:
        state.close(record.span_id)
        if state.orphans:
            claim(state, record.span_id, opened)
        return [node_completed(run, record, opened)]
    if facts is None:
        facts = classify(record)
    if facts is not None and facts.role == ROOT and run.foreign:
        run.output = answer_of(attrs) or run.output  # a graph's root inside the run's
        run.message = run.message or message_of(attrs)
    facts = effective(state, run, record, facts)
    if facts is not None and facts.role == ROOT and run.foreign:
        events = [] if run.active or not facts.activates else _activate(state, run, record, facts)
        if not run.active:  # a tentative trace ends: it was no graph run
            state.forget_run(run.trace_id)
            return []
        events += release_all(run)
        state.end_foreign(run.trace_id)
        return events + foreign_end(state, run, record)
    if opened is None:  # its start was not seen
        opened = Open(
            run,
            record.parent_span_id,
            record.name,
            record.start_ns,
            maybe_node=facts is None and not run.instrumented,
        )
    events = []
    node, anchor = (opened.owner, None) if opened.firm else place(state, run, record.parent_span_id)
    if facts is not None and facts.role == NODE and facts.source != "relay":
        # recognised only now (attributes set at end): a late start, unless an enclosing
        # node already has its task (then it is a runnable inside that node)
        if facts.task is None and facts.langgraph_node is None:
            events += _own_node(
                state, run, record, opened, facts, state.spans.get(record.parent_span_id or "")
            )
        else:
            events += _claim(state, run, record, facts, opened)
        if opened.is_node:
            state.close(record.span_id)
            return [*events, node_completed(run, record, opened)]
        node = place(state, run, record.parent_span_id)[0]  # an enclosing one, maybe now
    elif (not run.active or anchor is not None) and not run.instrumented:
        where = facts if facts is not None and facts.langgraph_node else placement(attrs)
        if where is not None:  # a span inside a node names it (and those around it)
            events += _claim(state, run, record, where, None)
            node = place(state, run, record.parent_span_id)[0]
    if opened.maybe_node:  # it is no node: what waited under it looks further up
        opened.maybe_node = False
        events += release(state, run, {record.span_id})
    state.close(record.span_id)
    operation = attrs.get(c.OPERATION)
    if operation is None and facts is not None:
        operation = ROLE_OPERATION.get(facts.role)
    tool = facts is not None and facts.role == TOOL
    if tool and not opened.tool_started:  # recognised only now: a late start
        assert facts is not None
        events += emit_or_hold(
            state,
            run,
            record.parent_span_id,
            ev.TOOL_STARTED,
            record.start_ns,
            tool_fields(record, facts),
            opened.owner,
        )
    if node is None:
        # no enclosing node known: keep the facts for it (an ancestor may be recognised
        # later as a node)
        to_parent(state, run, record, operation, facts, opened)
    else:
        summarise(node, record, operation, facts)
        if opened.summary or opened.children:  # what waited under it before its node was known
            merge(node, opened)
        waiting = state.orphans.pop(record.span_id, None) if state.orphans else None
        if waiting is not None:
            merge(node, waiting)
    if tool:
        events += emit_or_hold(
            state,
            run,
            record.parent_span_id,
            ev.TOOL_COMPLETED,
            record.end_ns or record.start_ns,
            tool_completed_fields(record, facts),
            opened.owner,
        )
    if not run.active and not run.span_ids:  # a tentative trace with nothing open: over
        state.forget_run(run.trace_id)
    return events
