"""What the replay's orderer (:class:`relay.mapping.stream_order.PhaseOrderer`) may ask
about the spans of a turn it has not read yet: the store answers from the snapshot it
reads (:class:`relay.store.reading.SpanStream`), :class:`ListLookups` from a list in
memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from relay.mapping.order import coarse_traces
from relay.spans import SpanRecord


class SpanLookups(Protocol):
    """What the orderer may ask about the spans it has not read yet (the store answers from
    the same snapshot it reads; :class:`ListLookups` from a list in memory)."""

    def coarse(self, trace_id: str) -> bool:
        """True when every span of the trace starts on a whole millisecond."""
        ...

    def has_span(self, trace_id: str, span_id: str) -> bool:
        """True when the turn holds this span (read or not)."""
        ...


class ListLookups:
    """:class:`SpanLookups` over a whole list in memory."""

    def __init__(self, records: Sequence[SpanRecord]) -> None:
        self._coarse = coarse_traces(list(records))
        self._ids = {(r.trace_id, r.span_id) for r in records}

    def coarse(self, trace_id: str) -> bool:
        return trace_id in self._coarse

    def has_span(self, trace_id: str, span_id: str) -> bool:
        return (trace_id, span_id) in self._ids


def lookups_of(records: Sequence[SpanRecord]) -> ListLookups:
    return ListLookups(records)
