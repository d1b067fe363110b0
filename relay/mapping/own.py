"""The short paths for our own spans in one of our runs: node spans (``relay.node.name``)
and the GenAI spans inside our nodes (a model call, a retrieval, a guardrail, a tool).

Most spans a relay maps are of these two kinds: :func:`node_phase` and
:func:`child_phase` map their start and end without the rule table, the ``Facts`` it
reads and the general path's checks, none of which can change what such a span gives.
They are the general path (:func:`relay.mapping.engine.map_span` -> ``_span_started``
/ ``_own_node`` and ``_span_ended``) unrolled for these cases, event for event:
tests/mapping/test_own_nodes.py holds every span of the recorded turns and of generated
span trees to the same events with and without them. :func:`child_leaf` is
:func:`child_phase`'s start and end in one, for a replay's ``LEAF`` phase (the same
tests hold it to the two).

Anything they do not cover (a span that carries another identifying attribute, a
tentative or foreign run, a start marker, an end whose start was not seen, a span
outside our root and nodes in a run our instrumentation spans, a GenAI span that is not
inside one of our nodes) returns None, and the general path maps it.
"""

from __future__ import annotations

from relay import events as ev
from relay.conventions import (
    NODE_NAME,
    NODE_NAMESPACE,
    NODE_STEP,
    NODE_TASK_ID,
    OP_CHAT,
    OP_GUARDRAIL,
    OP_RETRIEVAL,
    OP_TOOL,
    OPERATION,
    START_OF,
    TOOL_CALL_ID,
    TOOL_NAME,
    TURN_ID,
)
from relay.events import Event
from relay.mapping.attributes import suffix
from relay.mapping.discovery import node_discovered
from relay.mapping.facts import TOOL, Facts
from relay.mapping.foreign_attributes import LF_SPAN_TYPE, OI_KIND, TL_ASSOC, TL_KIND
from relay.mapping.payloads import node_completed, node_started, tool_completed_fields, tool_fields
from relay.mapping.placement import namespace_attr, namespace_from_parents
from relay.mapping.state import MappingState, Open, Run
from relay.mapping.summary import claim, merge, summarise
from relay.spans import SpanRecord


def node_phase(state: MappingState, record: SpanRecord, ended: bool) -> list[Event] | None:
    """The events of a start (``ended=False``) or end of one of our node spans in one of
    our runs, or None when the general path must map this phase. The caller has seen
    ``relay.node.name`` in the span's attributes."""
    attrs = record.attributes
    run = state.runs.get(record.trace_id)
    if (
        run is None
        or run.foreign
        or not run.active
        or OPERATION in attrs
        or START_OF in attrs
        or TURN_ID in attrs
    ):
        return None
    span_id = record.span_id
    if ended:
        opened = state.spans.get(span_id)
        if opened is None or not opened.is_node:
            return None
        del state.spans[span_id]  # state.close, inlined
        opened.run.span_ids.discard(span_id)
        if state.orphans:
            claim(state, span_id, opened)
        return [node_completed(run, record, opened)]
    if span_id in state.spans:
        return []  # its start marker came first
    parent_id = record.parent_span_id
    parent = state.spans.get(parent_id or "")
    if run.instrumented and parent_id != run.root_span_id and (parent is None or not parent.firm):
        return None  # not under our root or nodes: a plain span there (placement.effective)
    # (by position, which a dataclass's __init__ takes faster than keywords: run, parent,
    # name, start_ns, node, is_node, maybe_node, firm; firm: nothing under it is a late node)
    opened = Open(
        run, parent_id, record.name, record.start_ns, str(attrs[NODE_NAME]), True, False, True
    )
    if parent is not None and parent.firm:
        opened.owner = parent if parent.is_node else parent.owner
    state.spans[span_id] = opened
    run.span_ids.add(span_id)
    namespace = namespace_attr(attrs) if NODE_NAMESPACE in attrs else None
    if namespace is None and parent is not None:  # else at the top (under the root)
        namespace = namespace_from_parents(state, run, parent_id)
    if namespace:
        opened.namespace = namespace
    if state.orphans:
        claim(state, span_id, opened)
    started = node_started(run, span_id, opened, attrs.get(NODE_STEP), attrs.get(NODE_TASK_ID))
    if run.discovery is None:
        return [started]
    return [*node_discovered(run, opened), started]


#: the operations of the GenAI spans :func:`child_phase` maps (their rows in the table
#: read nothing but ``gen_ai.operation.name`` and, for a tool, its name and call id)
CHILD_OPERATIONS = frozenset({OP_CHAT, OP_RETRIEVAL, OP_GUARDRAIL, OP_TOOL})
_TOOL_NODE = TL_ASSOC + "langgraph_node"  # (a tool's facts read it: the general path's)
#: attributes that make a GenAI span something else: a node, a start marker, a root, or
#: a span another instrumentation's rule reads, or Logfire's (maybe a pending span: a
#: start marker) (one C call checks them all)
_NOT_A_CHILD = frozenset({NODE_NAME, START_OF, TURN_ID, TL_KIND, OI_KIND, LF_SPAN_TYPE})


