"""Spans that stand for another span's start: our start markers and Logfire's pending spans.

OTLP carries a span once, when it ends. Two kinds of span announce a span's start
instead, each a zero-length child of the span it announces, exported at once:

- our **start marker** (docs/events.md, "Start markers"): ``relay.start_of`` (the span's
  id), ``relay.start.parent`` (its parent's), ``relay.start.attributes`` (its start
  attributes as one JSON object), named ``relay.start {name}``; it may also be a sibling
  of its span;
- **Logfire's pending span**: ``logfire.span_type = "pending_span"``, the span's own name
  and start attributes, ``logfire.pending_parent_id`` (its parent's id, 16 hex; all
  zeros for a root), and as its own parent the span it announces.

:func:`started_span` is the start such a span stands for (the mapping maps it as that
span's start; the span's own start then yields nothing); :func:`announced` is which span
any received span speaks for, and under which parent (the receiver's settle window asks
whether that parent is known). Pure functions.
"""

from __future__ import annotations

from typing import Any

from relay import conventions as c
from relay.json_depth import loads as json_loads
from relay.mapping.foreign_attributes import LF_PENDING, LF_PENDING_PARENT, LF_SPAN_TYPE
from relay.spans import SpanRecord

_NO_PARENT = "0000000000000000"


def is_pending(attrs: Any) -> bool:
    """Logfire's pending span: the start of its parent span."""
    return attrs.get(LF_SPAN_TYPE) == LF_PENDING


def is_marker(attrs: Any) -> bool:
    """A span that stands for another span's start (ours or Logfire's)."""
    return c.START_OF in attrs or attrs.get(LF_SPAN_TYPE) == LF_PENDING


def marker_attributes(record: SpanRecord) -> dict[str, Any] | None:
    """The start attributes a start marker (``relay.start_of``) carries for its span, or
    a pending span's own (less Logfire's two pending keys); None when cut or malformed."""
    attrs = record.attributes
    if c.START_OF not in attrs and is_pending(attrs):
        return {k: v for k, v in attrs.items() if k not in (LF_SPAN_TYPE, LF_PENDING_PARENT)}
    raw = attrs.get(c.START_ATTRIBUTES, "{}")
    try:
        value = json_loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def announced(record: SpanRecord) -> tuple[str, str | None]:
    """(the span this one speaks for, that span's parent): a marker's or a pending span's
    span, else the span itself. The id is '' for a marker that names no span."""
    attrs = record.attributes
    if c.START_OF in attrs:
        span_id = str(attrs[c.START_OF]).lower()
        parent = attrs.get(c.START_PARENT)
        if not parent and record.parent_span_id != span_id:
            parent = record.parent_span_id
        return span_id, str(parent).lower() if parent else None
    if is_pending(attrs):
        parent = str(attrs.get(LF_PENDING_PARENT) or "").lower()
        return record.parent_span_id or "", parent if parent and parent != _NO_PARENT else None
    return record.span_id, record.parent_span_id


def started_span(marker: SpanRecord) -> SpanRecord | None:
    """The start of the span a start marker or a pending span names, as that span's own
    start would read; None when the marker is cut or malformed."""
    attributes = marker_attributes(marker)
    span_id, parent = announced(marker)
    if attributes is None or len(span_id) != 16:
        return None
    name = (
        marker.name.removeprefix(c.START_PREFIX) if c.START_OF in marker.attributes else marker.name
    )
    return SpanRecord(
        trace_id=marker.trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_ns=marker.start_ns,
        end_ns=None,
        attributes=attributes,
    )
