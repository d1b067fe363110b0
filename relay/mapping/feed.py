"""Span phases -> the mapping, in order: the one loop that every path uses.

A span reaches the mapping as phases: its start, each of its span events, its end.
:func:`feed` is the loop that hands phases, one by one, to
:func:`~relay.mapping.engine.map_span` (``map_span_event`` for span events) and counts
what fails; the live processor, the OTLP receiver and the replay all call it, so the
three paths cannot drift apart.

The replay of a turn: its spans (all its runs: the chat and every resume) are cut into
phases, put in the order the live processor saw them (:func:`ordered_phases`) and fed to
a fresh :class:`~relay.mapping.state.MappingState`. The result equals the live stream
event for event, payload for payload (``ts`` included, since it comes from span times);
only ``seq`` is new, numbered from 1.

The order (docs/events.md, "Replay"): phases sorted by their time (start time for a
start, end time for an end); at equal times, ends before starts, a child's end before
its parent's, a parent's start before its child's, and a zero-duration span's start
right before its end. The live processor sees the same order because the SDK stamps a
span's time just before it calls the processor.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from relay import conventions as c
from relay.events import Event
from relay.mapping import deltas, engine
from relay.mapping.rules import placement
from relay.mapping.state import MappingState
from relay.spans import SpanRecord

#: how far a child's end may pass its parent's and still count as nested (time cut to
#: microseconds, as Jaeger's UI JSON does, moves an end back by up to 2 us)
NESTING_SLACK_NS = 2_000
#: a whole-millisecond start may lie anywhere in its millisecond (:func:`_coarse_traces`)
MS_SLACK_NS = 999_999

START, EVENT, END = "start", "event", "end"
#: (span, kind, the span event for an EVENT phase): what the live processor handed over
Phase = tuple[SpanRecord, str, dict[str, Any] | None]
_Key = tuple[int, int, int]  # (span index, 0 start / 1 event / 2 end, event index)
S = TypeVar("S")  # what a phase carries: a SpanRecord, or the live processor's SDK span


# -- the one loop -----------------------------------------------------------------------

def feed(state: MappingState, phases: Iterable[tuple[S, str, dict[str, Any] | None]],
         emit: Callable[[Event], object], *, read: Callable[[S, bool], SpanRecord],
         on_failure: Callable[[S, Exception], None] | None = None) -> None:
    """Map ``phases`` in order into ``state``; each event goes to ``emit``.

    ``read(span, ended)`` is the record the mapping reads at a phase: :func:`as_live` for
    finished records, the processor's ``live_record`` for SDK spans (read on the loop,
    inside the try, so a span that cannot be read is that phase's failure). A phase's
    events are emitted inside its try as well: an ``emit`` that raises fails the phase
    and its later events are not emitted. A failure goes to ``on_failure(span, exc)``,
    and the loop goes on with the next phase; without ``on_failure`` it propagates.

    Phases are taken one at a time, each mapped before the next is taken: the processor
    passes a queue drained as it is filled, the receiver holds back a root's end by the
    state the earlier phases left.
    """
    for span, kind, span_event in phases:
        try:
            if kind == EVENT:
                events = deltas.map_span_event(state, read(span, False), span_event or {})
            else:
                ended = kind == END
                events = engine.map_span(state, read(span, ended), ended)
            for event in events:
                emit(event)
        except Exception as exc:
            if on_failure is None:
                raise
            on_failure(span, exc)


def as_live(record: SpanRecord, ended: bool) -> SpanRecord:
    """A finished record as the live processor read it: whole at its end; at its start
    and its span events, only what is known at start (:meth:`SpanRecord.at_start`)."""
    return record if ended else record.at_start()


# -- order ------------------------------------------------------------------------------

def ordered_phases(records: Sequence[SpanRecord]) -> list[Phase]:
    """Every span's start, span events and end, in the order the live processor saw them."""
    spans = sorted(records, key=lambda r: (r.start_ns, r.trace_id, r.span_id))
    index = {(r.trace_id, r.span_id): i for i, r in enumerate(spans)}
    parent = [index.get((r.trace_id, r.parent_span_id or "")) for r in spans]
    depth = [_depth(i, parent) for i in range(len(spans))]
    coarse = _coarse_traces(spans)
    starts = [r.start_ns + MS_SLACK_NS if r.trace_id in coarse else r.start_ns
              for r in spans]
    ends = _nested_ends(spans, parent, depth, starts, coarse)
    groups: dict[int, list[_Key]] = {}
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
        for i, kind, k in _order_group(groups[t], spans, parent, depth):
            record = spans[i]
            if kind == 1:
                phases.append((record, EVENT, record.events[k]))
            else:
                phases.append((record, END if kind == 2 else START, None))
    return phases


