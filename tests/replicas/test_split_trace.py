"""A run's spans split over two replicas' receivers (a round-robin balancer, where the
RUNBOOK asks for one that routes by trace id): the replica that gets the stray part says
so, once per trace, and counts it; it publishes nothing of a turn another replica streams,
and hands the part over to that replica, so that the turn still ends, once, truthfully.

Two replicas share Redis (the bus) and PostgreSQL, each with its OTLP/HTTP receiver. One
run of the made-up graph goes out through the real OTLP exporter, routed span by span as
a balancer that ignores trace ids would: everything to A but the run's root span, which
goes to B. A streams the run from its start marker; B, whose root could start the run
again, sees that another instance publishes that turn: it logs one warning naming the
trace, the turn and the likely cause, and counts it in
``relay.otlp.spans{outcome="published_elsewhere"}`` (before: the warning said the relay
ran that turn itself, and nothing counted it). B hands the root over to A
(relay/ingest/strays.py), which ends the run in the log it writes: readers on A and on B
get the one ``turn_completed``, at one seq, and both replicas' ``GET /turns/{id}`` say
``answered`` (before: A's record stayed ``running`` and every reader waited forever).
When A is gone by the time the root's end comes, B ends the run itself."""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

import httpx
import pytest
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from relay import conventions as c
from tests.interop.conftest import TurnReader, wait_until
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


class Cut(SpanProcessor):
    """Passes spans on to ``inner`` until :meth:`cut` (its replica is gone)."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.gone = threading.Event()

    def cut(self) -> None:
        self.gone.set()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if not self.gone.is_set():
            self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def exporter_to(replica: Any) -> SimpleSpanProcessor:
    return SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{replica.url}/v1/traces"))


def readers_on(replicas: list[Any], turn_id: str) -> tuple[list[TurnReader], Any]:
    """Readers of the turn on each replica, and a ``while_running`` hook that holds the
    run's first node until every reader has its ``node_started`` (each is attached to the
    live log, waiting for what comes next, before the run ends)."""
    readers = [TurnReader(r.url, turn_id) for r in replicas]

    def hold(node: str) -> None:
        if node != "plan":
            return
        for reader in readers:
            reader.start()
        for reader in readers:
            assert reader.wait_for("node_started", "plan"), reader.types()

    return readers, hold


def terminal_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The one terminal event among ``events`` (and it is the last, bar the trailer)."""
    ends = [e for e in events if e["type"] in ("turn_completed", "paused", "error")]
    assert len(ends) == 1, [e["type"] for e in events]
    assert events[-1] is ends[0] or events[-1]["type"] == "message_saved"
    return ends[0]


def status_on(replica: Any, turn_id: str) -> str:
    return str(httpx.get(f"{replica.url}/turns/{turn_id}", timeout=10).json()["status"])


def test_a_split_trace_is_said_and_counted_on_the_replica_with_the_stray_part(
    make_instance, redis_url: str, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    shared = {"RELAY_BUS": redis_url, "RELAY_STORE": postgres_url, "RELAY_OTLP_HTTP": "true"}
    a, b = make_instance("a", **shared), make_instance("b", **shared)

    provider = TracerProvider(resource=Resource.create({"service.name": "split-agent"}))
    provider.add_span_processor(RootElsewhere(exporter_to(a), exporter_to(b)))
    turn_id = uuid.uuid4().hex
    readers, hold = readers_on([a, b], turn_id)
    with caplog.at_level(logging.WARNING, logger="relay.receiver"):
        made_up_run(provider, turn_id=turn_id, markers=True, while_running=hold)
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
    # B handed the root over to A, which ended the run: one end, at one seq, for readers
    # on either replica, and the same log on both
    on_a, on_b = (reader.join() for reader in readers)
    end = terminal_of(on_a)
    assert end["type"] == "turn_completed" and end["response"]["status"] == "answered"
    assert terminal_of(on_b) == end
    assert on_a == on_b
    assert b.relay.receiver.stats["handed_over"] == 1
    assert b.relay.receiver.stats["ended_here"] == a.relay.receiver.stats["ended_here"] == 0
    for replica in (a, b):
        wait_until(lambda r=replica: status_on(r, turn_id) == "answered", what="the record")


def test_the_replica_with_the_runs_end_ends_it_when_the_publisher_is_gone(
    make_instance, redis_url: str, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    shared = {"RELAY_BUS": redis_url, "RELAY_STORE": postgres_url, "RELAY_OTLP_HTTP": "true"}
    a, b = make_instance("a", **shared), make_instance("b", **shared)

    to_a = Cut(exporter_to(a))
    provider = TracerProvider(resource=Resource.create({"service.name": "split-agent"}))
    provider.add_span_processor(RootElsewhere(to_a, exporter_to(b)))
    turn_id = uuid.uuid4().hex
    [reader], hold_reader = readers_on([b], turn_id)

    def hold(node: str) -> None:
        hold_reader(node)
        if node == "act":  # A publishes the run, and is gone before it ends
            a.stop()
            to_a.cut()
            wait_until(lambda: a.relay.handoffs.client is None, what="A gone")

    with caplog.at_level(logging.WARNING, logger="relay.receiver"):
        made_up_run(provider, turn_id=turn_id, markers=True, while_running=hold)
        provider.shutdown()
        events = reader.join(60)
    end = terminal_of(events)
    assert end["type"] == "turn_completed" and end["response"]["status"] == "answered"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert b.relay.receiver.stats["ended_here"] == 1
    assert b.relay.receiver.stats["handed_over"] == 0
    wait_until(lambda: status_on(b, turn_id) == "answered", what="the record on B")
    assert any("ended here" in r.getMessage() for r in caplog.records)
