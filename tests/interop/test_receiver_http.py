"""OTLP/HTTP receiver: the Python exporter (protobuf, gzip), OTLP/JSON, duplicates,
out-of-order batches, bad payloads, limits, back-pressure and auth, on a real uvicorn."""

from __future__ import annotations

import gzip
import json
import threading
import uuid

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from relay import conventions as c
from tests.interop.conftest import (
    TurnReader,
    assert_well_formed,
    live_check,
    read_turn,
    wait_until,
)
from tests.interop.spans import (
    Collecting,
    json_body,
    made_up_run,
    protobuf_body,
    provider_with,
)

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}

FULL = [
    "graph_topology",
    "node_started",
    "node_completed",
    "node_started",
    "tool_started",
    "tool_completed",
    "node_completed",
    "turn_completed",
]


def collected(markers: bool = False, **kwargs) -> tuple[str, list]:
    exporter = Collecting()
    provider = provider_with(exporter)
    turn_id = made_up_run(provider, markers=markers, **kwargs)
    provider.shutdown()
    return turn_id, exporter.spans


def post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{url}/v1/traces", content=body, headers=headers, timeout=10)


def test_python_exporter_with_start_markers_streams_nodes_live(relay_server) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces")
    provider = provider_with(exporter)
    turn_id = uuid.uuid4().hex
    reader = TurnReader(relay_server.url, turn_id).start()
    hold, seen = live_check(reader)
    made_up_run(provider, turn_id=turn_id, markers=True, while_running=hold)
    provider.shutdown()
    events = reader.join()
    assert reader.types() == FULL
    assert_well_formed(events)
    topology = events[0]
    plan_started = events[1]
    plan_done = events[2]
    assert topology["graph_id"] == "made_up" and topology["thread_id"] == "ext-thread"
    assert [n["id"] for n in topology["nodes"]] == ["__start__", "plan", "act", "__end__"]
    assert plan_started["node"] == "plan" and plan_started["step"] == 1
    assert plan_started["task_id"] == "task-1"
    assert plan_done["summary"] == {"model": "tiny-model", "input_tokens": 11, "output_tokens": 4}
    assert events[4]["node"] == "act" and events[4]["tool"] == "lookup"
    assert events[-1]["response"]["answer"] == "done"
    # the marker made node_started arrive while the node ran, before its span ended
    for node in ("plan", "act"):
        assert f"node_started:{node}" in seen[node], seen
        assert f"node_completed:{node}" not in seen[node], seen
    # the turn is a turn of this relay now: GET /turns/{id} has its outcome
    record = httpx.get(f"{relay_server.url}/turns/{turn_id}").json()
    assert record["status"] == "answered" and record["thread_id"] == "ext-thread"
    stats = relay_server.relay.receiver.stats
    assert stats["duplicates"] == 0 and stats["rejected"] == 0


def test_received_spans_are_stored_and_replay_equals_live(relay_server) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces")
    provider = provider_with(exporter)
    turn_id = made_up_run(provider, markers=True)
    provider.shutdown()
    live = read_turn(relay_server.url, turn_id)
    receiver = relay_server.relay.receiver
    wait_until(lambda: receiver.stats["stored"] == receiver.stats["accepted"], what="stored")
    with httpx.stream(
        "GET", f"{relay_server.url}/turns/{turn_id}/events?source=spans&speed=0", timeout=10
    ) as response:
        assert response.status_code == 200, response.read()
        replayed = [
            json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")
        ]
    assert replayed == live


def test_gzip_without_markers_gives_every_event_at_the_end(relay_server) -> None:
    exporter = OTLPSpanExporter(
        endpoint=f"{relay_server.url}/v1/traces", compression=Compression.Gzip
    )
    provider = provider_with(exporter)
    turn_id = made_up_run(provider, markers=False)
    provider.shutdown()
    events = read_turn(relay_server.url, turn_id)
    assert [e["type"] for e in events] == FULL
    assert_well_formed(events)


def test_otlp_json_with_hex_ids(relay_server) -> None:
    turn_id, spans = collected(markers=True)
    response = post(relay_server.url, json_body(spans), JSON)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {}
    events = read_turn(relay_server.url, turn_id)
    assert [e["type"] for e in events] == FULL


def test_otlp_json_with_base64_ids_is_rejected_span_by_span(relay_server) -> None:
    turn_id, spans = collected()
    response = post(relay_server.url, json_body(spans, hex_ids=False), JSON)
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == str(len(spans))
    assert "hex" in partial["errorMessage"] and "base64" in partial["errorMessage"]
    assert httpx.get(f"{relay_server.url}/turns/{turn_id}/events").status_code == 404


