"""SpanStoreExporter: an OpenTelemetry SpanExporter that writes SDK spans to a SpanStore.

Attach it through a ``BatchSpanProcessor`` (see :func:`add_span_store`): the processor
hands it finished spans on its own worker thread, so the store's I/O never runs on the
agent's thread or the event loop. Each batch is one transaction. A failure is logged and
reported as ``FAILURE`` (the batch is dropped, as for any exporter); it never raises.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from relay.spans import from_sdk_span
from relay.store import SpanStore

log = logging.getLogger("relay.store")

#: the batch processor's schedule delay: short, so a replay right after a turn finds it
SCHEDULE_DELAY_MS = 100


class SpanStoreExporter(SpanExporter):
    def __init__(self, store: SpanStore) -> None:
        self.store = store
        self.failures = 0
        self.written = 0
        self._shutdown = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            self.written += self.store.write([from_sdk_span(s, ended=True) for s in spans])
            return SpanExportResult.SUCCESS
        except Exception:
            self.failures += 1
            log.exception("relay: could not store %d span(s)", len(spans))
            return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        """Stop accepting batches. The store belongs to the Relay, which closes it."""
        self._shutdown = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def add_span_store(
    provider: TracerProvider, store: SpanStore, schedule_delay_millis: int = SCHEDULE_DELAY_MS
) -> BatchSpanProcessor:
    """Persist every finished span of ``provider`` to ``store``; returns the processor."""
    processor = BatchSpanProcessor(
        SpanStoreExporter(store), schedule_delay_millis=schedule_delay_millis
    )
    provider.add_span_processor(processor)
    return processor
