"""Relay metrics as OpenTelemetry metrics; a Prometheus scrape endpoint when enabled.

``RELAY_METRICS=prometheus`` turns them on and serves ``GET /metrics``; otherwise every
instrument is a no-op (no cost on the hot path). The instruments:

- ``relay.streams.open`` (up-down counter): SSE/NDJSON streams open now;
- ``relay.events.published`` (counter, by ``type``): events appended to the bus;
- ``relay.bus.lag`` (histogram, ms): from the span time an event carries to its publish;
- ``relay.readers.cut`` (counter, by ``reason``): streams that ended before their
  terminal event: ``gone`` (the client left, or stalled past the send timeout) or
  ``handoff`` (told to reconnect);
- ``relay.turns.recovered`` (counter, by ``outcome``): turns taken over from an instance
  that was gone (its lease ran out, it handed them over, or it started again):
  ``recovered`` (from the checkpoint), else ``unsafe``, ``exhausted`` or ``ended``
  (``interrupted``);
- ``relay.spans.dropped`` (observable counter): spans the processor could not hand on;
- ``relay.export.failures`` (counter): OTLP export batches that failed;
- with the OTLP receiver, ``relay.otlp.spans`` (observable counter, by ``outcome``):
  spans ``received``, ``accepted``, ``duplicates``, ``rejected``, ``expired`` (never met
  their run's root), ``late`` (came after their run ended), ``stored``, ...;
- with the Redis bus, ``relay.bus.unwritten`` (observable gauge): events published here
  and not in Redis yet, and ``relay.bus.lost`` (observable counter): ``what=events``,
  events that left the local log before they reached Redis (other instances' readers
  meet them as a gap); ``what=log``, each time Redis was found to have lost its data (a
  restart without persistence: the readers were told, the owners wrote their logs again).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry.metrics import CallbackOptions, MeterProvider, NoOpMeterProvider, Observation
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from relay.events import Event
from relay.export.wrappers import WrapperSpanExporter

if TYPE_CHECKING:
    from relay.bus.base import Bus


class RelayMetrics:
    def __init__(
        self,
        provider: MeterProvider | None = None,
        dropped: Callable[[], int] = lambda: 0,
        bus: Bus | None = None,
    ) -> None:
        self.enabled = provider is not None
        meter = self._meter = (provider or NoOpMeterProvider()).get_meter("span-relay")
        self.open_streams = meter.create_up_down_counter(
            "relay.streams.open", description="streams open now"
        )
        self.events = meter.create_counter(
            "relay.events.published", description="events appended to the bus"
        )
        self.bus_lag = meter.create_histogram(
            "relay.bus.lag", unit="ms", description="span time to publish"
        )
        self.readers_cut = meter.create_counter(
            "relay.readers.cut", description="streams ended before their terminal event"
        )
        self.recovered = meter.create_counter(
            "relay.turns.recovered",
            description="turns taken over from an instance that is gone, by outcome",
        )
        self.export_failures = meter.create_counter(
            "relay.export.failures", description="OTLP export batches that failed"
        )

        def observe_dropped(options: CallbackOptions) -> Iterable[Observation]:
            yield Observation(dropped())

        meter.create_observable_counter(
            "relay.spans.dropped",
            callbacks=[observe_dropped],
            description="spans not handed to the event loop",
        )
        if bus is not None and bus.shared:  # the Redis bus: a writer that can fall behind

            def observe_unwritten(options: CallbackOptions) -> Iterable[Observation]:
                yield Observation(bus.backlog)

            def observe_lost(options: CallbackOptions) -> Iterable[Observation]:
                yield Observation(bus.lost, {"what": "events"})
                yield Observation(bus.losses, {"what": "log"})

            meter.create_observable_gauge(
                "relay.bus.unwritten",
                callbacks=[observe_unwritten],
                description="events not in Redis yet",
            )
            meter.create_observable_counter(
                "relay.bus.lost",
                callbacks=[observe_lost],
                description="what the shared bus lost: events that never reached Redis "
                "(what=events), and each time Redis was found without its data (what=log)",
            )

    def observe_receiver(self, stats: Callable[[], Mapping[str, int]]) -> None:
        """``relay.otlp.spans``: the OTLP receiver's span counts, by outcome."""

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            for outcome, count in stats().items():
                yield Observation(count, {"outcome": outcome})

        self._meter.create_observable_counter(
            "relay.otlp.spans",
            callbacks=[observe],
            description="spans the OTLP receiver took, by outcome (late: after their run)",
        )

    def published(self, event: Event) -> None:
        if self.enabled:
            self.events.add(1, {"type": event.type})
            self.bus_lag.record(max(0.0, time.time() * 1000 - event.ts))

    def turn_recovered(self, outcome: str) -> None:
        """A turn whose instance was gone was taken over: ``recovered`` (from its
        checkpoint), ``unsafe`` (a tool was running, or the cut run's log is gone),
        ``exhausted`` (past RELAY_RECOVERY_MAX_ATTEMPTS) or ``ended`` (recovery off, or
        no graph here runs it); all but the first end the turn ``interrupted``."""
        self.recovered.add(1, {"outcome": outcome})

    def stream_opened(self) -> None:
        self.open_streams.add(1)

    def stream_closed(self, outcome: str) -> None:
        self.open_streams.add(-1)
        if outcome != "done":
            self.readers_cut.add(1, {"reason": outcome})


class CountingExporter(WrapperSpanExporter):
    """Counts failed export batches in ``relay.export.failures``, then delegates."""

    def __init__(self, inner: SpanExporter, metrics: RelayMetrics) -> None:
        super().__init__(inner)
        self.metrics = metrics

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.metrics.export_failures.add(1)
        return result


def prometheus_provider() -> MeterProvider:
    """A MeterProvider whose reader feeds prometheus_client's default registry."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider as SDKMeterProvider

    return SDKMeterProvider(metric_readers=[PrometheusMetricReader()])
