"""The receiver's core: finished spans from OTLP -> the same mapping -> the bus and the store.

OTLP delivers a span once, when it ends. So for every received span the receiver feeds
the mapping its start *and* its end (the start view is the finished span without its end
facts, as the replay does), in the order the spans ran
(:func:`relay.mapping.feed.ordered_phases` within a batch), through the one loop every
path uses (:func:`relay.mapping.feed.feed`). A node's ``node_started`` therefore arrives
with its ``node_completed``, unless the agent sends start markers (docs/events.md, "Start
markers").

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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.mapping import MappingState, can_start_run
from relay.mapping.feed import END, Phase, as_live, feed, ordered_phases
from relay.spans import SpanRecord

if TYPE_CHECKING:
    from relay.bus.base import Bus
    from relay.store import SpanStore
    from relay.turns.records import TurnStore

log = logging.getLogger("relay.receiver")

#: how many spans one store write takes at most
STORE_BATCH = 2000


class _Seen:
    """A bounded set: two generations, the older dropped when the newer fills."""

    def __init__(self, capacity: int) -> None:
        self.half = max(1, capacity // 2)
        self.new: set[str] = set()
        self.old: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self.new or key in self.old

    def add(self, key: str) -> None:
        self.new.add(key)
        if len(self.new) >= self.half:
            self.old, self.new = self.new, set()

    def __len__(self) -> int:
        return len(self.new) + len(self.old)


@dataclasses.dataclass(slots=True)
class _Pending:
    since: float
    spans: list[SpanRecord] = dataclasses.field(default_factory=list)


class OTLPReceiver:
    def __init__(self, bus: Bus, turns: TurnStore, store: SpanStore,
                 running: Callable[[str], bool], *, pending_spans: int = 10_000,
                 pending_s: float = 600.0, dedup_spans: int = 200_000,
                 store_backlog: int = 50_000, max_turns: int = 10_000,
                 root_wait_s: float = 10.0) -> None:
        self.bus = bus
        self.turns = turns
        self.store = store
        self.running = running  # is this turn run by this relay itself?
        self.state = MappingState()
        self.pending_spans = pending_spans
        self.pending_s = pending_s
        self.store_backlog = store_backlog
        self.max_turns = max_turns
        self._seen = _Seen(dedup_spans)
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._pending_count = 0
        self._store_queue: deque[SpanRecord] = deque()
        self._store_wake: asyncio.Event | None = None
        self._store_task: asyncio.Task[None] | None = None
        self._storing = 0
        self.root_wait_s = root_wait_s
        self._deferred: dict[str, tuple[float, SpanRecord]] = {}  # trace -> its root's end
        self._sweeper: asyncio.Task[None] | None = None
        self._owned: OrderedDict[str, None] = OrderedDict()  # turns published from here
        self._ignored: OrderedDict[str, None] = OrderedDict()  # traces of turns run here
        self.stats = {"received": 0, "accepted": 0, "duplicates": 0, "rejected": 0,
                      "expired": 0, "events": 0, "stored": 0, "store_failures": 0,
                      "mapping_failures": 0}

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._store_wake = asyncio.Event()
        self._store_task = asyncio.create_task(self._store_writer(), name="otlp store writer")
        self._sweeper = asyncio.create_task(self._sweep_loop(), name="otlp receiver sweep")

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            events = self.sweep()
            if events:
                await self.remember(self._publish(events))

    async def stop(self, timeout: float = 5.0) -> None:
        task, self._store_task = self._store_task, None
        if task is None:
            return
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        deadline = time.monotonic() + timeout
        while (self._store_queue or self._storing) and time.monotonic() < deadline:
            assert self._store_wake is not None
            self._store_wake.set()
            await asyncio.sleep(0.02)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    # -- admission ------------------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why the relay cannot take spans now (HTTP 503 / gRPC UNAVAILABLE), or None."""
        if self._store_task is None:
            return "the OTLP receiver is not started"
        return self.bus.unavailable()

    def busy(self, count: int) -> bool:
        """True when ``count`` more spans would overflow the store queue (HTTP 429)."""
        return len(self._store_queue) + count > self.store_backlog

    # -- the work (on the event loop, no I/O) ---------------------------------------------

    def accept(self, records: Sequence[SpanRecord]) -> list[Event]:
        """Take finished spans: store them, map them, publish their events."""
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
        self._store_queue.extend(fresh)
        if self._store_wake is not None:
            self._store_wake.set()
        by_trace: dict[str, list[SpanRecord]] = {}
        for record in fresh:
            if c.START_OF in record.attributes:  # a marker after its span: nothing to add
                started = str(record.attributes[c.START_OF]).lower()
                if record.trace_id + started in self._seen and \
                        not any(r.span_id == started for r in fresh):
                    continue
            by_trace.setdefault(record.trace_id, []).append(record)
        events: list[Event] = []
        for trace_id, spans in by_trace.items():
            if trace_id in self._ignored or trace_id in self.state.ended:
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
        events += self.sweep()
        return self._publish(events)

    def _feed(self, spans: list[SpanRecord]) -> list[Event]:
        trace_id = spans[0].trace_id if spans else ""
        out = self._mapped(self._held_back(ordered_phases(spans)))
        deferred = self._deferred.get(trace_id)
        if deferred is not None and not self._open_spans(trace_id):
            del self._deferred[trace_id]
            out += self._mapped([(deferred[1], END, None)])
        return out

    def _mapped(self, phases: Iterable[Phase]) -> list[Event]:
        """The events of these phases; a phase that fails is counted and logged, and the
        others still map (a bad span must not cost its trace's other events)."""
        out: list[Event] = []
        feed(self.state, phases, out.append, read=as_live, on_failure=self._failed)
        return out

    def _failed(self, record: SpanRecord, exc: Exception) -> None:
        self.stats["mapping_failures"] += 1
        log.exception("relay: mapping received span %r failed", record.name)

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
                log.warning("relay: run of trace %s ends without spans it announced "
                            "(never received)", trace_id)
                events += self._mapped([(record, END, None)])
        while self._pending:
            trace_id, pending = next(iter(self._pending.items()))
            if self._pending_count <= self.pending_spans and now - pending.since < self.pending_s:
                break
            del self._pending[trace_id]
            self._pending_count -= len(pending.spans)
            self.stats["expired"] += len(pending.spans)
            log.info("relay: %d received span(s) of trace %s never met a run root; "
                     "dropped from the live path (they are stored)", len(pending.spans),
                     trace_id)
        return events

    def _publish(self, events: list[Event]) -> list[Event]:
        bus = self.bus
        published: list[Event] = []
        for event in events:
            if event.trace_id in self._ignored:
                continue
            if event.type == ev.GRAPH_TOPOLOGY and event.turn_id not in self._owned:
                if self.running(event.turn_id) or bus.has_turn(event.turn_id):
                    log.warning("relay: received spans of turn %s, which this relay runs "
                                "itself; not published twice", event.turn_id)
                    _bounded_add(self._ignored, event.trace_id, self.max_turns)
                    continue
                _bounded_add(self._owned, event.turn_id, self.max_turns)
            published.append(bus.publish(event))
        self.stats["events"] += len(published)
        return published

    # -- turn records (async: the turn store does I/O) -------------------------------------

    async def remember(self, events: Sequence[Event]) -> None:
        """Keep GET /turns/{id} in step with received turns."""
        from relay.turns.foreign import record_received_events

        await record_received_events(self.turns, events)

    # -- the store ------------------------------------------------------------------------

    async def _store_writer(self) -> None:
        assert self._store_wake is not None
        store = self.store
        while True:
            await self._store_wake.wait()
            self._store_wake.clear()
            while self._store_queue:
                batch = [self._store_queue.popleft()
                         for _ in range(min(STORE_BATCH, len(self._store_queue)))]
                self._storing = len(batch)
                try:
                    await asyncio.to_thread(store.write, batch)
                    self.stats["stored"] += len(batch)
                except Exception:
                    self.stats["store_failures"] += len(batch)
                    log.exception("relay: could not store %d received span(s)", len(batch))
                finally:
                    self._storing = 0


def _bounded_add(items: OrderedDict[str, None], key: str, limit: int) -> None:
    items[key] = None
    items.move_to_end(key)
    while len(items) > limit:
        items.popitem(last=False)