def _coarse_traces(spans: list[SpanRecord]) -> set[str]:
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


def _step(record: SpanRecord) -> int:
    """A node's step, where its span says one (ours, OpenLLMetry's, OpenInference's
    LangGraph metadata): of spans that start at one instant, the earlier step ran first."""
    step = record.attributes.get(c.NODE_STEP)
    if step is None:
        where = placement(record.attributes)  # the rule table's LangGraph metadata reader
        step = where.step if where is not None else None
    return step if isinstance(step, int) and not isinstance(step, bool) else 1 << 62


def _nested_ends(spans: list[SpanRecord], parent: list[int | None], depth: list[int],
                 starts: list[int], coarse: set[str]) -> list[int | None]:
    """End times for ordering: never before the span's start (for ordering); a child that
    ends at most NESTING_SLACK_NS after its parent (microsecond times cut separately, as
    in Jaeger's JSON) is taken to end with it; and in a ``coarse`` trace (the JS SDK's
    clock, :func:`_coarse_traces`) a parent ends no earlier than its children."""
    ends: list[int | None] = [None if r.end_ns is None else max(r.end_ns, starts[i])
                              for i, r in enumerate(spans)]
    by_depth = sorted(range(len(spans)), key=lambda k: depth[k])
    for i in by_depth:
        p = parent[i]
        end, parent_end = ends[i], ends[p] if p is not None else None
        if end is not None and parent_end is not None \
                and 0 < end - parent_end <= NESTING_SLACK_NS:
            ends[i] = max(parent_end, starts[i])
    for i in reversed(by_depth) if coarse else ():  # deepest first
        p = parent[i]
        end = ends[i]
        if p is not None and end is not None and ends[p] is not None \
                and spans[i].trace_id in coarse:
            ends[p] = max(ends[p] or 0, end)
    return ends


def _depth(i: int, parent: list[int | None]) -> int:
    depth, seen, p = 0, {i}, parent[i]
    while p is not None and p not in seen:
        seen.add(p)
        depth += 1
        p = parent[p]
    return depth


def _order_group(group: list[_Key], spans: list[SpanRecord], parent: list[int | None],
                 depth: list[int]) -> list[_Key]:
    """Phases at one instant: a topological order of the nesting, ends first."""
    if len(group) == 1:
        return group
    members = set(group)
    after: dict[_Key, list[_Key]] = {p: [] for p in group}
    waiting = dict.fromkeys(group, 0)

    def edge(first: _Key, then: _Key) -> None:
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

    def priority(phase: _Key) -> tuple[Any, ...]:
        i, kind, k = phase
        if kind == 2:
            return (0, -depth[i], i)  # ends first, deepest first
        if kind == 1:
            return (1, i, k)  # then span events
        end = spans[i].end_ns
        zero = end is not None and end <= spans[i].start_ns
        # then starts, shallowest first; of siblings that start at one instant, the one
        # that ends first (one after the other at a coarse clock: it ran first)
        return (2, 0 if zero else 1, depth[i], _step(spans[i]), end or 0, i)

    ready = [(priority(p), p) for p in group if waiting[p] == 0]
    heapq.heapify(ready)
    out: list[_Key] = []
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


