"""Span events -> ``custom``: a payload a node sent (its stream writer, a custom callback
event), in the node (docs/events.md, ``custom``).

GraphAgent's instrumentation records it as a ``relay.custom`` event of the node's span
(relay/langgraph/custom_events.py); the live path hands it over with
:meth:`relay.ingest.processor.RelaySpanProcessor.add_event`, the replay reads it from the
stored span, an agent in another process sends it on its span over OTLP. One on a span
inside a node (a tool's, a model call's) is that node's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.mapping.attributes import json_attr
from relay.mapping.placement import emit_or_hold
from relay.mapping.state import MappingState
from relay.spans import SpanRecord


def map_custom_event(
    state: MappingState, record: SpanRecord, event: Mapping[str, Any]
) -> list[Event]:
    """The ``custom`` event for one ``relay.custom`` span event of an open span: its
    ``node`` and ``namespace``, the callback event's ``name`` (``null`` for a stream
    writer's), the payload as ``data`` (``null`` where it is not JSON), the ``span_id``
    that carries it (the node's own, for a GraphAgent: which instance of a node sent it),
    ``truncated`` when it was cut."""
    run = state.run_of(record.trace_id)
    if run is None:
        return []
    attributes = event.get("attributes") or {}
    data, ok = json_attr(attributes, c.CUSTOM_DATA, None)
    name = attributes.get(c.CUSTOM_NAME)
    fields: dict[str, Any] = {
        "node": None,
        "namespace": [],
        "name": name if isinstance(name, str) else None,
        "data": data if ok else None,
        "span_id": record.span_id,
    }
    if attributes.get(c.CUSTOM_TRUNCATED) is True or not ok:
        fields["truncated"] = True
    time_ns = int(event.get("time_ns") or record.start_ns)
    opened = state.spans.get(record.span_id)
    if opened is None or opened.is_node or opened.owner is not None:
        node = opened if opened is None or opened.is_node else opened.owner
        if node is not None:
            fields["node"] = node.node
            fields["namespace"] = list(node.namespace)
        return [run.event(ev.CUSTOM, time_ns, fields)] if run.active else []
    # a span inside a node not settled yet: held (late nodes) until that is known
    return emit_or_hold(state, run, opened.parent, ev.CUSTOM, time_ns, fields)
