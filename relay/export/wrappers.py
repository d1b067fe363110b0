"""The one base for exporter wrappers: a SpanExporter that hands every call to the
exporter it wraps (as Logfire's wrapper exporters do). A wrapper overrides what it
changes (the content filter, :class:`relay.export.otlp.ContentFilter`, edits the spans;
the counting exporter, :class:`relay.export.metrics.CountingExporter`, counts failures)
and inherits the rest."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class WrapperSpanExporter(SpanExporter):
    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export(spans)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
