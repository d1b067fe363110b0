"""Spans and metrics out: OTLP export with its exporter wrappers (:mod:`relay.export.otlp`)
and the relay's own OpenTelemetry metrics (:mod:`relay.export.metrics`)."""
