"""The receiver's settle window: which received spans wait, and which go at once.

Exporters race (one request per span, sent concurrently: the Node.js SDK's
``SimpleSpanProcessor``), so a span may reach the relay before its parent, and a run's
root before its last children. Spans of a trace therefore wait in a :class:`Window`
(``settle_s`` from the first one's arrival; a run root's window is extended by each span
that follows it, up to ``ROOT_WINDOWS`` windows) and are mapped together in the order they
ran. But only what must wait does (:func:`can_go`): a window whose every span hangs from
a span the mapping already knows goes out the moment it is complete, so an exporter that
sends in order (a span after its parent's start: start markers, Logfire's pending spans)
is streamed as it arrives.
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


def can_go(state: MappingState, spans: list[SpanRecord]) -> bool:
    """True when these spans (a trace's window) need not wait: none is a run's root (its
    end waits for children still on their way), and each starts a run (a start marker or
    pending span of a root) or hangs from a span the mapping knows: one open in the
    trace's run (or its root), or one these spans bring that hangs so. Then nothing they
    need can still be on its way, and nothing mapped before them is their sibling
    overtaken (an exporter that sends in order sends a parent's start first)."""
    if not spans:
        return False
    trace_id = spans[0].trace_id
    run = state.runs.get(trace_id)
    known: set[str] = set()
    if run is not None:
        if run.root_span_id:
            known.add(run.root_span_id)
        known.update(run.span_ids)
    waiting: list[tuple[str, str | None]] = []
    for record in spans:
        if record.trace_id != trace_id or is_root(record):
            return False
        span_id, parent = announced(record)
        if parent is None:
            if not is_marker(record.attributes):
                return False  # (a root: handled above)
            known.add(span_id)  # a run root's start
            continue
        waiting.append((span_id, parent))
    while waiting:  # parents first: a span's own parent may come in the same window
        rest = [(s, p) for s, p in waiting if p not in known]
        if len(rest) == len(waiting):
            return False
        known.update(s for s, p in waiting if p in known)
        waiting = rest
    return True
