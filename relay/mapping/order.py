"""The order of span phases: every span's start, span events and end, as the live
processor saw them (docs/events.md, "Replay").

Phases sorted by their time (start time for a start, end time for an end); at equal
times, ends before starts, a child's end before its parent's, a parent's start before its
child's, and a zero-duration span's start right before its end. The live processor sees
the same order because the SDK stamps a span's time just before it calls the processor.

:func:`ordered_phases` orders a whole list at once: it is the reference.
:mod:`relay.mapping.stream_order` gives the same order from spans read in start order,
phase by phase as they become final; it reuses the pieces here (:func:`depth_of`,
:func:`order_group`, :func:`step_of`).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from relay import conventions as c
from relay.mapping.foreign_attributes import placement
from relay.spans import SpanRecord

#: how far a child's end may pass its parent's and still count as nested (time cut to
#: microseconds, as Jaeger's UI JSON does, moves an end back by up to 2 us)
NESTING_SLACK_NS = 2_000
#: a whole-millisecond start may lie anywhere in its millisecond (:func:`coarse_traces`)
MS_SLACK_NS = 999_999

START = "start"
EVENT = "event"
END = "end"
#: a span's start and its end right after it, nothing in between: one phase, which only
#: a replay's orderer gives (:class:`relay.mapping.stream_order.PhaseOrderer` with
#: ``leaves``), mapped as the two (:func:`relay.mapping.feed.feed`)
LEAF = "leaf"
#: (span, kind, the span event for an EVENT phase): what the live processor handed over
Phase = tuple[SpanRecord, str, dict[str, Any] | None]
Key = tuple[int, int, int]  # (span index, 0 start / 1 event / 2 end, event index)


# -- the whole list at once (the reference) -----------------------------------------


def ordered_phases(records: Sequence[SpanRecord]) -> list[Phase]:
    """Every span's start, span events and end, in the order the live processor saw them."""
    spans = sorted(records, key=lambda r: (r.start_ns, r.trace_id, r.span_id))
    index = {(r.trace_id, r.span_id): i for i, r in enumerate(spans)}
    parent = [index.get((r.trace_id, r.parent_span_id or "")) for r in spans]
    depth = [depth_of(i, parent) for i in range(len(spans))]
    coarse = coarse_traces(spans)
    starts = [r.start_ns + MS_SLACK_NS if r.trace_id in coarse else r.start_ns for r in spans]
    ends = nested_ends(spans, parent, depth, starts, coarse)
    groups: dict[int, list[Key]] = {}
    for i, r in enumerate(spans):
        groups.setdefault(starts[i], []).append((i, 0, 0))
        end = ends[i]
        for k, event in enumerate(r.events):  # within the span's life, as live
            t = max(int(event.get("time_ns") or r.start_ns), r.start_ns)
            groups.setdefault(t if end is None else min(t, end), []).append((i, 1, k))
        if end is not None:
            groups.setdefault(end, []).append((i, 2, 0))
    phases: list[Phase] = []
    for t in sorted(groups):
        for i, kind, k in order_group(groups[t], spans, parent, depth):
            record = spans[i]
            if kind == 1:
                phases.append((record, EVENT, record.events[k]))
            else:
                phases.append((record, END if kind == 2 else START, None))
    return phases


def coarse_traces(spans: list[SpanRecord]) -> set[str]:
    """Traces whose every start is a whole millisecond: the OpenTelemetry JS SDK stamps
    starts with ``Date.now()`` and ends from a finer clock. Such a span began somewhere in
    its start's millisecond, after whatever ended in it: for ordering, its start is taken
    at that millisecond's end (an end precedes a start at the same instant)."""
    fine: set[str] = set()
    traces: set[str] = set()
    for r in spans:
        traces.add(r.trace_id)
        if r.start_ns % 1_000_000:
            fine.add(r.trace_id)
    return traces - fine


