"""OTLP export of the same spans (DESIGN.md §1): BatchSpanProcessor -> OTLP exporter.

Switched on by the standard variables: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), protocol from ``OTEL_EXPORTER_OTLP_PROTOCOL``
(``grpc`` by default, ``http/protobuf``), batching from ``OTEL_BSP_*`` (read by the SDK),
``OTEL_TRACES_EXPORTER=none`` turns it off. The batch processor exports on its own
thread: the UI stream never waits on export.

``RELAY_CAPTURE_CONTENT=false`` wraps the exporter in :class:`ContentFilter`, which drops
prompts and answers from what leaves the process; the relay, the store and the UI keep
them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from relay.conventions import CONTENT_ATTRIBUTES, CONTENT_EVENTS
from relay.export.wrappers import WrapperSpanExporter


class ContentFilter(WrapperSpanExporter):
    """A SpanExporter that forwards spans without their content attributes."""

    def __init__(self, inner: SpanExporter, keys: frozenset[str] = CONTENT_ATTRIBUTES) -> None:
        super().__init__(inner)
        self.keys = keys

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return super().export([self._strip(s) for s in spans])

    def _strip(self, span: ReadableSpan) -> ReadableSpan:
        attrs = span.attributes or {}
        has_content_events = any(e.name in CONTENT_EVENTS for e in span.events)
        if not has_content_events and not any(k in attrs for k in self.keys):
            return span
        kept = {k: v for k, v in attrs.items() if k not in self.keys}
        events = [e for e in span.events if e.name not in CONTENT_EVENTS]
        return ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=kept,
            events=events,
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )


def otlp_exporter_from_env(environ: Mapping[str, str] | None = None) -> SpanExporter | None:
    """The OTLP exporter the standard variables describe, or None when export is off.

    The variables are read from ``environ`` (not only the process environment), so an app
    built from an explicit mapping exports where that mapping says.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() in ("none", ""):
        return None
    traces_endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not (traces_endpoint or endpoint):
        return None
    protocol = (
        (
            env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "grpc"
        )
        .strip()
        .lower()
    )
    headers = _headers(
        env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        insecure = (
            (
                env.get("OTEL_EXPORTER_OTLP_TRACES_INSECURE")
                or env.get("OTEL_EXPORTER_OTLP_INSECURE")
                or ""
            )
            .strip()
            .lower()
        )
        return OTLPSpanExporter(
            endpoint=traces_endpoint or endpoint,
            headers=headers or None,
            insecure=(insecure == "true") if insecure else None,
        )
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HTTPSpanExporter,
        )

        target = traces_endpoint or f"{(endpoint or '').rstrip('/')}/v1/traces"
        return HTTPSpanExporter(endpoint=target, headers=headers or None)
    raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: use grpc or http/protobuf")


def _headers(raw: str) -> dict[str, str]:
    pairs = (item.split("=", 1) for item in raw.split(",") if "=" in item)
    return {k.strip(): v.strip() for k, v in pairs}


def batch_processor(
    exporter: SpanExporter, environ: Mapping[str, str] | None = None, default_delay_ms: int = 5000
) -> BatchSpanProcessor:
    """A BatchSpanProcessor tuned by OTEL_BSP_* read from ``environ``."""
    env = os.environ if environ is None else environ

    def number(name: str, default: int) -> int:
        raw = env.get(name)
        return int(raw) if raw and raw.strip().isdigit() else default

    return BatchSpanProcessor(
        exporter,
        max_queue_size=number("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
        schedule_delay_millis=number("OTEL_BSP_SCHEDULE_DELAY", default_delay_ms),
        max_export_batch_size=number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
        export_timeout_millis=number("OTEL_BSP_EXPORT_TIMEOUT", 30000),
    )


def add_otlp_export(
    provider: TracerProvider,
    capture_content: bool,
    environ: Mapping[str, str] | None = None,
    wrap: Callable[[SpanExporter], SpanExporter] | None = None,
) -> SpanExporter | None:
    """Attach OTLP export to ``provider`` when the environment asks for it."""
    exporter = otlp_exporter_from_env(environ)
    if exporter is None:
        return None
    if wrap is not None:
        exporter = wrap(exporter)
    if not capture_content:
        exporter = ContentFilter(exporter)
    provider.add_span_processor(batch_processor(exporter, environ))
    return exporter