def _child_run(state: MappingState, record: SpanRecord, operation: str) -> Run | None:
    """The run a GenAI span (``operation``) maps in on the short path: one of our active
    runs, and nothing on the span that makes it something else; else None."""
    attrs = record.attributes
    run = state.runs.get(record.trace_id)
    if (
        run is None
        or run.foreign
        or not run.active
        or run.turn_id is None
        or not _NOT_A_CHILD.isdisjoint(attrs)
        or (operation == OP_TOOL and _TOOL_NODE in attrs)
    ):
        return None
    return run


def child_phase(
    state: MappingState, record: SpanRecord, ended: bool, operation: str
) -> list[Event] | None:
    """The events of a start or end of a GenAI span (``operation``, one of
    :data:`CHILD_OPERATIONS`) inside one of our nodes in one of our runs, or None when
    the general path must map this phase: the span's facts go to the node's summary at
    its end, and a tool gives ``tool_started`` and ``tool_completed``."""
    run = _child_run(state, record, operation)
    if run is None:
        return None
    span_id = record.span_id
    parent_id = record.parent_span_id
    parent = state.spans.get(parent_id or "")
    if not ended:
        if span_id in state.spans:
            return []  # its start marker came first
        if parent is None or not parent.firm:
            return None
        owner = parent if parent.is_node else parent.owner
        if owner is None:
            return None
        # (by position: run, parent, name, start_ns, node, is_node, maybe_node, firm, owner)
        opened = Open(run, parent_id, record.name, record.start_ns, None, False, False, True, owner)
        state.spans[span_id] = opened  # state.open, inlined
        run.span_ids.add(span_id)
        if operation != OP_TOOL:
            return []
        opened.tool_started = True
        return [_tool_started(run, record, owner)]
    ending = state.spans.get(span_id)
    if (
        ending is None
        or ending.is_node
        or not ending.firm
        or ending.maybe_node
        or ending.owner is None
        or (operation == OP_TOOL and not ending.tool_started)
    ):
        return None
    if run.instrumented and parent_id != run.root_span_id and (parent is None or not parent.firm):
        return None  # not under our root or nodes: a plain span there (placement.effective)
    del state.spans[span_id]  # state.close, inlined
    ending.run.span_ids.discard(span_id)
    owner = ending.owner
    summarise(owner, record, operation)  # (ours: read from its attributes, no facts)
    if ending.summary or ending.children:  # what ended under it
        merge(owner, ending)
    if state.orphans:
        _merge_waiting(state, span_id, owner)
    if operation != OP_TOOL:
        return []
    return [_tool_completed(run, record, owner)]


def child_leaf(state: MappingState, record: SpanRecord, operation: str) -> list[Event] | None:
    """:func:`child_phase` of a span's start and then of its end, nothing mapped in between
    (a ``LEAF`` phase), in one: the checks of the end hold for what the start opened (a
    fresh, firm child of a firm parent, with nothing under it), so the span is never
    opened. None (nothing changed) when the start is not on the short path."""
    run = _child_run(state, record, operation)
    if run is None:
        return None
    span_id = record.span_id
    if span_id in state.spans:
        return None  # its start marker came first
    parent = state.spans.get(record.parent_span_id or "")
    if parent is None or not parent.firm:
        return None
    owner = parent if parent.is_node else parent.owner
    if owner is None:
        return None
    summarise(owner, record, operation)
    if state.orphans:
        _merge_waiting(state, span_id, owner)
    if operation != OP_TOOL:
        return []
    return [_tool_started(run, record, owner), _tool_completed(run, record, owner)]


def _merge_waiting(state: MappingState, span_id: str, owner: Open) -> None:
    """What ended under the span before its end was mapped (facts that waited under its
    id) goes to its node, as the span's own facts do."""
    waiting = state.orphans.pop(span_id, None)
    if waiting is not None:
        merge(owner, waiting)


def _tool_started(run: Run, record: SpanRecord, owner: Open) -> Event:
    fields = tool_fields(record, _tool_facts(record))
    fields["node"] = owner.node
    return run.event(ev.TOOL_STARTED, record.start_ns, fields)


def _tool_completed(run: Run, record: SpanRecord, owner: Open) -> Event:
    fields = tool_completed_fields(record, None)
    fields["node"] = owner.node
    return run.event(ev.TOOL_COMPLETED, record.end_ns or record.start_ns, fields)


def _tool_facts(record: SpanRecord) -> Facts:
    """A GenAI tool span's facts, as its row in the table reads them."""
    attrs = record.attributes
    return Facts(
        TOOL,
        "genai",
        name=str(attrs[TOOL_NAME] if TOOL_NAME in attrs else suffix(record.name)),
        call_id=attrs.get(TOOL_CALL_ID),
    )
