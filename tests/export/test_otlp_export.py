"""The same spans go out over OTLP: a small in-test OTLP/gRPC receiver collects them."""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import httpx
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.conftest import events_of, stream_post


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list = []
        self.lock = threading.Lock()

    def Export(self, request, context):
        with self.lock:
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(scope_spans.spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def wait_for(self, count: int, timeout: float = 10.0) -> list:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.05)
        raise AssertionError(f"only {len(self.spans)} spans arrived")


def start_collector() -> tuple[grpc.Server, Collector, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    collector = Collector()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, collector, port


def attrs(span) -> dict:
    return {kv.key: kv.value for kv in span.attributes}


def test_exported_node_spans_are_the_streamed_ones(make_server) -> None:
    grpc_server, collector, port = start_collector()
    try:
        server = make_server(
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
            OTEL_EXPORTER_OTLP_INSECURE="true",
            OTEL_BSP_SCHEDULE_DELAY="50",
        )
        with httpx.Client(timeout=30) as client:
            events = events_of(
                stream_post(client, f"{server.url}/chat", {"message": "How do refunds work?"})
            )
        streamed = {e["span_id"] for e in events if e["type"] == "node_started"}
        # root + 4 nodes + 4 children (guardrail, retrieval, chat, guardrail)
        spans = collector.wait_for(9)
        node_spans = {s.span_id.hex() for s in spans if attrs(s).get("relay.node.name")}
        assert node_spans == streamed
        assert {s.trace_id.hex() for s in spans} == {events[0]["trace_id"]}
        root = next(s for s in spans if s.name == "invoke_agent support_agent")
        assert attrs(root)["relay.turn.response"].string_value  # content is kept by default
    finally:
        grpc_server.stop(0)


def test_capture_content_false_strips_only_the_export(make_server) -> None:
    grpc_server, collector, port = start_collector()
    try:
        server = make_server(
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
            OTEL_EXPORTER_OTLP_INSECURE="true",
            OTEL_BSP_SCHEDULE_DELAY="50",
            RELAY_CAPTURE_CONTENT="false",
        )
        with httpx.Client(timeout=30) as client:
            events = events_of(
                stream_post(client, f"{server.url}/chat", {"message": "How do refunds work?"})
            )
        assert events[-1]["response"]["answer"]  # the UI keeps the content
        spans = collector.wait_for(9)
        root = next(s for s in spans if s.name == "invoke_agent support_agent")
        exported = attrs(root)
        assert "relay.turn.response" not in exported
        assert "relay.turn.message" not in exported
        assert exported["relay.turn.outcome"].string_value == "answered"
        assert exported["relay.turn.id"].string_value == events[0]["turn_id"]
    finally:
        grpc_server.stop(0)
