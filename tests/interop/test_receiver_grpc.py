"""OTLP/gRPC receiver: the Python gRPC exporter (plain and gzip), duplicates, garbage
and the bearer token, on the relay's own event loop."""

from __future__ import annotations

import uuid

import grpc
import httpx
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.interop.conftest import TurnReader, assert_well_formed, live_check, read_turn
from tests.interop.spans import Collecting, made_up_run, provider_with
from tests.interop.test_receiver_http import FULL


def exporter_for(server, **kwargs) -> OTLPSpanExporter:
    return OTLPSpanExporter(
        endpoint=server.relay.settings.otlp_grpc, insecure=True, timeout=5, **kwargs
    )


def test_grpc_exporter_with_markers_streams_live(relay_server) -> None:
    provider = provider_with(exporter_for(relay_server))
    turn_id = uuid.uuid4().hex
    reader = TurnReader(relay_server.url, turn_id).start()
    hold, seen = live_check(reader)
    made_up_run(provider, turn_id=turn_id, markers=True, while_running=hold)
    provider.shutdown()
    events = reader.join()
    assert reader.types() == FULL
    assert_well_formed(events)
    # each node_started reached the reader while its node still ran (held until it did)
    for node in ("plan", "act"):
        assert f"node_started:{node}" in seen[node], seen
        assert f"node_completed:{node}" not in seen[node], seen


def test_grpc_gzip(relay_server) -> None:
    provider = provider_with(exporter_for(relay_server, compression=grpc.Compression.Gzip))
    turn_id = made_up_run(provider, markers=False)
    provider.shutdown()
    assert [e["type"] for e in read_turn(relay_server.url, turn_id)] == FULL


def _stub(server) -> trace_service_pb2_grpc.TraceServiceStub:
    channel = grpc.insecure_channel(server.relay.settings.otlp_grpc)
    return trace_service_pb2_grpc.TraceServiceStub(channel)


def _request(spans) -> trace_service_pb2.ExportTraceServiceRequest:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(list(spans))


def test_grpc_duplicates_and_rejected_spans(relay_server) -> None:
    exporter = Collecting()
    provider = provider_with(exporter)
    turn_id = made_up_run(provider, markers=True)
    provider.shutdown()
    stub = _stub(relay_server)
    request = _request(exporter.spans)
    first = stub.Export(request, timeout=5)
    again = stub.Export(request, timeout=5)
    assert first.partial_success.rejected_spans == 0
    assert again.partial_success.rejected_spans == 0
    bad = _request(exporter.spans[:1])
    bad.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x00" * 16
    rejected = stub.Export(bad, timeout=5)
    assert rejected.partial_success.rejected_spans == 1
    assert "trace_id" in rejected.partial_success.error_message
    events = read_turn(relay_server.url, turn_id)
    assert [e["type"] for e in events] == FULL


def test_grpc_garbage_is_refused_and_the_server_stays_healthy(relay_server) -> None:
    channel = grpc.insecure_channel(relay_server.relay.settings.otlp_grpc)
    call = channel.unary_unary(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    try:
        call(b"\xff\xff\xff\xff garbage", timeout=5)
    except grpc.RpcError as exc:
        assert exc.code() in (
            grpc.StatusCode.INTERNAL,
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.UNKNOWN,
        )
    else:
        raise AssertionError("garbage was accepted")
    assert httpx.get(f"{relay_server.url}/healthz").status_code == 200
    provider = provider_with(exporter_for(relay_server))
    turn_id = made_up_run(provider)
    provider.shutdown()
    assert read_turn(relay_server.url, turn_id)[-1]["type"] == "turn_completed"


def test_grpc_requires_the_token_when_set(make_relay) -> None:
    server = make_relay(RELAY_API_TOKEN="s3cret")
    exporter = Collecting()
    provider = provider_with(exporter)
    made_up_run(provider)
    provider.shutdown()
    assert exporter_for(server).export(exporter.spans) == SpanExportResult.FAILURE
    assert server.relay.receiver.stats["received"] == 0
    good = exporter_for(server, headers={"authorization": "Bearer s3cret"})
    assert good.export(exporter.spans) == SpanExportResult.SUCCESS
    assert server.relay.receiver.stats["accepted"] == len(exporter.spans)