def test_duplicate_delivery_is_published_once(relay_server) -> None:
    turn_id, spans = collected(markers=True)
    body = protobuf_body(spans)
    for _ in range(3):  # an exporter that retried twice
        assert post(relay_server.url, body, PROTOBUF).status_code == 200
    assert post(relay_server.url, protobuf_body(list(reversed(spans))), PROTOBUF).status_code == 200
    events = read_turn(relay_server.url, turn_id)
    assert [e["type"] for e in events] == FULL
    assert_well_formed(events)
    assert relay_server.relay.receiver.stats["duplicates"] == 3 * len(spans)


def test_children_before_parents_in_separate_batches(relay_server) -> None:
    turn_id, spans = collected(markers=False)
    # each span alone, children before their parents but otherwise shuffled: act's batch
    # before plan's, plan's model call after act; the root (it ends last) last
    names = [s.name for s in spans]
    order = [
        "execute_tool lookup",
        "node act",
        "chat tiny-model",
        "node plan",
        "invoke_agent external",
    ]
    assert sorted(order) == sorted(names)
    by_name = {s.name: s for s in spans}
    reader = TurnReader(relay_server.url, turn_id).start()
    for name in order:
        assert post(relay_server.url, protobuf_body([by_name[name]]), PROTOBUF).status_code == 200
    events = reader.join()
    assert [e["type"] for e in events] == FULL
    plan_done = next(e for e in events if e["type"] == "node_completed" and e["node"] == "plan")
    assert plan_done["summary"]["input_tokens"] == 11  # the child found its late parent


def test_markers_then_ends_out_of_order(relay_server) -> None:
    turn_id, spans = collected(markers=True)
    markers = [s for s in spans if c.START_OF in (s.attributes or {})]
    ends = {s.name: s for s in spans if c.START_OF not in (s.attributes or {})}
    reader = TurnReader(relay_server.url, turn_id).start()
    assert post(relay_server.url, protobuf_body(markers), PROTOBUF).status_code == 200
    wait_until(lambda: "node_started" in reader.types(), what="live node_started")
    # the root's end comes before the nodes' ends: the run waits for the nodes it announced
    for batch in (
        ["invoke_agent external"],
        ["execute_tool lookup", "node act"],
        ["node plan"],
        ["chat tiny-model"],
    ):
        assert (
            post(relay_server.url, protobuf_body([ends[n] for n in batch]), PROTOBUF).status_code
            == 200
        )
    events = reader.join()
    assert_well_formed(events)
    types = [e["type"] for e in events]
    assert types.count("node_started") == 2 and types.count("node_completed") == 2
    assert types[-1] == "turn_completed"


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"\xff\xff\xff\xff not protobuf", PROTOBUF),
        (b"{not json", JSON),
        (b"[1, 2, 3]", JSON),
        (b'{"resourceSpans": 7}', JSON),
        (b"\x1f\x8b\x08\x00garbage", {**PROTOBUF, "Content-Encoding": "gzip"}),
    ],
)
def test_garbage_is_400_and_the_server_stays_healthy(relay_server, body, headers) -> None:
    response = post(relay_server.url, body, headers)
    assert response.status_code == 400, response.text
    if headers["Content-Type"] == "application/json":
        assert response.json()["code"] == 3 and response.json()["message"]
    else:
        from google.rpc import status_pb2

        status = status_pb2.Status()
        status.ParseFromString(response.content)
        assert status.code == 3 and status.message
    assert httpx.get(f"{relay_server.url}/healthz").status_code == 200
    turn_id, spans = collected()
    assert post(relay_server.url, protobuf_body(spans), PROTOBUF).status_code == 200
    assert read_turn(relay_server.url, turn_id)[-1]["type"] == "turn_completed"


def test_oversized_payloads_are_413(make_relay) -> None:
    server = make_relay(RELAY_OTLP_MAX_BYTES="4096")
    assert post(server.url, b"x" * 5000, PROTOBUF).status_code == 413
    bomb = gzip.compress(b"\x00" * 2_000_000)  # 2 KB on the wire, 2 MB inflated
    assert len(bomb) < 4096
    response = post(server.url, bomb, {**PROTOBUF, "Content-Encoding": "gzip"})
    assert response.status_code == 413
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_unsupported_media_and_encoding_are_415(relay_server) -> None:
    assert post(relay_server.url, b"x", {"Content-Type": "text/plain"}).status_code == 415
    assert post(relay_server.url, b"x", {**PROTOBUF, "Content-Encoding": "br"}).status_code == 415


