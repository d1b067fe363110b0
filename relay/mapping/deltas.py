"""Span events -> ``text_delta``: a model call's text as it is written (and ``custom``,
:mod:`relay.mapping.custom`).

A processor never sees ``add_event``; the live path hands a ``gen_ai.content.delta``
event over with :meth:`relay.ingest.processor.RelaySpanProcessor.add_event`, the replay
reads it from the stored span. Either way it arrives here, on the state the engine keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.mapping.custom import map_custom_event
from relay.mapping.placement import emit_or_hold
from relay.mapping.state import MappingState
from relay.spans import SpanRecord


def map_span_event(
    state: MappingState, record: SpanRecord, event: Mapping[str, Any]
) -> list[Event]:
    """The events for one span event (``{name, time_ns, attributes}``) of an open span.

    A ``gen_ai.content.delta`` event on a model-call span is a ``text_delta``: the chunk,
    the message it belongs to (one per model call unless the event names one), and the
    node the call runs in. A processor never sees ``add_event``; the live path hands the
    event over with :meth:`relay.ingest.processor.RelaySpanProcessor.add_event`, the
    replay reads it from the stored span. A ``relay.custom`` event is a ``custom``
    (:mod:`relay.mapping.custom`)."""
    name = event.get("name")
    if name == c.CUSTOM_EVENT:
        return map_custom_event(state, record, event)
    if name != c.DELTA_EVENT:
        return []
    run = state.run_of(record.trace_id)
    attributes = event.get("attributes") or {}
    text = attributes.get(c.DELTA_TEXT)
    if run is None or not isinstance(text, str) or not text:
        return []
    opened = state.spans.get(record.span_id)
    time_ns = int(event.get("time_ns") or record.start_ns)
    fields = {
        "message_id": str(attributes.get(c.DELTA_MESSAGE_ID) or f"msg_{record.span_id}"),
        "delta": text,
        "node": None,
        "span_id": record.span_id,
    }
    if opened is None or opened.is_node or opened.owner is not None:
        node = opened if opened is None or opened.is_node else opened.owner
        fields["node"] = node.node if node is not None else None
        return [run.event(ev.TEXT_DELTA, time_ns, fields)] if run.active else []
    # the model call's node; held (late nodes) until that is known
    return emit_or_hold(state, run, opened.parent, ev.TEXT_DELTA, time_ns, fields)
