"""RelaySpanProcessor: span start/end -> the bus, without costing the agent anything.

The hot path (``on_start``/``on_end``, on whatever thread the agent runs) does O(1) work:
append ``(span, ended)`` to a deque and, when no drain is pending, schedule one on the
event loop (a direct ``call_soon`` on the loop thread, ``call_soon_threadsafe`` from any
other). It holds no lock, does no I/O, and never raises into the agent: every failure is
counted and swallowed. The drain runs on the loop: it turns each span into events with
:func:`relay.mapping.map_span` and publishes them, in the exact order the spans started
and ended.

Bounded: at most ``max_pending`` spans wait for the loop; past that new ones are dropped
and counted in ``dropped`` (a loop that far behind has bigger problems, and the agent
must not be slowed to wait for it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.util.types import AttributeValue

from relay.events import Event
from relay.mapping import MappingState, map_span, map_span_event
from relay.spans import live_record

log = logging.getLogger("relay.processor")

_START, _END, _EVENT = 0, 1, 2


class RelaySpanProcessor(SpanProcessor):
    def __init__(
        self,
        publish: Callable[[Event], object],
        *,
        max_pending: int = 100_000,
    ) -> None:
        self._publish = publish
        # (span, phase, span event or None); phase: _START, _END or _EVENT
        self._pending: deque[tuple[ReadableSpan, int, dict[str, Any] | None]] = deque()
        self._max_pending = max_pending
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self.state = MappingState()
        self.dropped = 0
        self.failures = 0

    # -- wiring -------------------------------------------------------------------------

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to the event loop that owns the bus. Call from that loop's thread."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def unbind(self) -> None:
        self.flush()
        self._loop = None
        self._loop_thread = None

    # -- the hot path -------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._enqueue(span, _START, None)

    def on_end(self, span: ReadableSpan) -> None:
        self._enqueue(span, _END, None)

    def add_event(self, span: Span, name: str,
                  attributes: Mapping[str, AttributeValue] | None = None) -> None:
        """Record a span event and hand it to the relay, in one call.

        A span processor never sees ``span.add_event``; what the UI must see while the
        span runs (text as it is written: ``gen_ai.content.delta``) goes through here. The
        event lands on the span, so the store, the OTLP export and the replay have it, and
        reaches the bus now. Same hot-path rules as ``on_start``: O(1), never raises."""
        try:
            timestamp = time.time_ns()
            span.add_event(name, attributes, timestamp=timestamp)
            self._enqueue(span, _EVENT, {"name": name, "time_ns": timestamp,
                                         "attributes": dict(attributes or {})})
        except Exception:
            self.failures += 1

    def _enqueue(self, span: ReadableSpan, phase: int, event: dict[str, Any] | None) -> None:
        try:
            loop = self._loop
            if loop is None or len(self._pending) >= self._max_pending:
                self.dropped += 1
                return
            self._pending.append((span, phase, event))
            if self._scheduled:
                return
            self._scheduled = True
            try:
                if threading.get_ident() == self._loop_thread:
                    loop.call_soon(self._drain)
                else:
                    loop.call_soon_threadsafe(self._drain)
            except Exception:
                self._scheduled = False  # no drain is coming: let the next span try again
                raise
        except Exception:  # never into the agent (e.g. the loop closed under us)
            self.failures += 1

    # -- on the loop --------------------------------------------------------------------

    def _drain(self) -> None:
        self._scheduled = False  # before draining: a span appended from now on reschedules
        pending = self._pending
        while pending:
            span, phase, span_event = pending.popleft()
            try:
                if span_event is not None:
                    events = map_span_event(self.state, live_record(span, False), span_event)
                else:
                    ended = phase == _END
                    events = map_span(self.state, live_record(span, ended), ended)
                for event in events:
                    self._publish(event)
            except Exception:
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
