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

The order (docs/events.md, "Replay") is :mod:`relay.mapping.order`'s. A stored turn is
replayed by :func:`iter_replay_events`: its spans read in start order, in chunks, each
chunk's phases ordered as soon as they are final (:mod:`relay.mapping.stream_order`)
and mapped, so the first events exist before the last span is read;
:func:`replay_events` is the same over a whole list. The reference the tests hold both
to is the plain way: every phase of the turn sorted at once (:func:`ordered_phases`)
and fed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from relay import conventions as c
from relay.events import Event
from relay.mapping import deltas, engine
from relay.mapping.lookups import SpanLookups, lookups_of
from relay.mapping.order import (
    END,
    EVENT,
    LEAF,
    MS_SLACK_NS,
    NESTING_SLACK_NS,
    START,
    Phase,
    ordered_phases,
)
from relay.mapping.own import CHILD_OPERATIONS, child_leaf
from relay.mapping.state import MappingState
from relay.mapping.stream_order import PhaseOrderer
from relay.mapping.unmappable import UnmappableSpans
from relay.spans import SpanRecord

S = TypeVar("S")  # what a phase carries: a SpanRecord, or the live processor's SDK span


# -- the one loop -----------------------------------------------------------------------


def feed(
    state: MappingState,
    phases: Iterable[tuple[S, str, dict[str, Any] | None]],
    emit: Callable[[Event], object],
    *,
    read: Callable[[S, bool], SpanRecord] | None,
    on_failure: Callable[[S, Exception], None] | None = None,
) -> None:
    """Map ``phases`` in order into ``state``; each event goes to ``emit``.

    ``read(span, ended)`` is the record the mapping reads at a phase: the processor's
    ``live_record`` for SDK spans (read on the loop, inside the try, so a span that
    cannot be read is that phase's failure). ``read=None``: the phases carry finished
    records (stored, received, imported), read as they are at every phase. The mapping
    reads nothing of a span's end (its end time, status, span events) at its start or at
    a span event, so that is what :func:`as_live` would give, without a new record per
    start (tests/mapping/test_start_reads.py holds the two to the same events). A phase's
    events are emitted inside its try as well: an ``emit`` that raises fails the phase
    and its later events are not emitted. A failure goes to ``on_failure(span, exc)``,
    and the loop goes on with the next phase; without ``on_failure`` it propagates.

    Phases are taken one at a time, each mapped before the next is taken: the processor
    passes a queue drained as it is filled, the receiver holds back a root's end by the
    state the earlier phases left. A ``LEAF`` (a replay's: a span's start and its end
    right after it) is one phase: the events of the two, and one failure if either fails.
    """
    map_span = engine.map_span
    for span, kind, span_event in phases:
        try:
            record: Any = span if read is None else read(span, kind == END)
            if kind == END:
                events = map_span(state, record, True)
            elif kind == EVENT:
                events = deltas.map_span_event(state, record, span_event or {})
            elif kind == LEAF:
                events = _leaf(state, record, record if read is None else read(span, True))
            else:
                events = map_span(state, record, False)
            for event in events:
                emit(event)
        except Exception as exc:
            if on_failure is None:
                raise
            on_failure(span, exc)


def _leaf(state: MappingState, start: SpanRecord, end: SpanRecord) -> list[Event]:
    """A ``LEAF`` phase (``start`` and ``end``: the records read at the two): a GenAI span
    inside one of our nodes in one go (:func:`~relay.mapping.own.child_leaf`, which reads
    one finished record for both, as ``read=None`` gives), else its start and its end
    mapped in turn."""
    if start is end:
        operation = start.attributes.get(c.OPERATION)
        if (
            operation in CHILD_OPERATIONS
            and (events := child_leaf(state, start, operation)) is not None
        ):
            return events
    return engine.map_span(state, start, False) + engine.map_span(state, end, True)


def as_live(record: SpanRecord, ended: bool) -> SpanRecord:
    """A finished record as the live processor read it: whole at its end; at its start
    and its span events, only what is known at start (:meth:`SpanRecord.at_start`). What
    the tests feed beside ``read=None``, which must give the same events."""
    return record if ended else record.at_start()


# -- the replay ---------------------------------------------------------------------------


def replay_events(
    records: Sequence[SpanRecord], resume_route: Callable[[str], str | None] | None = None
) -> list[Event]:
    """The events of these spans (one turn's), numbered from 1: :func:`stream_replay_events`
    joined. A mapping failure propagates (as :class:`~relay.mapping.unmappable.
    UnmappableSpans`): a replay that cannot be derived is an error, not a shorter turn.
    ``resume_route``: the serving process's
    (:attr:`MappingState.resume_route`), so that a ``paused`` event's hint is the live
    one. (Streamed even here: the phases of a chunk at a time, not of the whole turn, are
    alive at once; the tests hold it to :func:`ordered_phases` fed whole.)"""
    return [event for batch in stream_replay_events(records, resume_route) for event in batch]


