"""SpanRecord: the one shape the mapping reads, whatever the span came from.

The live path converts an SDK span (on the event loop, never on the agent's thread);
the store and the OTLP receiver build the same record from their own rows and messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode


@dataclass(slots=True, eq=False)
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
    # empty by default without a new list per record (the live path makes two records
    # per span and most spans have neither events nor links): never mutated
    events: Sequence[dict[str, Any]] = ()
    links: Sequence[dict[str, Any]] = ()
    resource: Mapping[str, Any] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        """Field by field, events and links by content (a tuple or a list alike)."""
        if not isinstance(other, SpanRecord):
            return NotImplemented
        return (
            self.trace_id,
            self.span_id,
            self.parent_span_id,
            self.name,
            self.start_ns,
            self.end_ns,
            self.attributes,
            self.status,
            self.status_message,
            self.kind,
            list(self.events),
            list(self.links),
            self.resource,
        ) == (
            other.trace_id,
            other.span_id,
            other.parent_span_id,
            other.name,
            other.start_ns,
            other.end_ns,
            other.attributes,
            other.status,
            other.status_message,
            other.kind,
            list(other.events),
            list(other.links),
            other.resource,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq is

    def at_start(self) -> SpanRecord:
        """What a live processor reads at this span's start (see :func:`from_sdk_span`):
        the ids, name, start time and attributes; no end, status, events or links."""
        return SpanRecord(
            self.trace_id,
            self.span_id,
            self.parent_span_id,
            self.name,
            self.start_ns,
            None,
            self.attributes,
            "unset",
            "",
            self.kind,
            (),
            (),
            self.resource,
        )  # (all given: no new dict for the resource)

    @property
    def duration_ms(self) -> float:
        if self.end_ns is None:
            return 0.0
        return to_ms(self.end_ns - self.start_ns)


def to_ms(ns: int) -> float:
    """Nanoseconds as milliseconds to the microsecond (half a microsecond rounds up): an
    event's ``ts`` and every ``duration_ms``. Integer arithmetic, then one division: the
    nearest float to the exact value, and a tenth of ``round(ns / 1e6, 3)``'s cost (that
    one also rounds the float error of ``ns / 1e6``)."""
    return (ns + 500) // 1000 / 1000


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
