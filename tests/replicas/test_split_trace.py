"""A run's spans split over two replicas' receivers (a round-robin balancer, where the
RUNBOOK asks for one that routes by trace id): the replica that gets the stray part says
so, once per trace, and counts it; it publishes nothing of a turn another replica streams.

Two replicas share Redis (the bus) and PostgreSQL, each with its OTLP/HTTP receiver. One
run of the made-up graph goes out through the real OTLP exporter, routed span by span as
a balancer that ignores trace ids would: everything to A but the run's root span, which
goes to B. A streams the run from its start marker; B, whose root could start the run
again, sees that another instance publishes that turn: it logs one warning naming the
trace, the turn and the likely cause, and counts it in
``relay.otlp.spans{outcome="published_elsewhere"}`` (before: the warning said the relay
ran that turn itself, and nothing counted it)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from relay import conventions as c
from tests.interop.conftest import wait_until
from tests.interop.spans import made_up_run

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite


class RootElsewhere(SpanProcessor):
    """A balancer that ignores trace ids: each span to ``rest``, the run's root to
    ``roots`` (each through its own real OTLP exporter)."""

    def __init__(self, rest: SpanProcessor, roots: SpanProcessor) -> None:
        self.rest = rest
        self.roots = roots

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        is_root = span.parent is None and c.TURN_ID in (span.attributes or {})
        (self.roots if is_root else self.rest).on_end(span)

    def shutdown(self) -> None:
        self.rest.shutdown()
        self.roots.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.rest.force_flush(timeout_millis) and self.roots.force_flush(timeout_millis)


def test_a_split_trace_is_said_and_counted_on_the_replica_with_the_stray_part(
    make_instance, redis_url: str, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    shared = {"RELAY_BUS": redis_url, "RELAY_STORE": postgres_url, "RELAY_OTLP_HTTP": "true"}
    a, b = make_instance("a", **shared), make_instance("b", **shared)

    def exporter_to(replica: Any) -> SimpleSpanProcessor:
        return SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{replica.url}/v1/traces"))

    provider = TracerProvider(resource=Resource.create({"service.name": "split-agent"}))
    provider.add_span_processor(RootElsewhere(exporter_to(a), exporter_to(b)))
    with caplog.at_level(logging.WARNING, logger="relay.receiver"):
        turn_id = made_up_run(provider, markers=True)
        provider.shutdown()
        wait_until(
            lambda: b.relay.receiver.stats["published_elsewhere"] == 1,
            what="B telling the split trace",
        )
    assert a.relay.receiver.stats["published_elsewhere"] == 0
    said = [
        r.getMessage() for r in caplog.records if "another instance publishes" in r.getMessage()
    ]
    assert len(said) == 1 and turn_id in said[0] and "route OTLP by trace id" in said[0]
    assert not any("runs or ran itself" in r.getMessage() for r in caplog.records)
    # A streamed the run from its start marker: its log is the turn's, on the shared bus
    assert a.relay.bus.has_turn(turn_id)
