"""SpanRecord: the one shape the mapping reads, whatever the span came from.

The live path converts an SDK span (on the event loop, never on the agent's thread);
the store and the OTLP receiver build the same record from their own rows and messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode


@dataclass(slots=True)
class SpanRecord:
    trace_id: str  # 32 lowercase hex
    span_id: str  # 16 lowercase hex
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int | None  # None while the span runs
    attributes: Mapping[str, Any]
    status: str = "unset"  # unset | ok | error
    status_message: str = ""
    kind: str = "internal"
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    resource: Mapping[str, Any] = field(default_factory=dict)

    def at_start(self) -> SpanRecord:
        """What a live processor reads at this span's start (see :func:`from_sdk_span`):
        the ids, name, start time and attributes; no end, status, events or links."""
        return SpanRecord(self.trace_id, self.span_id, self.parent_span_id, self.name,
                          self.start_ns, None, self.attributes)

    @property
    def duration_ms(self) -> float:
        if self.end_ns is None:
            return 0.0
        return round((self.end_ns - self.start_ns) / 1e6, 3)


_STATUS = {StatusCode.UNSET: "unset", StatusCode.OK: "ok", StatusCode.ERROR: "error"}


def from_sdk_span(span: ReadableSpan, ended: bool) -> SpanRecord:
    """A record of a live SDK span. At start only the start-time facts are read."""
    ctx = span.context
    parent = span.parent
    attributes = dict(span.attributes or {})
    if not ended:
        return SpanRecord(
            trace_id=format(ctx.trace_id, "032x"),
            span_id=format(ctx.span_id, "016x"),
            parent_span_id=format(parent.span_id, "016x") if parent else None,
            name=span.name,
            start_ns=span.start_time or 0,
            end_ns=None,
            attributes=attributes,
        )
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent else None,
        name=span.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or span.start_time or 0,
        attributes=attributes,
        status=_STATUS.get(span.status.status_code, "unset"),
        status_message=span.status.description or "",
        kind=span.kind.name.lower(),
        events=[
            {"name": e.name, "time_ns": e.timestamp, "attributes": dict(e.attributes or {})}
            for e in span.events
        ],
        links=[
            {
                "trace_id": format(link.context.trace_id, "032x"),
                "span_id": format(link.context.span_id, "016x"),
                "attributes": dict(link.attributes or {}),
            }
            for link in span.links
        ],
        resource=dict(span.resource.attributes) if span.resource else {},
    )


def live_record(span: ReadableSpan, ended: bool) -> SpanRecord:
    """What the mapping reads of a live SDK span, and nothing more: the processor's drain.

    Cheaper than :func:`from_sdk_span` (which the store keeps using): an ended span's
    attributes are its own read-only view, not a copy (it never changes again; a started
    span's are copied, since its thread may still be setting them), and no links,
    resource or kind (the mapping reads none of them). Span events are converted only
    when the span has any.
    """
    ctx = span.context
    parent = span.parent
    attributes = span.attributes or {}
    if not ended:  # the agent's thread may still be setting attributes: a copy
        attributes = dict(attributes)
    record = SpanRecord(format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"),
                        format(parent.span_id, "016x") if parent else None,
                        span.name, span.start_time or 0, None, attributes)
    if ended:
        record.end_ns = span.end_time or span.start_time or 0
        status = span.status
        record.status = _STATUS.get(status.status_code, "unset")
        record.status_message = status.description or ""
        events = span.events
        if events:
            record.events = [{"name": e.name, "time_ns": e.timestamp,
                              "attributes": dict(e.attributes or {})} for e in events]
    return record