def test_a_full_store_queue_is_429_with_retry_after(make_relay) -> None:
    server = make_relay(RELAY_OTLP_STORE_BACKLOG="2")
    _, spans = collected()
    response = post(server.url, protobuf_body(spans), PROTOBUF)
    assert response.status_code == 429
    assert response.headers["retry-after"]
    # nothing was taken: a later, smaller delivery goes through
    assert post(server.url, protobuf_body(spans[:1]), PROTOBUF).status_code == 200


def test_the_receiver_requires_the_token_when_set(make_relay) -> None:
    server = make_relay(RELAY_API_TOKEN="s3cret")
    _, spans = collected()
    body = protobuf_body(spans)
    assert post(server.url, body, PROTOBUF).status_code == 401
    assert post(server.url, body, {**PROTOBUF, "Authorization": "Bearer nope"}).status_code == 401
    assert post(server.url, body, {**PROTOBUF, "Authorization": "Bearer s3cret"}).status_code == 200
    exporter = OTLPSpanExporter(
        endpoint=f"{server.url}/v1/traces", headers={"Authorization": "Bearer s3cret"}
    )
    provider = provider_with(exporter)
    second = made_up_run(provider)
    provider.shutdown()
    # ?wait: the spans settle for a moment (RELAY_OTLP_SETTLE_MS) before the turn exists
    with httpx.stream(
        "GET",
        f"{server.url}/turns/{second}/events?wait=10",
        timeout=10,
        headers={"Authorization": "Bearer s3cret"},
    ) as response:
        assert response.status_code == 200
        text = response.read().decode()
    assert "event: turn_completed" in text


def test_relay_only_serves_no_graph_and_is_ready(relay_server) -> None:
    assert httpx.get(f"{relay_server.url}/readyz").json()["status"] == "ready"
    assert httpx.get(f"{relay_server.url}/graph").status_code == 404
    assert httpx.post(f"{relay_server.url}/chat", json={"message": "hi"}).status_code in (404, 405)


def test_receiver_off_by_default_in_the_demo_app(server) -> None:
    assert httpx.post(f"{server.url}/v1/traces", content=b"", headers=PROTOBUF).status_code in (
        404,
        405,
    )


def test_a_turn_this_relay_runs_is_not_published_twice(make_server) -> None:
    """The demo app with the receiver on, fed its own spans: each event once."""
    server = make_server(RELAY_OTLP_HTTP="true")
    with httpx.Client(timeout=30) as client:
        response = client.post(f"{server.url}/chat", json={"message": "How do refunds work?"})
        turn_id = response.json()["turn_id"]
    events = read_turn(server.url, turn_id)
    # the same spans, as a collector fanning out to the relay would send them
    relay = server.relay
    _, spans = wait_until(
        lambda: (lambda r: r if r[0] == "stored" else None)(relay.store.turn_spans(turn_id)),
        what="the turn's spans in the store",
    )
    assert spans
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    scope = resource_spans.scope_spans.add()
    for record in spans:
        span = scope.spans.add()
        span.trace_id = bytes.fromhex(record.trace_id)
        span.span_id = bytes.fromhex(record.span_id)
        if record.parent_span_id:
            span.parent_span_id = bytes.fromhex(record.parent_span_id)
        span.name = record.name
        span.start_time_unix_nano = record.start_ns
        span.end_time_unix_nano = record.end_ns or record.start_ns
        for key, value in record.attributes.items():
            kv = span.attributes.add()
            kv.key = key
            if isinstance(value, bool):
                kv.value.bool_value = value
            elif isinstance(value, int):
                kv.value.int_value = value
            elif isinstance(value, float):
                kv.value.double_value = value
            else:
                kv.value.string_value = str(value)
    assert post(server.url, request.SerializeToString(), PROTOBUF).status_code == 200
    assert read_turn(server.url, turn_id) == events
    assert relay.bus.last_seq(turn_id) == len(events) + 1  # + the answer's message_saved


def test_concurrent_exporters(relay_server) -> None:
    turns: list[str] = []

    def one() -> None:
        exporter = OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces")
        provider = provider_with(exporter)
        turns.append(made_up_run(provider, markers=True))
        provider.shutdown()

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(turns) == 6
    for turn_id in turns:
        events = read_turn(relay_server.url, turn_id)
        assert [e["type"] for e in events] == FULL
