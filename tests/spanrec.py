"""Span recording helpers shared by the unit tests (imported by conftest and tests).

A real OpenTelemetry SDK pipeline that records span starts and ends exactly as a span
processor sees them, and feeds them to the mapping in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import Tracer

from relay.events import Event
from relay.mapping import MappingState, map_span
from relay.spans import SpanRecord, from_sdk_span


class RecordingProcessor(SpanProcessor):
    """Builds the mapping's records at the moment the SDK calls the processor.

    ``on_start`` reads the span as it is at start (only start attributes), which is
    what a processor is guaranteed to see (DESIGN.md §3).
    """

    def __init__(self) -> None:
        self.records: list[tuple[SpanRecord, bool]] = []
        self.started: list[tuple[str, dict]] = []  # (name, attributes at start)
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append((span.name, dict(span.attributes or {})))
        self.records.append((from_sdk_span(span, False), False))

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)
        self.records.append((from_sdk_span(span, True), True))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def span(self, name: str) -> ReadableSpan:
        matches = [s for s in self.ended if s.name == name]
        assert len(matches) == 1, f"expected one ended span {name!r}, got {len(matches)}"
        return matches[0]


def feed(records: list[tuple[SpanRecord, bool]], state: MappingState | None = None) -> list[Event]:
    state = MappingState() if state is None else state
    out: list[Event] = []
    for record, ended in records:
        out.extend(map_span(state, record, ended))
    return out


@dataclass
class Tracing:
    provider: TracerProvider
    tracer: Tracer
    recorder: RecordingProcessor
    extra: list[SpanProcessor] = field(default_factory=list)

    def events(self) -> list[Event]:
        return feed(self.recorder.records)

    def types(self) -> list[str]:
        return [e.type for e in self.events()]
