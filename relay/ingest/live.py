"""Live SDK spans as the mapping reads them: the processor's drain, once per phase.

:func:`live_record` is what the mapping reads of a span and nothing more, cheaper than the
store's full conversion (:func:`relay.spans.from_sdk_span`), because it runs for every
span start and end on the serving loop:

- the attributes are the SDK's own plain dict (:func:`_attribute_dict`), read through no
  mapping proxy: an ended span's dict itself (it never changes again), a copy of a started
  span's (its thread may still be setting them; ``dict.copy`` is one step under the GIL,
  so the copy is whole);
- ids as hex through ``int.to_bytes().hex()``, and with a :class:`HexIds` (the
  processor's) each id converted once: a trace's id for all its spans, an open span's
  for its own end and its children;
- the status by identity (an enum's hash is Python code); no links, resource or kind (the
  mapping reads none of them); span events converted only when the span has any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import StatusCode

from relay.spans import SpanRecord


class HexIds:
    """The hex of the trace and span ids of live spans, each converted once. A span's
    entry goes with its end; a trace's with the end of a span that has no open parent
    here (a run's root, or a span that outlived it: the answer saved after the run), so
    that the table holds the traces that have spans open. Bounded: a table past
    ``max_entries`` starts over (a span whose end never comes costs an entry until then,
    never more)."""

    __slots__ = ("max_entries", "spans", "traces")

    def __init__(self, max_entries: int = 8192) -> None:
        self.max_entries = max_entries
        self.traces: dict[int, str] = {}
        self.spans: dict[int, str] = {}

    def trace(self, value: int) -> str:
        return self._add(self.traces, value, 16)

    def span(self, value: int) -> str:
        return self._add(self.spans, value, 8)

    def _add(self, table: dict[int, str], value: int, size: int) -> str:
        if len(table) >= self.max_entries:
            table.clear()
        hexed = table[value] = value.to_bytes(size, "big").hex()
        return hexed


def _sdk_span_types() -> frozenset[type]:
    """The SDK's own span classes whose public readers are ``ReadableSpan``'s, properties
    that return the span's underscore fields as they are: ``ReadableSpan`` (what the SDK
    hands ``on_end``: a snapshot over the span's own fields), ``Span`` and the tracer's
    subclass of it. A span of one of these is read through those fields, past a Python
    call per property (ten a phase); any other, through its public readers. Checked by
    tests/ingest/test_live_record.py against the pinned SDK."""
    readers = ("name", "context", "parent", "start_time", "end_time", "status")
    classes: list[type] = [ReadableSpan, Span, *Span.__subclasses__()]
    return frozenset(
        cls for cls in classes if all(getattr(cls, r) is getattr(ReadableSpan, r) for r in readers)
    )


#: read-only, fixed when the module is imported (see :func:`_sdk_span_types`)
_SDK_SPANS = _sdk_span_types()


def live_record(span: ReadableSpan, ended: bool, ids: HexIds | None = None) -> SpanRecord:
    """What the mapping reads of a live SDK span at its start (``ended=False``, also its
    span events) or its end. ``ids``: the reader's id table (see :class:`HexIds`).

    The processor's case (an SDK span, an id table) reads the span's fields; a
    ``SpanContext`` is the tuple ``(trace_id, span_id, ...)``. Any other, through the
    public readers (:func:`_public_record`)."""
    if ids is None or type(span) not in _SDK_SPANS:
        return _public_record(span, ended, ids)
    sdk: Any = span
    inner = getattr(sdk._attributes, "_dict", None)
    if type(inner) is not dict:
        return _public_record(span, ended, ids)
    ctx = sdk._context
    parent = sdk._parent
    spans = ids.spans
    span_int = ctx[1]
    if ended:  # its own end: its entry is no longer needed
        span_id = spans.pop(span_int, None) or span_int.to_bytes(8, "big").hex()
    elif (span_id := spans.get(span_int)) is None:  # (HexIds.span, inlined)
        if len(spans) >= ids.max_entries:
            spans.clear()
        span_id = spans[span_int] = span_int.to_bytes(8, "big").hex()
    record = SpanRecord(
        ids.traces.get(ctx[0]) or ids.trace(ctx[0]),
        span_id,
        None if parent is None else spans.get(parent[1]) or parent[1].to_bytes(8, "big").hex(),
        sdk._name,
        sdk._start_time or 0,
        None,
        inner if ended else inner.copy(),
    )
    if ended:
        if parent is None or parent[1] not in spans:
            ids.traces.pop(ctx[0], None)  # nothing open above it here (see HexIds)
        record.end_ns = sdk._end_time or record.start_ns
        status = sdk._status
        code = status._status_code
        if code is not StatusCode.UNSET:
            record.status = "error" if code is StatusCode.ERROR else "ok"
            record.status_message = status._description or ""
        events = sdk._events  # the SDK's BoundedList: its deque says, without a locked copy
        if events._dq if type(events) is BoundedList else _has_events(span):  # type: ignore[attr-defined]
            record.events = _events_of(span)
    return record


def _public_record(span: ReadableSpan, ended: bool, ids: HexIds | None) -> SpanRecord:
    """:func:`live_record` through the span's public readers."""
    ctx = span.context
    parent = span.parent
    if ids is None:
        trace_id = ctx.trace_id.to_bytes(16, "big").hex()
        span_id = ctx.span_id.to_bytes(8, "big").hex()
        parent_id = parent.span_id.to_bytes(8, "big").hex() if parent else None
    else:
        trace_id = ids.traces.get(ctx.trace_id) or ids.trace(ctx.trace_id)
        if ended:  # its own end: its entry is no longer needed
            span_id = ids.spans.pop(ctx.span_id, None) or ctx.span_id.to_bytes(8, "big").hex()
        else:
            span_id = ids.spans.get(ctx.span_id) or ids.span(ctx.span_id)
        parent_id = (
            (ids.spans.get(parent.span_id) or parent.span_id.to_bytes(8, "big").hex())
            if parent
            else None
        )
        if ended and (parent is None or parent.span_id not in ids.spans):
            ids.traces.pop(ctx.trace_id, None)  # nothing open above it (see HexIds)
    record = SpanRecord(
        trace_id,
        span_id,
        parent_id,
        span.name,
        span.start_time or 0,
        None,
        _attribute_dict(span, ended),
    )
    if ended:
        record.end_ns = span.end_time or span.start_time or 0
        status = span.status
        code = status.status_code
        if code is not StatusCode.UNSET:
            record.status = "error" if code is StatusCode.ERROR else "ok"
            record.status_message = status.description or ""
        if _has_events(span):
            record.events = _events_of(span)
    return record


def _events_of(span: ReadableSpan) -> list[dict[str, Any]]:
    return [
        {"name": e.name, "time_ns": e.timestamp, "attributes": dict(e.attributes or {})}
        for e in span.events
    ]


def _has_events(span: ReadableSpan) -> bool:
    """Whether a span has span events, without ``span.events``' locked copy of them (the
    SDK's ``_events`` is a ``BoundedList`` over a deque, ``_dq``; the public view where it
    is not there)."""
    bounded = getattr(span, "_events", None)
    if bounded is not None:
        try:
            return len(bounded) > 0
        except TypeError:
            pass
    return bool(span.events)


def _attribute_dict(span: ReadableSpan, ended: bool) -> Mapping[str, Any]:
    """A span's attributes as a plain ``dict``: the SDK keeps them in a
    ``BoundedAttributes`` whose ``_dict`` is one (an internal of opentelemetry-sdk,
    pinned by requirements/lock.txt and checked by tests/ingest/test_live_record.py). Each
    read through the public ``span.attributes`` (a mapping proxy over that mapping) costs
    about ten times a dict's; where the internal is not there, the public view it is."""
    bounded = getattr(span, "_attributes", None)
    inner = getattr(bounded, "_dict", None)
    if type(inner) is dict:
        return inner if ended else inner.copy()
    attributes = span.attributes or {}
    return attributes if ended else dict(attributes)