# -- the replay ---------------------------------------------------------------------------

def replay_events(records: Sequence[SpanRecord],
                  resume_route: Callable[[str], str | None] | None = None) -> list[Event]:
    """The events of these spans (one turn's), numbered from 1. A mapping failure
    propagates: a replay that cannot be derived is an error, not a shorter turn.
    ``resume_route``: the serving process's (:attr:`MappingState.resume_route`), so that
    a ``paused`` event's hint is the live one."""
    events: list[Event] = []
    feed(MappingState(resume_route=resume_route), ordered_phases(records), events.append,
         read=as_live)
    return [event.with_seq(seq) for seq, event in enumerate(events, 1)]


@dataclass(slots=True)
class TurnSpans:
    """A turn found among spans (a trace file): its id, thread and spans, in all runs."""

    turn_id: str
    thread_id: str
    trace_ids: list[str]
    spans: list[SpanRecord]
    roots: list[SpanRecord]
    #: another instrumentation's turn (no relay.turn.id): keyed by the mapping, whose
    #: events for it (``events``, unnumbered) give its record and the store's index
    foreign: bool = False
    events: list[Event] = field(default_factory=list)

    @property
    def started_ns(self) -> int:
        return min(r.start_ns for r in self.roots)

    @property
    def last_root(self) -> SpanRecord:
        return max(self.roots, key=lambda r: r.start_ns)


def group_turns(records: Sequence[SpanRecord]) -> list[TurnSpans]:
    """Turns among ``records``, oldest first: a turn's spans are those of the traces
    whose root carries its ``relay.turn.id``; the other traces are mapped, and those the
    mapping takes for a foreign run are turns as it keys them (the trace id, or the
    paused turn a resume continues). Spans of other traces belong to no turn."""
    turns: dict[str, TurnSpans] = {}
    trace_turn: dict[str, str] = {}
    for r in records:
        if c.TURN_ID in r.attributes:
            turn_id = str(r.attributes[c.TURN_ID])
            turn = turns.get(turn_id)
            if turn is None:
                turn = turns[turn_id] = TurnSpans(
                    turn_id, str(r.attributes.get(c.CONVERSATION_ID, "")), [], [], [])
            turn.roots.append(r)
            if r.trace_id not in trace_turn:
                turn.trace_ids.append(r.trace_id)
                trace_turn[r.trace_id] = turn_id
    rest = [r for r in records if r.trace_id not in trace_turn]
    if rest:
        _foreign_turns(rest, turns, trace_turn)
    for r in records:
        owner = trace_turn.get(r.trace_id)
        if owner is not None:
            turn = turns[owner]
            turn.spans.append(r)
            if turn.foreign and r.parent_span_id is None:
                turn.roots.append(r)
    ordered = sorted((t for t in turns.values() if t.roots), key=lambda t: t.started_ns)
    for turn in ordered:
        turn.trace_ids.sort(key=lambda tid: min((r.start_ns for r in turn.roots
                                                 if r.trace_id == tid), default=0))
    return ordered


def _foreign_turns(records: Sequence[SpanRecord], turns: dict[str, TurnSpans],
                   trace_turn: dict[str, str]) -> None:
    """The foreign turns among ``records``, as the mapping keys them, into ``turns``."""
    events: list[Event] = []
    feed(MappingState(), ordered_phases(records), events.append, read=as_live)
    for event in events:
        turn = turns.get(event.turn_id)
        if turn is None:
            turn = turns[event.turn_id] = TurnSpans(event.turn_id, event.thread_id, [], [],
                                                    [], foreign=True)
        if not turn.foreign:
            continue  # (a turn id ours already has: not taken)
        if event.trace_id not in trace_turn:
            trace_turn[event.trace_id] = event.turn_id
            turn.trace_ids.append(event.trace_id)
        turn.events.append(event)
        turn.thread_id = turn.thread_id or event.thread_id
