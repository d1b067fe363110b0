"""The replay order, phase by phase, from spans read in start order.

:func:`relay.mapping.order.ordered_phases` orders a whole list: it needs every span
before it can give the first phase. :class:`PhaseOrderer` gives exactly the same order
(the tests hold it to the reference on generated span trees and on recorded turns) from
spans that arrive in chunks sorted by ``start_ns``, releasing each phase once nothing
still unread can come before it or change where it goes.

Why that is possible: every phase of a span lies at or after the span's start (its
events and its end are clamped to it), so once a span starting at ``S`` has been read,
no unread span has a phase before ``S``. What else the order of a phase depends on, and
when it is final:

- the span's index (the tie-break of last resort): its rank by (start, trace, span id).
  Spans that start at one instant are taken together, once a later start is read;
- its parent and its depth (ties at one instant: parents first, ends deepest first): final
  once every ancestor has been read. A parent that is not read yet may still come (a
  child that starts before its parent) or never (a span whose parent lies outside the
  turn): :class:`SpanLookups` ``has_span`` tells which, so such a span waits only for a
  parent that exists; without lookups it waits until the end;
- the coarse clock of a trace (every start a whole millisecond, the JS SDK): ``coarse``
  says it up front (the store asks SQL; without lookups a trace is coarse until one fine
  start is read). In a coarse trace a parent ends no earlier than any descendant, which
  only the whole trace tells: there, starts are released as they come and span events
  and ends are held until the last span is read.

A phase is released when its time is before the frontier: the first unread start, the
earliest start of a span that is still waiting, and the earliest held phase.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from relay.mapping.lookups import SpanLookups
from relay.mapping.order import (
    END,
    EVENT,
    LEAF,
    MS_SLACK_NS,
    NESTING_SLACK_NS,
    START,
    Phase,
    depth_of,
    order_group,
)
from relay.spans import SpanRecord

_NEVER = 1 << 126  # later than any time


class PhaseOrderer:
    """:meth:`push` chunks of spans in non-decreasing ``start_ns`` (ties in any order), then
    :meth:`finish`; each returns the phases that became final, in the reference order.
    Span ids must be unique within a trace (the store's key). ``leaves``: a span's start
    whose end is the very next phase (alone at both instants) comes as one ``LEAF``
    phase, the two in one (most spans of a turn: a model call, a retrieval, a tool)."""

    def __init__(self, lookups: SpanLookups | None = None, *, leaves: bool = False) -> None:
        self.lookups = lookups
        self.leaves = leaves
        # per span, by index (the rank by start, trace, span id), as order_group reads them
        self.spans: list[SpanRecord] = []
        self.parent: list[int | None] = []
        self.depth: list[int] = []  # -1 until known
        self._index: dict[str, dict[str, int]] = {}  # trace id -> span id -> index
        self._ends: dict[int, int | None] = {}  # nested ends (relay.mapping.order.nested_ends)
        self._unknown: set[int] = set()  # a parent id not read yet, which may still come
        self._waiting: dict[tuple[str, str], list[int]] = {}
        self._coarse: dict[str, bool] = {}  # final answers
        self._maybe_coarse: set[str] = set()  # no lookups: only whole-ms starts read so far
        self._unsettled: list[int] = []
        self._unsettled_starts: list[tuple[int, int]] = []  # heap, settled ones left lazily
        self._settled: list[bool] = []
        self._held: list[int] = []  # coarse spans: span events and ends wait for the end
        self._held_floor = _NEVER
        self._ready: list[tuple[int, int, int, int]] = []  # heap of (time, span, kind, k)
        #: starts that settle in time order (nearly all: spans are read in start order),
        #: their times and spans in two lists merged with the heap, not pushed and popped
        #: through it (no tuple per start)
        self._start_times: list[int] = []
        self._start_spans: list[int] = []
        self._starts_at = 0  # the first start not released
        self._last_start = -1
        self._group: list[SpanRecord] = []  # read, one start_ns, not indexed yet
        self._done = False

    # -- input ----------------------------------------------------------------------------

    def push(self, records: Iterable[SpanRecord]) -> list[Phase]:
        rows = [*self._group, *records]
        if not rows:
            return []
        starts = [r.start_ns for r in rows]
        last = starts[-1]
        cut = len(rows) - 1  # the spans at the last start wait: more may start then
        while cut and starts[cut - 1] == last:
            cut -= 1
        if starts != sorted(starts):
            raise ValueError("spans must come in start order")
        self._group = rows[cut:]
        if cut:
            del rows[cut:]
            self._admit(rows, starts)
        return self._release(last)  # nothing unread starts before it

    def finish(self) -> list[Phase]:
        """Every phase not released yet: the input is complete."""
        if self._group:
            self._admit(self._group, [r.start_ns for r in self._group])
            self._group = []
        self._done = True
        for children in self._waiting.values():  # parents that never came: none
            for i in children:
                self._unknown.discard(i)
        self._waiting.clear()
        for trace_id in self._maybe_coarse:
            self._coarse[trace_id] = True
        self._maybe_coarse.clear()
        self._settle_waiting()
        self._release_held()
        return self._release(_NEVER)

    # -- spans ----------------------------------------------------------------------------

    def _admit(self, rows: list[SpanRecord], starts: list[int]) -> None:
        """Index spans read in start order, all of them at each start they hold (nothing
        unread starts then); those at one instant in (trace, span id) order."""
        if len(set(starts[: len(rows)])) < len(rows):  # ties: (start, trace, span id)
            rows.sort(key=lambda r: (r.start_ns, r.trace_id, r.span_id))
        spans = self.spans
        parents = self.parent
        index = self._index
        waiting = self._waiting
        lookups = self.lookups
        coarse = self._coarse
        unknown = self._unknown
        depth = self.depth
        settled = self._settled
        ends = self._ends
        ready = self._ready
        start_times = self._start_times
        start_spans = self._start_spans
        changed = False
        at = rows[0].start_ns
        ids_of: str | None = None  # the trace whose span ids ``ids`` holds
        ids: dict[str, int] = {}
        for r in rows:
            i = len(spans)
            trace_id = r.trace_id
            start = r.start_ns
            if changed and start != at:  # the spans at the instant before are all in
                self._settle_waiting()
                changed = False
            at = start
            spans.append(r)
            if trace_id != ids_of:
                ids_of = trace_id
                ids = index.setdefault(trace_id, {})
            ids[r.span_id] = i
            parent: int | None = None
            pid = r.parent_span_id
            known = True  # its parent read, or outside the turn
            if pid:
                parent = ids.get(pid)
                if parent is None and (lookups is None or lookups.has_span(trace_id, pid)):
                    unknown.add(i)
                    waiting.setdefault((trace_id, pid), []).append(i)
                    known = False
            parents.append(parent)
            if waiting:
                children = waiting.pop((trace_id, r.span_id), None)
                if children:
                    for child in children:
                        parents[child] = i
                        unknown.discard(child)
                    changed = True
            is_coarse = coarse.get(trace_id)
            if is_coarse is None:
                if lookups is not None:
                    is_coarse = coarse[trace_id] = lookups.coarse(trace_id)
                elif start % 1_000_000:
                    is_coarse = coarse[trace_id] = False
                    if trace_id in self._maybe_coarse:
                        self._maybe_coarse.discard(trace_id)
                        changed = True
                else:
                    self._maybe_coarse.add(trace_id)
            if (
                is_coarse is not None
                and known
                and (parent is None or (parent < i and settled[parent]))
            ):
                # the usual span (inline): its parent placed for good (or none), so is
                # every ancestor, none of which is ``i`` (it did not exist then)
                if is_coarse:
                    start += MS_SLACK_NS
                end = r.end_ns
                if end is not None and end < start:
                    end = start
                if parent is None:
                    depth.append(0)
                else:  # (_end_of, inline: the parent is above it and its end is set)
                    depth.append(depth[parent] + 1)
                    parent_end = ends[parent]
                    if (
                        end is not None
                        and parent_end is not None
                        and 0 < end - parent_end <= NESTING_SLACK_NS
                    ):
                        end = max(parent_end, start)
                ends[i] = end
                settled.append(True)
                if is_coarse or r.events or start < self._last_start:
                    self._queue(i, start, end, is_coarse)
                else:  # (_queue, inline)
                    start_times.append(start)
                    start_spans.append(i)
                    self._last_start = start
                    if end is not None:
                        heapq.heappush(ready, (end, i, 2, 0))
                continue
            depth.append(-1)
            settled.append(False)
            if not self._settle(i):
                self._unsettled.append(i)
                heapq.heappush(self._unsettled_starts, (start, i))
        if changed:
            self._settle_waiting()

    def _settle_waiting(self) -> None:
        self._unsettled = [i for i in self._unsettled if not self._settle(i)]

    def _settle(self, i: int) -> bool:
        """Fix span ``i``'s place once its depth and clock are final; queue its phases."""
        r = self.spans[i]
        coarse = self._coarse.get(r.trace_id)
        if coarse is None or i in self._unknown:
            return False
        j = i
        seen = {i}
        while True:  # every ancestor read (or known to be outside the turn)
            if j in self._unknown:
                return False
            q = self.parent[j]
            if q is None or q in seen:
                break
            seen.add(q)
            j = q
        self._depth(i)
        self._settled[i] = True
        self._queue(i, r.start_ns + MS_SLACK_NS if coarse else r.start_ns, self._end_of(i), coarse)
        return True

    def _queue(self, i: int, start: int, end: int | None, coarse: bool) -> None:
        """Queue a settled span's phases (``start`` and ``end`` as they are ordered)."""
        r = self.spans[i]
        if start >= self._last_start:
            self._start_times.append(start)
            self._start_spans.append(i)
            self._last_start = start
        else:  # (a late span, or a coarse trace's start among fine ones)
            heapq.heappush(self._ready, (start, i, 0, 0))
        if coarse:  # its end may still move later (a descendant not read yet)
            self._held.append(i)
            floor = min((self._event_time(r, k, end) for k in range(len(r.events))), default=_NEVER)
            self._held_floor = min(self._held_floor, floor, _NEVER if end is None else end)
        else:
            self._queue_rest(i, end)

    def _queue_rest(self, i: int, end: int | None) -> None:
        r = self.spans[i]
        for k in range(len(r.events)):
            heapq.heappush(self._ready, (self._event_time(r, k, end), i, 1, k))
        if end is not None:
            heapq.heappush(self._ready, (end, i, 2, 0))

    @staticmethod
    def _event_time(r: SpanRecord, k: int, end: int | None) -> int:
        t = max(int(r.events[k].get("time_ns") or r.start_ns), r.start_ns)
        return t if end is None else min(t, end)

    def _start(self, i: int) -> int:
        """The start for ordering: in a coarse trace, the end of its millisecond."""
        r = self.spans[i]
        return r.start_ns + MS_SLACK_NS if self._coarse[r.trace_id] else r.start_ns

    def _depth(self, i: int) -> int:
        if self.depth[i] < 0:
            self.depth[i] = depth_of(i, self.parent)
        return self.depth[i]

    def _end_of(self, i: int) -> int | None:
        """The nested end of :func:`relay.mapping.order.nested_ends` (before the coarse
        rule): spans are adjusted in (depth, index) order, each against its parent's
        end as it stands at its turn."""
        chain = []
        j = i
        while j not in self._ends:
            chain.append(j)
            p = self.parent[j]
            if p is None or (self._depth(p), p) >= (self._depth(j), j):
                break
            j = p
        for j in reversed(chain):
            r = self.spans[j]
            start = self._start(j)
            end = None if r.end_ns is None else max(r.end_ns, start)
            p = self.parent[j]
            if p is not None and end is not None:
                if (self._depth(p), p) < (self._depth(j), j):
                    parent_end = self._ends[p]
                else:
                    q = self.spans[p]
                    parent_end = None if q.end_ns is None else max(q.end_ns, self._start(p))
                if parent_end is not None and 0 < end - parent_end <= NESTING_SLACK_NS:
                    end = max(parent_end, start)
            self._ends[j] = end
        return self._ends[i]

    def _release_held(self) -> None:
        """The coarse rule (a parent ends no earlier than its children), deepest first,
        then the held phases with their final ends."""
        ends = self._ends
        held = sorted(self._held, key=lambda k: (self.depth[k], k))
        for i in reversed(held):
            p = self.parent[i]
            end = ends[i]
            if p is not None and end is not None and ends[p] is not None:
                ends[p] = max(ends[p] or 0, end)
        for i in self._held:
            self._queue_rest(i, ends[i])
        self._held = []
        self._held_floor = _NEVER

    # -- output ---------------------------------------------------------------------------

    def _release(self, frontier: int) -> list[Phase]:
        waiting = self._unsettled_starts
        settled = self._settled
        while waiting and settled[waiting[0][1]]:
            heapq.heappop(waiting)
        limit = min(frontier, self._held_floor, waiting[0][0] if waiting else _NEVER)
        ready = self._ready
        times = self._start_times
        out = list[Phase]()
        at = self._starts_at
        n = len(times)
        starting = self._start_spans
        spans = self.spans
        pop = heapq.heappop
        leaves = self.leaves
        while True:  # the starts' list and the heap, merged by time
            ts = times[at] if at < n else _NEVER
            tr = ready[0][0] if ready else _NEVER
            if ts < tr:
                if ts >= limit:
                    break
                t = ts
                i = starting[at]
                at += 1
                if at >= n or times[at] != t:  # alone at its instant
                    if (
                        leaves
                        and tr < limit
                        and ready[0][1] == i
                        and ready[0][2] == 2
                        and (at >= n or tr < times[at])
                        and (len(ready) < 2 or ready[1][0] > tr)
                        and (len(ready) < 3 or ready[2][0] > tr)
                    ):
                        # its end is next, and alone at its instant (the heap's next
                        # smallest is one of the top's two children): one phase
                        pop(ready)
                        out.append((spans[i], LEAF, None))
                        continue
                    out.append((spans[i], START, None))
                    continue
                group = [(i, 0, 0)]
            else:
                if tr >= limit:
                    break
                t, i, kind, k = pop(ready)
                if ts != t and (not ready or ready[0][0] != t):  # alone at its instant
                    record = spans[i]
                    if kind == 1:
                        out.append((record, EVENT, record.events[k]))
                    else:
                        out.append((record, END if kind == 2 else START, None))
                    continue
                group = [(i, kind, k)]
            # phases at one instant: order_group orders them
            while at < n and times[at] == t:
                group.append((starting[at], 0, 0))
                at += 1
            while ready and ready[0][0] == t:
                _, i, kind, k = pop(ready)
                group.append((i, kind, k))
            for i, kind, k in order_group(group, spans, self.parent, self.depth):
                record = spans[i]
                if kind == 1:
                    out.append((record, EVENT, record.events[k]))
                else:
                    out.append((record, END if kind == 2 else START, None))
        if at > 1024 and at * 2 > n:  # drop what was released
            del times[:at]
            del starting[:at]
            at = 0
        self._starts_at = at
        return out
