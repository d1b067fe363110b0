"""The receiver's settle window: which received spans wait, and which go at once.

Exporters race (one request per span, sent concurrently: the Node.js SDK's
``SimpleSpanProcessor``), so a span may reach the relay before its parent, and a run's
root before its last children. Spans of a trace therefore wait in a :class:`Window`
(``settle_s`` from the first one's arrival; a run root's window is extended by each span
that follows it, up to ``ROOT_WINDOWS`` windows) and are mapped together in the order they
ran. But only what must wait does (:func:`ready`): a span that hangs from a span the
mapping already knows goes out at once, and a span that waits for its parent goes the
moment the parent comes; so an exporter that sends in order (a span after its parent's
start: start markers, Logfire's pending spans) is streamed as it sends.
"""

from __future__ import annotations

import asyncio
import dataclasses

from relay import conventions as c
from relay.mapping import MappingState
from relay.mapping.markers import announced, is_marker
from relay.spans import SpanRecord

#: once a run's root has come, each later span of its trace extends the window, up to
#: this many windows after the root (children racing their root come in a burst)
ROOT_WINDOWS = 4


@dataclasses.dataclass(slots=True)
class Window:
    """Spans of one trace waiting out the settle window."""

    deadline: float
    spans: list[SpanRecord] = dataclasses.field(default_factory=list)
    expected: int | None = None  # the root's relay.run.span_count
    root_at: float | None = None  # when the run's root arrived
    timer: asyncio.TimerHandle | None = None


def is_root(record: SpanRecord) -> bool:
    """A run's root (its end: the run ends there), as the window sees it."""
    return (record.parent_span_id is None or c.TURN_ID in record.attributes) and not is_marker(
        record.attributes
    )


def ready(state: MappingState, spans: list[SpanRecord]) -> list[SpanRecord]:
    """The spans of a trace's window that need not wait (in the order given): each starts
    a run (a start marker or pending span of a run root) or hangs from a span the mapping
    knows: one open in the trace's run (or its root), or one of these spans that hangs
    so. Nothing they need can still be on their way, and an exporter that sends in order
    sends a parent's start first. A run root (its end) is never ready: the run ends there,
    and children may still be on their way; nor is a span under a parent not known yet."""
    if not spans:
        return []
    trace_id = spans[0].trace_id
    run = state.runs.get(trace_id)
    known: set[str] = set()
    if run is not None:
        if run.root_span_id:
            known.add(run.root_span_id)
        known.update(run.span_ids)
    waiting: list[tuple[int, str, str]] = []
    go: set[int] = set()
    for i, record in enumerate(spans):
        if record.trace_id != trace_id or is_root(record):
            continue
        span_id, parent = announced(record)
        if parent is not None:
            waiting.append((i, span_id, parent))
        elif is_marker(record.attributes):  # a run root's start
            known.add(span_id)
            go.add(i)
    while waiting:  # parents first: a span's parent may be among these spans
        rest = [w for w in waiting if w[2] not in known]
        if len(rest) == len(waiting):
            break
        for i, span_id, parent in waiting:
            if parent in known:
                known.add(span_id)
                go.add(i)
        waiting = rest
    return [record for i, record in enumerate(spans) if i in go]