def iter_replay_events(
    chunks: Iterable[Sequence[SpanRecord]],
    *,
    lookups: SpanLookups | None = None,
    resume_route: Callable[[str], str | None] | None = None,
) -> Iterator[list[Event]]:
    """:func:`replay_events`, streaming: ``chunks`` of the turn's spans in start order
    (ties in any order) in, batches of numbered events out, each as soon as the phases
    it maps are final (:class:`~relay.mapping.stream_order.PhaseOrderer`). The events,
    joined, equal :func:`replay_events` of all the spans. ``lookups`` (the store's, or
    :func:`~relay.mapping.lookups.lookups_of` a list) keeps phases from waiting for
    the end of the input where they need not."""
    state = MappingState(resume_route=resume_route)
    orderer = PhaseOrderer(lookups, leaves=True)
    seq = 0

    def derive(phases: list[Phase]) -> list[Event]:
        events: list[Event] = []
        try:
            feed(state, phases, events.append, read=None, on_failure=unmappable)
        except UnmappableSpans as exc:  # the events before the span it stopped at go too
            exc.before = number(events)
            raise
        return number(events)

    def number(events: list[Event]) -> list[Event]:
        nonlocal seq
        # fresh from a state of its own: numbered in place, as Event.stamped numbers a
        # fresh event (no copy, and no call per event); one numbered already is copied
        for k, event in enumerate(events):
            if event.seq:
                events[k] = event.with_seq(seq + k + 1)
            else:
                event.seq = seq + k + 1
        seq += len(events)
        return events

    for chunk in chunks:
        batch = derive(orderer.push(chunk))
        if batch:
            yield batch
    batch = derive(orderer.finish())
    if batch:
        yield batch


def unmappable(span: Any, exc: Exception) -> None:
    """A replay's phase that fails: :class:`~relay.mapping.unmappable.UnmappableSpans`
    (the replay stops there; the cause is chained)."""
    raise UnmappableSpans(str(getattr(span, "name", "?")), exc, span) from exc


def chunked(
    records: Sequence[SpanRecord], first: int = 32, size: int = 512
) -> Iterator[list[SpanRecord]]:
    """A list of spans in start order, in chunks (a small first one: the first events
    come out early)."""
    ordered = sorted(records, key=lambda r: r.start_ns)
    at = 0
    n = first
    while at < len(ordered):
        yield ordered[at : at + n]
        at = at + n
        n = size


def stream_replay_events(
    records: Sequence[SpanRecord], resume_route: Callable[[str], str | None] | None = None
) -> Iterator[list[Event]]:
    """:func:`iter_replay_events` over a list in memory (a trace file's turn)."""
    return iter_replay_events(
        chunked(records), lookups=lookups_of(records), resume_route=resume_route
    )


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
                    turn_id, str(r.attributes.get(c.CONVERSATION_ID, "")), [], [], []
                )
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
        turn.trace_ids.sort(
            key=lambda tid: min((r.start_ns for r in turn.roots if r.trace_id == tid), default=0)
        )
    return ordered


def _foreign_turns(
    records: Sequence[SpanRecord], turns: dict[str, TurnSpans], trace_turn: dict[str, str]
) -> None:
    """The foreign turns among ``records``, as the mapping keys them, into ``turns``."""
    events: list[Event] = []
    feed(MappingState(), ordered_phases(records), events.append, read=None, on_failure=unmappable)
    for event in events:
        turn = turns.get(event.turn_id)
        if turn is None:
            turn = turns[event.turn_id] = TurnSpans(
                event.turn_id, event.thread_id, [], [], [], foreign=True
            )
        if not turn.foreign:
            continue  # (a turn id ours already has: not taken)
        if event.trace_id not in trace_turn:
            trace_turn[event.trace_id] = event.turn_id
            turn.trace_ids.append(event.trace_id)
        turn.events.append(event)
        turn.thread_id = turn.thread_id or event.thread_id


__all__ = [
    "END",
    "EVENT",
    "LEAF",
    "MS_SLACK_NS",
    "NESTING_SLACK_NS",
    "START",
    "Phase",
    "TurnSpans",
    "as_live",
    "chunked",
    "feed",
    "group_turns",
    "iter_replay_events",
    "ordered_phases",
    "replay_events",
    "stream_replay_events",
]
