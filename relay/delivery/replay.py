"""The paced replay of a stored turn: its events, derived from its spans while they are
sent (:func:`start_derivation`), by the live stream's writer at the original pace scaled
by ``speed`` (1 = as it happened, 0 = at once, 4 = four times faster), with heartbeats
through long gaps.

The derivation (read the spans in start order, decode, order, map) runs in a worker
thread, chunk by chunk, and hands each batch of events to the loop as soon as it exists:
the first event goes out after the first chunk, not after the whole turn, and the loop
never runs a whole turn's mapping in one go. Spans it cannot map
(:mod:`relay.mapping.unmappable`) fail it before its first event (``422
unmappable_spans``), or end it with an ``error`` ``unmappable_spans`` after."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence

from relay.bus.static import Derived, DerivedReader, gap_s
from relay.delivery.streaming import Encoder, EventStream
from relay.events import ERROR, Event
from relay.mapping.feed import iter_replay_events
from relay.mapping.lookups import SpanLookups
from relay.mapping.state import ms
from relay.mapping.unmappable import UnmappableSpans, error_fields
from relay.spans import SpanRecord

#: the largest speed factor the API accepts (0 means "no pacing at all")
MAX_SPEED = 1000.0

log = logging.getLogger(__name__)


def paced(
    events: Iterable[Event], speed: float, max_gap_s: float | None = None
) -> Iterator[tuple[Event, float]]:
    """Each event with the seconds after the stream starts at which it is due (the gaps of
    :func:`relay.bus.static.gap_s` added up)."""
    at = 0.0
    previous = None
    for event in events:
        if previous is not None:
            at += gap_s(previous, event.ts, speed, max_gap_s)
        previous = event.ts
        yield event, at


def schedule(events: Sequence[Event], speed: float, max_gap_s: float | None = None) -> list[float]:
    """Seconds after the stream starts at which each event is due."""
    return [due for _, due in paced(events, speed, max_gap_s)]


def start_derivation(
    chunks: Iterable[Sequence[SpanRecord]],
    lookups: SpanLookups | None,
    resume_route: Callable[[str], str | None] | None = None,
    close: Callable[[], None] | None = None,
) -> Derived:
    """Derive a turn's events from ``chunks`` of its spans (in start order) in a worker
    thread; the result fills as batches come. ``close`` (the store's read) is called
    when the worker ends, also when the reader left early (``cancelled``)."""
    loop = asyncio.get_running_loop()
    derived = Derived()

    def post(callback: Callable[..., object], *args: object) -> None:
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed (the server stopped): nobody reads
            pass

    def work() -> None:
        last: Event | None = None
        try:
            for batch in iter_replay_events(chunks, lookups=lookups, resume_route=resume_route):
                post(derived.add, batch)
                last = batch[-1]
                if derived.cancelled:
                    return
            post(derived.finish)
        except UnmappableSpans as exc:
            log.warning("replay: a stored turn's spans cannot be mapped", exc_info=exc.__cause__)
            if exc.before:
                post(derived.add, exc.before)
                last = exc.before[-1]
            if last is None:  # before its first event: the answer says so (422)
                post(derived.fail, exc)
            else:  # its stream ends as the live one did: error unmappable_spans
                post(derived.add, [unmappable_end(last, exc)])
                post(derived.finish)
        except Exception as exc:
            log.exception("replay: the derivation of a stored turn failed")
            post(derived.fail, exc)
        finally:
            if close is not None:
                close()

    loop.run_in_executor(None, work)
    return derived


def unmappable_end(last: Event, exc: UnmappableSpans) -> Event:
    """The terminal event of a replay that stopped at a span it cannot map, after
    ``last`` (the last event derived)."""
    record = exc.record
    trace_id = record.trace_id if record is not None else last.trace_id
    ts = ms(record.end_ns or record.start_ns) if record is not None else last.ts
    event = Event(ERROR, last.thread_id, last.turn_id, trace_id, ts, error_fields(str(exc)))
    event.seq = last.seq + 1
    return event


def replay_stream(
    events: Derived | Sequence[Event],
    encoder: Encoder,
    *,
    after: int = 0,
    speed: float = 1.0,
    heartbeat_s: float = 15.0,
    send_timeout_s: float = 30.0,
    max_gap_s: float | None = None,
    max_duration_s: float | None = None,
    closing: asyncio.Event | None = None,
) -> EventStream:
    """The live stream's writer over replayed events as they are derived, paced by their
    own ``ts``: same framing, heartbeats, send timeout and ``reconnect`` on shutdown
    (``events``: a derivation under way, or a whole list)."""
    if not isinstance(events, Derived):
        whole = Derived()
        whole.add(events)
        whole.finish()
        events = whole
    reader = DerivedReader(events, after, speed=speed, max_gap_s=max_gap_s)
    return EventStream(
        reader,
        encoder,
        stop_at=frozenset(),
        heartbeat_s=heartbeat_s,
        send_timeout_s=send_timeout_s,
        max_duration_s=max_duration_s,
        closing=closing,
        extra_headers=[(b"x-relay-source", b"spans")],
    )
