"""Spans and metrics out: OTLP export with its exporter wrappers (:mod:`relay.export.otlp`,
on one base: :mod:`relay.export.wrappers`)
and the relay's own OpenTelemetry metrics (:mod:`relay.export.metrics`)."""
