"""The short path for our own node spans (``relay.node.name``) in one of our runs.

Most spans a relay maps are the node spans of its own runs: :func:`node_phase` maps
their start and end without the rule table, the ``Facts`` it reads and the general
path's checks, none of which can change what such a span gives. It is the general path
(:func:`relay.mapping.engine.map_span` -> ``_span_started`` / ``_own_node`` and
``_span_ended``) unrolled for this one case, event for event:
tests/unit/test_own_nodes.py holds every span of the recorded turns and of generated
node trees to the same events with and without it.

Anything it does not cover (a span that carries another identifying attribute, a
tentative or foreign run, a start marker, an end whose start was not seen, a node span
outside our root and nodes in a run our instrumentation spans) returns None, and the
general path maps it.
"""

from __future__ import annotations

from relay.conventions import (
    NODE_NAME,
    NODE_NAMESPACE,
    NODE_STEP,
    NODE_TASK_ID,
    OPERATION,
    START_OF,
    TURN_ID,
)
from relay.events import Event
from relay.mapping.discovery import node_discovered
from relay.mapping.payloads import node_completed, node_started
from relay.mapping.placement import namespace_attr, namespace_from_parents
from relay.mapping.state import MappingState, Open
from relay.mapping.summary import claim
from relay.spans import SpanRecord


def node_phase(state: MappingState, record: SpanRecord, ended: bool) -> list[Event] | None:
    """The events of a start (``ended=False``) or end of one of our node spans in one of
    our runs, or None when the general path must map this phase. The caller has seen
    ``relay.node.name`` in the span's attributes."""
    attrs = record.attributes
    run = state.runs.get(record.trace_id)
    if run is None or run.foreign or not run.active \
            or OPERATION in attrs or START_OF in attrs or TURN_ID in attrs:
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
    if run.instrumented and parent_id != run.root_span_id \
            and (parent is None or not parent.firm):
        return None  # not under our root or nodes: a plain span there (placement.effective)
    opened = Open(run, parent_id, record.name, record.start_ns, node=str(attrs[NODE_NAME]),
                  is_node=True, firm=True)  # firm: nothing under it is a late node
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
    started = node_started(run, span_id, opened, attrs.get(NODE_STEP),
                           attrs.get(NODE_TASK_ID))
    if run.discovery is None:
        return [started]
    return [*node_discovered(run, opened), started]
