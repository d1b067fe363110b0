"""RelaySpanProcessor: span start/end -> the bus, without costing the agent anything.

The hot path (``on_start``/``on_end``, on whatever thread the agent runs) does O(1) work:
append ``(span, ended)`` to a deque and, when no drain is pending, schedule one on the
event loop (on the loop thread the drain's one handle back on asyncio's ready queue, as
``call_soon`` would put a new one; ``call_soon_threadsafe`` from any other thread). It
holds no lock, does no I/O, and never raises into the agent: every failure is counted
and swallowed. The drain runs on the loop: it feeds the queued phases to the mapping
through the one loop every path uses (:func:`relay.mapping.feed.feed`) and publishes
the events, in the exact order the spans started and ended.

Bounded: at most ``max_pending`` spans wait for the loop; past that new ones are dropped
and counted in ``dropped`` (a loop that far behind has bigger problems, and the agent
must not be slowed to wait for it).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from functools import partial
from itertools import islice
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.util.types import AttributeValue

from relay.events import Event
from relay.ingest.live import HexIds, live_record
from relay.mapping.feed import END, EVENT, START, feed
from relay.mapping.state import MappingState

log = logging.getLogger("relay.processor")

#: (span, phase, span event or None); phase: START, EVENT or END (relay.mapping.feed)
_Phase = tuple[ReadableSpan, str, dict[str, Any] | None]


class RelaySpanProcessor(SpanProcessor):
    """An OpenTelemetry span processor that turns the spans it sees into events, live.

    Add it to the tracer provider the graph's spans come from; each span's start, end
    and span events (through :meth:`add_event`) are mapped to events
    (:func:`relay.mapping.feed.feed`) and handed to ``publish`` on the event loop it is
    bound to. Spans that arrive while it is unbound are dropped and counted. A
    :class:`relay.Relay` makes one (``relay.span_processor``, publishing to its bus),
    adds it to ``relay.tracer_provider`` and binds it when it starts; by hand::

        processor = RelaySpanProcessor(bus.publish)
        provider.add_span_processor(processor)
        processor.bind(asyncio.get_running_loop())  # on the loop that owns the bus
        ...
        processor.unbind()  # on the loop: drains what is queued; later spans are dropped

    ``dropped`` and ``failures`` count what it could not hand over; it never raises into
    the thread that started or ended the span.
    """

    def __init__(
        self,
        publish: Callable[[Event], object],
        *,
        max_pending: int = 100_000,
    ) -> None:
        self._publish = publish
        self._pending: deque[_Phase] = deque()
        self._max_pending = max_pending
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._ready: Callable[[], None] | None = None  # the drain's handle to the loop: bind
        self._context = contextvars.Context()  # the drain's: empty, its own
        self.state = MappingState()
        self._ids = HexIds()  # the drain's id table (relay/ingest/live.py)
        #: what the mapping reads of a span at a phase (partial: no Python frame between)
        self._read = partial(live_record, ids=self._ids)
        self.dropped = 0
        self.failures = 0

    # -- wiring -------------------------------------------------------------------------

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to the event loop that owns the bus. Call from that loop's thread."""
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._scheduled = False
        # The drain's handle, made once and put back on the loop's ready queue for each
        # drain: what ``call_soon`` does, without its four Python calls and a new handle
        # per drain. Only on asyncio's own loops (their ``_ready`` deque), not in debug
        # mode (its checks are call_soon's); any other loop gets call_soon. The drain runs
        # in a context of its own, never in the agent's that happened to end a span.
        ready = getattr(loop, "_ready", None)
        fast = (
            isinstance(loop, asyncio.BaseEventLoop)
            and type(ready) is deque
            and not loop.get_debug()
        )
        self._ready = (
            partial(ready.append, asyncio.Handle(self._drain, (), loop, self._context))
            if fast and ready is not None
            else None
        )

    def unbind(self) -> None:
        self.flush()
        self._loop = None
        self._loop_thread = None
        self._ready = None

    # -- the hot path -------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:  # _enqueue, inlined (twice per span)
            pending = self._pending
            if self._loop is None or len(pending) >= self._max_pending:
                self.dropped += 1
                return
            pending.append((span, START, None))
            if not self._scheduled:
                self._schedule()
        except Exception:
            self.failures += 1

    def on_end(self, span: ReadableSpan) -> None:
        try:  # _enqueue, inlined (twice per span)
            pending = self._pending
            if self._loop is None or len(pending) >= self._max_pending:
                self.dropped += 1
                return
            pending.append((span, END, None))
            if not self._scheduled:
                self._schedule()
        except Exception:
            self.failures += 1

    def add_event(
        self, span: Span, name: str, attributes: Mapping[str, AttributeValue] | None = None
    ) -> None:
        """Record a span event and hand it to the relay, in one call.

        A span processor never sees ``span.add_event``; what the UI must see while the
        span runs (text as it is written: ``gen_ai.content.delta``) goes through here. The
        event lands on the span, so the store, the OTLP export and the replay have it, and
        reaches the bus now. Same hot-path rules as ``on_start``: O(1), never raises."""
        try:
            timestamp = time.time_ns()
            span.add_event(name, attributes, timestamp=timestamp)
            self._enqueue(
                span,
                EVENT,
                {"name": name, "time_ns": timestamp, "attributes": dict(attributes or {})},
            )
        except Exception:
            self.failures += 1

    def _enqueue(self, span: ReadableSpan, phase: str, event: dict[str, Any] | None) -> None:
        try:
            pending = self._pending
            if self._loop is None or len(pending) >= self._max_pending:
                self.dropped += 1
                return
            pending.append((span, phase, event))  # first: a drain from now on takes it
            if not self._scheduled:
                self._schedule()
        except Exception:  # never into the agent (e.g. the loop closed under us)
            self.failures += 1

    def _schedule(self) -> None:
        """Schedule a drain (none is pending): on the loop's thread, the drain's handle
        back on its ready queue (see :meth:`bind`) or ``call_soon``; from any other,
        ``call_soon_threadsafe``. Raises what they raise (a closed loop)."""
        loop = self._loop
        assert loop is not None
        self._scheduled = True
        try:
            if threading.get_ident() != self._loop_thread:
                loop.call_soon_threadsafe(self._drain, context=self._context)
            elif self._ready is None:
                loop.call_soon(self._drain, context=self._context)
            elif loop.is_closed():
                raise RuntimeError("Event loop is closed")
            else:
                self._ready()
        except Exception:
            self._scheduled = False  # no drain is coming: let the next span try again
            raise

    # -- on the loop --------------------------------------------------------------------

    def _drain(self) -> None:
        """Map the phases queued when it begins, each taken off the queue as the feed asks
        for it (``popleft`` in C, no generator): a phase the agent's threads append from
        here on schedules the next drain, and a phase is never seen twice."""
        self._scheduled = False  # before draining: a span appended from now on reschedules
        # publish inside feed's try: a bus that raises costs that span, never the drain
        pending = self._pending
        feed(
            self.state,
            islice(iter(pending.popleft, None), len(pending)),
            self._publish,
            read=self._read,
            on_failure=self._failed,
        )

    def _failed(self, span: ReadableSpan, exc: Exception) -> None:
        """A phase that could not be mapped or published: counted and logged, and the
        drain goes on (nothing reaches the agent's thread from here anyway)."""
        self.failures += 1
        log.exception("relay: mapping span %r failed", getattr(span, "name", "?"))

    def flush(self) -> None:
        """Drain now. Only on the loop thread (e.g. before reading the bus in a test)."""
        if self._loop_thread == threading.get_ident():
            self._drain()

    # -- SpanProcessor ------------------------------------------------------------------

    def shutdown(self) -> None:
        self.unbind()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flush()
        return True
