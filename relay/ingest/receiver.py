"""The receiver's core: finished spans from OTLP -> the same mapping -> the bus and the store.

OTLP delivers a span once, when it ends. So for every received span the receiver feeds
the mapping its start *and* its end (the start view is the finished span without its end
facts, as the replay does), in the order the spans ran
(:func:`relay.mapping.feed.ordered_phases` within a batch), through the one loop every
path uses (:func:`relay.mapping.feed.feed`). A node's ``node_started`` therefore arrives
with its ``node_completed``, unless the agent sends start markers (docs/events.md, "Start
markers") or Logfire's pending spans (:mod:`relay.mapping.markers`).

- De-duplication: exporters retry, so a span (trace id, span id) seen before is dropped.
  The memory of seen spans is bounded (two generations of ``dedup_spans`` keys each).
- Out of order: children end (and are exported) before their parents, and batches
  arrive in any order. Spans of a trace the mapping does not follow yet wait, per trace,
  until a span that starts a run arrives (the run root, its start marker, or a span
  another instrumentation marks as a graph run); then the trace's spans are fed in
  order. Waiting is bounded by count (``pending_spans``) and age (``pending_s``); spans
  that age out are counted in ``stats["expired"]`` (they are still stored).
- Every accepted span goes to the span store through a bounded queue and one writer
  task (``store_backlog`` spans; a full queue is back-pressure: HTTP 429, gRPC
  RESOURCE_EXHAUSTED, and the exporter retries later).
- A turn that this relay runs itself (the in-process processor publishes it) is never
  published again from received spans: an agent that exports its spans to the relay
  that also runs it in-process would otherwise stream every event twice.
- A received run that names a turn the store knows (``relay.turn.id``) is published only
  when it may change that turn's record (it names the turn's user, and the turn is not
  one this relay ran); else its events are dropped from the live path (its spans are
  stored, under no turn), counted in ``stats["kept_apart"]`` and logged. Decided once
  per trace, before anything of it goes out (:mod:`relay.ingest.received_turns`, on the
  outbox's task: :mod:`relay.ingest.outbox`; a record lookup is I/O, never on the span
  path).
- Settle window (``settle_s``, RELAY_OTLP_SETTLE_MS, :mod:`relay.ingest.settle`):
  exporters race (one request per span, sent concurrently, as the Node.js SDK's
  ``SimpleSpanProcessor`` does), so spans that arrive before their parent wait
  ``settle_s`` from the first one's arrival and are then fed together in the order they
  ran. Spans that hang from a span the mapping knows (its run followed, their parent's
  start mapped: a start marker, Logfire's pending span, an exporter that sends in order)
  go at once, and so does a window the moment its last missing parent comes. A run root
  waits ``settle_s`` from its own arrival, and from each span that follows it (up to
  ``ROOT_WINDOWS`` windows), for the children still on their way, unless it says how many
  spans its trace has (``relay.run.span_count``) and that many have come. Spans of a
  trace whose run has ended are late: counted in ``stats["late"]`` (the
  ``relay.otlp.spans`` metric) and logged; they are stored, and streamed no more.
- Spans of a run whose turn another instance publishes (split over replicas) are mapped
  here only for the run's end, and handed over to that instance, which takes them as if
  they had come to it (:mod:`relay.ingest.strays`): the run ends there, once.
- Runs of other instrumentations are keyed by trace id (or continue the paused turn they
  resume, :mod:`relay.mapping.links`); the store indexes them as the mapping reports them
  (:meth:`relay.store.SpanStore.index_runs`), so replay and ``GET /turns`` find them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from relay import conventions as c
from relay.events import Event
from relay.ingest.bounded import Seen, bounded_add
from relay.ingest.outbox import Batch, Outbox
from relay.ingest.received_turns import ReceivedTurns
from relay.ingest.settle import ROOT_WINDOWS, Window, is_root, ready
from relay.ingest.store_writer import StoreWriter
from relay.ingest.strays import StrayRuns
from relay.mapping import MappingState, can_start_run
from relay.mapping.feed import END, Phase, feed, ordered_phases
from relay.mapping.markers import announced, is_pending
from relay.mapping.unmappable import end_unmappable
from relay.spans import SpanRecord
from relay.store import RunIndex
from relay.store.sql import our_run
from relay.turns.foreign import NotedRuns, RecordWriter

if TYPE_CHECKING:
    from relay.bus.base import Bus
    from relay.bus.redis_handoffs import HandoffChannel
    from relay.store import SpanStore
    from relay.turns.records import TurnStore

log = logging.getLogger("relay.receiver")


@dataclasses.dataclass(slots=True)
class _Pending:
    since: float
    spans: list[SpanRecord] = dataclasses.field(default_factory=list)


class OTLPReceiver:
    def __init__(
        self,
        bus: Bus,
        turns: TurnStore,
        store: SpanStore,
        running: Callable[[str], bool],
        *,
        pending_spans: int = 10_000,
        pending_s: float = 600.0,
        dedup_spans: int = 200_000,
        store_backlog: int = 50_000,
        max_turns: int = 10_000,
        root_wait_s: float = 10.0,
        settle_s: float = 0.25,
        resume_route: Callable[[str], str | None] | None = None,
        handoffs: HandoffChannel | None = None,
    ) -> None:
        """``handoffs``: the channel between the instances sharing a Redis bus, over which
        stray parts of runs go to the instance that publishes their turn
        (:mod:`relay.ingest.strays`); None in process."""
        self.bus = bus
        self.turns = turns
        self.store = store
        self.running = running  # is this turn run by this relay itself?
        self.state = MappingState()
        self.state.resume_route = resume_route or (lambda graph_id: None)
        self.state.notes = []  # foreign runs begun and ended: the store's index
        self.settle_s = settle_s
        self._windows: dict[str, Window] = {}
        self._counts: OrderedDict[str, int] = OrderedDict()  # spans received, per trace
        self._finished: OrderedDict[str, None] = OrderedDict()  # traces whose run ended
        self._noted = NotedRuns(max_turns)  # what the mapping noted: messages, the index
        self.pending_spans = pending_spans
        self.pending_s = pending_s
        self.max_turns = max_turns
        self._seen = Seen(dedup_spans)
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._pending_count = 0
        self.root_wait_s = root_wait_s
        self._deferred: dict[str, tuple[float, SpanRecord]] = {}  # trace -> its root's end
        self._sweeper: asyncio.Task[None] | None = None
        self._runs_out: list[RunIndex] = []  # index entries for the next batch out
        self.stats = {
            "received": 0,
            "accepted": 0,
            "duplicates": 0,
            "rejected": 0,
            "expired": 0,
            "events": 0,
            "stored": 0,
            "store_failures": 0,
            "mapping_failures": 0,
            "late": 0,
            # received turns that named another user than their thread's owner, or none
            # on a thread that has one: kept apart (relay/turns/threads.py)
            "kept_apart": 0,
            # traces of a turn another instance publishes (split over replicas): not here
            "published_elsewhere": 0,
            # their spans, taken by the instance that publishes the turn (relay/ingest/strays.py)
            "handed_over": 0,
            # runs whose end no instance took (it was gone): ended here, from their root
            "ended_here": 0,
        }
        self._records = RecordWriter(turns, self._noted.messages, self._noted.users, self.stats)
        self._writer = StoreWriter(store, store_backlog, self.stats)
        #: which turn a received run may go into (decided per trace, before it goes out)
        self._received = ReceivedTurns(
            turns, bus, running, self._noted.users, self.stats, max_turns
        )
        self._outbox = Outbox(self._received.admit, self._send)
        self._strays_out: list[SpanRecord] = []  # spans for the next batch out, to hand over
        self._strays = StrayRuns(
            handoffs,
            bus,
            turns,
            self._noted.users,
            self.stats,
            takes=self._received.publishes,
            take=self.take_handed,
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._writer.start()
        self._sweeper = asyncio.create_task(self._sweep_loop(), name="otlp receiver sweep")

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._outbox.put(self._batch(self.sweep()))

    async def stop(self, timeout: float = 5.0) -> None:
        if not self._writer.started:
            return
        self._strays.closed = True  # what another instance hands here now is not taken
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        for trace_id in list(self._windows):  # what waits out its window goes out now
            self._flush(trace_id)
        deadline = time.monotonic() + timeout
        await self._outbox.drain(timeout)  # what went out of a window, published
        await self._records.drain(max(0.0, deadline - time.monotonic()))  # and recorded
        await self._strays.drain(max(0.0, deadline - time.monotonic()))  # and handed over
        await self._writer.stop(max(0.0, deadline - time.monotonic()))

    # -- admission ------------------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why the relay cannot take spans now (HTTP 503 / gRPC UNAVAILABLE), or None."""
        if not self._writer.started:
            return "the OTLP receiver is not started"
        return self.bus.unavailable()

    def busy(self, count: int) -> bool:
        """True when ``count`` more spans would overflow the store queue (HTTP 429)."""
        return self._writer.busy(count)

    # -- the work (on the event loop, no I/O) ---------------------------------------------

    def accept(self, records: Sequence[SpanRecord]) -> list[Event]:
        """Take finished spans: store them and map them. The events mapped now (without a
        settle window; else they go out when their window closes) are answered, for
        :meth:`deliver`."""
        self.stats["received"] += len(records)
        fresh: list[SpanRecord] = []
        for record in records:
            key = record.trace_id + record.span_id
            if key in self._seen:
                self.stats["duplicates"] += 1
                continue
            self._seen.add(key)
            fresh.append(record)
        if not fresh:
            return []
        self.stats["accepted"] += len(fresh)
        self._writer.put(fresh)
        by_trace: dict[str, list[SpanRecord]] = {}
        for record in fresh:
            started, _ = announced(record)
            if started != record.span_id:  # a marker after its span: nothing to add
                if record.trace_id + started in self._seen and not any(
                    r.span_id == started for r in fresh
                ):
                    continue
            by_trace.setdefault(record.trace_id, []).append(record)
        if self.settle_s <= 0:
            return self._take(by_trace) + self.sweep()
        now = time.monotonic()
        for trace_id, spans in by_trace.items():
            if self._dropped(trace_id):
                continue
            self._wait(trace_id, spans, now)
        return []

    def _wait(self, trace_id: str, spans: list[SpanRecord], now: float) -> None:
        """Spans of a trace into its settle window; the window goes out at its deadline,
        or at once when the root's span count is reached; its spans that need not wait
        (:func:`relay.ingest.settle.ready`: each hangs from a span already mapped) go now."""
        window = self._windows.get(trace_id)
        if window is None:
            window = self._windows[trace_id] = Window(now + self.settle_s)
        window.spans += spans
        received = self._counts.pop(trace_id, 0) + len(spans)
        self._counts[trace_id] = received
        while len(self._counts) > self.max_turns:
            self._counts.popitem(last=False)
        for record in spans:
            if is_root(record):
                window.root_at = now
                count = record.attributes.get(c.RUN_SPAN_COUNT)
                if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                    window.expected = count
        if window.root_at is not None:  # the root is in: each arrival gives the rest a
            # window more, up to ROOT_WINDOWS windows after the root
            window.deadline = max(
                window.deadline,
                min(now + self.settle_s, window.root_at + ROOT_WINDOWS * self.settle_s),
            )
        if window.expected is not None and received >= window.expected:
            self._flush(trace_id)
            return
        going = ready(self.state, window.spans)
        if going:  # what hangs from a span already mapped goes now; the rest waits on
            gone = {id(s) for s in going}
            window.spans = [s for s in window.spans if id(s) not in gone]
            self._send_now(trace_id, going)
            if not window.spans:
                self._windows.pop(trace_id, None)
                if window.timer is not None:
                    window.timer.cancel()
                return
        if window.timer is not None:
            window.timer.cancel()
        loop = asyncio.get_running_loop()
        window.timer = loop.call_at(
            loop.time() + max(0.0, window.deadline - now), self._flush, trace_id
        )

    def _flush(self, trace_id: str) -> None:
        """A window is over: its spans are mapped and published, their records kept."""
        window = self._windows.pop(trace_id, None)
        if window is None:
            return
        if window.timer is not None:
            window.timer.cancel()
        self._send_now(trace_id, window.spans)

    def _send_now(self, trace_id: str, spans: list[SpanRecord]) -> None:
        """Spans of a trace mapped now, and published (through the outbox, in order)."""
        try:
            self._outbox.put(self._batch(self._take({trace_id: spans}) + self.sweep()))
        except Exception:  # a timer's callback: nobody above it to answer (they are stored)
            self.stats["mapping_failures"] += len(spans)
            log.exception(
                "relay: publishing %d received span(s) of trace %s failed", len(spans), trace_id
            )

    def _take(self, by_trace: dict[str, list[SpanRecord]]) -> list[Event]:
        """Map spans, trace by trace: fed when their trace's run is followed, else kept
        until a span that starts a run arrives."""
        events: list[Event] = []
        for trace_id, spans in by_trace.items():
            if self._dropped(trace_id):
                continue
            if self._received.elsewhere(trace_id) is not None:  # all of them go to the
                # instance that publishes the turn, whatever becomes of them here
                self._strays_out += spans
            # our run roots (and their start markers) index their runs once admitted, with
            # the events of the same mapping step (the user their root names is noted then)
            self._runs_out += [
                our_run(s)
                for s in spans
                if c.TURN_ID in s.attributes and not is_pending(s.attributes)
            ]
            if trace_id in self._finished or trace_id in self.state.ended:
                late = [s for s in spans if s.attributes.get(c.OPERATION) != c.OP_SAVE_MESSAGE]
                if late:
                    self.stats["late"] += len(late)
                    log.warning(
                        "relay: %d span(s) of trace %s arrived after its run ended "
                        "(stored, not streamed): raise RELAY_OTLP_SETTLE_MS, or "
                        "export sooner",
                        len(late),
                        trace_id,
                    )
                if trace_id in self.state.ended:
                    continue
            if trace_id in self.state.runs:
                events += self._feed(spans)
                continue
            pending = self._pending.get(trace_id)
            if pending is None:
                pending = self._pending[trace_id] = _Pending(time.monotonic())
            pending.spans.extend(spans)
            self._pending_count += len(spans)
            if any(can_start_run(s) for s in spans):  # earlier ones could not, or they
                # would not be waiting
                del self._pending[trace_id]
                self._pending_count -= len(pending.spans)
                events += self._feed(pending.spans)
        self._index_noted()
        return events

    def _dropped(self, trace_id: str) -> bool:
        """Whether nothing of this trace is mapped any more: ignored, unless its turn is
        published by another instance (its spans are mapped, for the run's end, and
        handed over: :mod:`relay.ingest.strays`)."""
        return self._received.ignores(trace_id) and self._received.elsewhere(trace_id) is None

    def _index_noted(self) -> None:
        """The foreign runs the mapping began or ended: their index entries go out with
        the next batch (once admitted)."""
        if self.state.notes:
            self._runs_out += self._noted.take(self.state.notes)

    def _batch(self, events: list[Event]) -> Batch:
        runs, self._runs_out = self._runs_out, []
        strays, self._strays_out = self._strays_out, []
        return Batch(events, runs, strays)

    def _feed(self, spans: list[SpanRecord]) -> list[Event]:
        trace_id = spans[0].trace_id if spans else ""
        if self._received.elsewhere(trace_id) is None:  # (else kept already)
            # the trace may turn out to be another instance's when it is admitted
            self._strays_out += spans
        out = self._mapped(self._held_back(ordered_phases(spans)))
        deferred = self._deferred.get(trace_id)
        if deferred is not None and not self._open_spans(trace_id):
            del self._deferred[trace_id]
            out += self._mapped([(deferred[1], END, None)])
        return out

    def _mapped(self, phases: Iterable[Phase]) -> list[Event]:
        """The events of these phases; a phase that fails is counted and logged, and the
        others still map (a bad span must not cost its trace's other events). The run of
        a span that fails ends there, ``unmappable_spans`` (its readers get a terminal
        event, its record is saved): :func:`relay.mapping.unmappable.end_unmappable`."""
        out: list[Event] = []

        def failed(record: SpanRecord, exc: Exception) -> None:
            self.stats["mapping_failures"] += 1
            log.exception("relay: mapping received span %r failed", record.name)
            try:
                out.extend(end_unmappable(self.state, record, exc))
            except Exception:  # (a record the state cannot even read: nothing to end)
                log.exception("relay: ending the run of span %r failed", record.name)

        feed(self.state, phases, out.append, read=None, on_failure=failed)
        return out

    def _held_back(self, phases: Iterable[Phase]) -> Iterator[Phase]:
        """The phases, but a run root's end that comes while spans it announced (start
        markers) are still open: their batch is late, so the run ends when they come (or
        at ``root_wait_s``). Decided as feed takes each phase, on the state the earlier
        phases left."""
        for phase in phases:
            record, kind, _ = phase
            if kind == END and self._ends_run(record) and self._open_spans(record.trace_id):
                self._deferred[record.trace_id] = (time.monotonic(), record)
                continue
            yield phase

    def _ends_run(self, record: SpanRecord) -> bool:
        run = self.state.runs.get(record.trace_id)
        return run is not None and run.root_span_id == record.span_id

    def _open_spans(self, trace_id: str) -> bool:
        return any(o.run.trace_id == trace_id for o in self.state.spans.values())

    def sweep(self) -> list[Event]:
        """Drop waiting spans past the count or age limit (oldest traces first); end the
        runs whose late spans did not come within ``root_wait_s``."""
        now = time.monotonic()
        events: list[Event] = []
        for trace_id, (since, record) in list(self._deferred.items()):
            if now - since >= self.root_wait_s:
                del self._deferred[trace_id]
                log.warning(
                    "relay: run of trace %s ends without spans it announced (never received)",
                    trace_id,
                )
                events += self._mapped([(record, END, None)])
        self._index_noted()
        while self._pending:
            trace_id, pending = next(iter(self._pending.items()))
            if self._pending_count <= self.pending_spans and now - pending.since < self.pending_s:
                break
            del self._pending[trace_id]
            self._pending_count -= len(pending.spans)
            self.stats["expired"] += len(pending.spans)
            log.info(
                "relay: %d received span(s) of trace %s never met a run root; "
                "dropped from the live path (they are stored)",
                len(pending.spans),
                trace_id,
            )
        return events

    def _send(self, batch: Batch) -> None:
        """An admitted batch out: its events to the bus, its runs to the store's index,
        the published events to the turn records."""
        published = self._publish(batch.events)
        for run in batch.runs:
            if not self._received.ignores(run.trace_id):
                self._writer.index(run)
        self._records.put(published)
        self._hand_over(batch)

    def _hand_over(self, batch: Batch) -> None:
        """The batch's spans of runs whose turn another instance publishes, to that
        instance, with the run's end as mapped here (:mod:`relay.ingest.strays`)."""
        strays: dict[str, list[SpanRecord]] = {}
        for span in batch.spans:
            if self._received.elsewhere(span.trace_id) is not None:
                strays.setdefault(span.trace_id, []).append(span)
        for trace_id, spans in strays.items():
            turn_id = self._received.elsewhere(trace_id)
            assert turn_id is not None
            end = next(
                (e for e in batch.events if e.trace_id == trace_id and e.is_run_terminal), None
            )
            self._strays.hand(turn_id, trace_id, spans, end)

    async def take_handed(self, spans: list[SpanRecord]) -> None:
        """Spans of a run this instance publishes, handed here by the instance that got
        them (:mod:`relay.ingest.strays`): taken as if they had come over OTLP."""
        await self.deliver(self.accept(spans))

    def _publish(self, events: Sequence[Event]) -> list[Event]:
        """Publish admitted events; a turn not yet published from here is first checked
        against the turns this relay runs (live here, or on the shared bus)."""
        bus = self.bus
        published: list[Event] = []
        for event in events:
            if not self._received.may_publish(event):
                continue
            if event.is_run_terminal:
                bounded_add(self._finished, event.trace_id, self.max_turns)
            published.append(bus.publish(event))
        self.stats["events"] += len(published)
        return published

    # -- out of the request (async: admission and the turn records do I/O) -----------------

    async def deliver(self, events: Sequence[Event], timeout: float = 30.0) -> None:
        """Publish what :meth:`accept` answered (once admitted) and keep ``GET
        /turns/{id}`` in step: by the time this returns (or ``timeout`` passed), the
        turn's record says what its events said."""
        batch = self._batch(list(events))
        if not batch:
            return
        await self._outbox.put(batch)
        await self._records.drain(timeout)