def step_of(record: SpanRecord) -> int:
    """A node's step, where its span says one (ours, OpenLLMetry's, OpenInference's
    LangGraph metadata): of spans that start at one instant, the earlier step ran first."""
    step = record.attributes.get(c.NODE_STEP)
    if step is None:
        where = placement(record.attributes)  # the rule table's LangGraph metadata reader
        step = where.step if where is not None else None
    return step if isinstance(step, int) and not isinstance(step, bool) else 1 << 62


def nested_ends(
    spans: list[SpanRecord],
    parent: list[int | None],
    depth: list[int],
    starts: list[int],
    coarse: set[str],
) -> list[int | None]:
    """End times for ordering: never before the span's start (for ordering); a child that
    ends at most NESTING_SLACK_NS after its parent (microsecond times cut separately, as
    in Jaeger's JSON) is taken to end with it; and in a ``coarse`` trace (the JS SDK's
    clock, :func:`coarse_traces`) a parent ends no earlier than its children."""
    ends: list[int | None] = [
        None if r.end_ns is None else max(r.end_ns, starts[i]) for i, r in enumerate(spans)
    ]
    by_depth = sorted(range(len(spans)), key=lambda k: depth[k])
    for i in by_depth:
        p = parent[i]
        end = ends[i]
        parent_end = ends[p] if p is not None else None
        if end is not None and parent_end is not None and 0 < end - parent_end <= NESTING_SLACK_NS:
            ends[i] = max(parent_end, starts[i])
    for i in reversed(by_depth) if coarse else ():  # deepest first
        p = parent[i]
        end = ends[i]
        if (
            p is not None
            and end is not None
            and ends[p] is not None
            and spans[i].trace_id in coarse
        ):
            ends[p] = max(ends[p] or 0, end)
    return ends


def depth_of(i: int, parent: list[int | None]) -> int:
    depth = 0
    seen = {i}
    p = parent[i]
    while p is not None and p not in seen:
        seen.add(p)
        depth += 1
        p = parent[p]
    return depth


def order_group(
    group: list[Key], spans: list[SpanRecord], parent: list[int | None], depth: list[int]
) -> list[Key]:
    """Phases at one instant: a topological order of the nesting, ends first."""
    if len(group) == 1:
        return group
    members = set(group)
    after: dict[Key, list[Key]] = {p: [] for p in group}
    waiting = dict.fromkeys(group, 0)

    def edge(first: Key, then: Key) -> None:
        if first in members:
            after[first].append(then)
            waiting[then] += 1

    for phase in group:
        i, kind, k = phase
        p = parent[i]
        if kind == 0:
            if p is not None:
                edge((p, 0, 0), phase)  # a parent starts before its child
        elif kind == 1:
            edge((i, 0, 0), phase)  # a span's events come after its start
            edge((i, 1, k - 1), phase)  # and in their order
        else:
            edge((i, 0, 0), phase)  # a zero-duration span: start, then end
            for other in group:
                if other[0] == i and other[1] == 1:
                    edge(other, phase)  # its events before its end
            if p is not None and (p, 2, 0) in members:
                edge(phase, (p, 2, 0))  # a child ends before its parent

    def priority(phase: Key) -> tuple[Any, ...]:
        i, kind, k = phase
        if kind == 2:
            return (0, -depth[i], i)  # ends first, deepest first
        if kind == 1:
            return (1, i, k)  # then span events
        end = spans[i].end_ns
        zero = end is not None and end <= spans[i].start_ns
        # then starts, shallowest first; of siblings that start at one instant, the one
        # that ends first (one after the other at a coarse clock: it ran first)
        return (2, 0 if zero else 1, depth[i], step_of(spans[i]), end or 0, i)

    ready = [(priority(p), p) for p in group if waiting[p] == 0]
    heapq.heapify(ready)
    out: list[Key] = []
    while ready:
        _, phase = heapq.heappop(ready)
        out.append(phase)
        for then in after[phase]:
            waiting[then] -= 1
            if waiting[then] == 0:
                heapq.heappush(ready, (priority(then), then))
    if len(out) < len(group):  # a cycle (malformed parents): the rest by priority
        done = set(out)
        out += sorted((p for p in group if p not in done), key=priority)
    return out
