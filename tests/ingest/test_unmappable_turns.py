"""A received turn whose spans cannot be mapped still ends, on a real uvicorn with the real
OTLP/HTTP exporter: JSON nested 2,000 levels deep in ``relay.turn.interrupts`` or
``relay.graph.topology`` ends the turn with one terminal ``error`` ``unmappable_spans``
(a reader of ``/events`` gets it; the record is saved, status ``error``), and its replay
(``?source=spans``) is ``422 unmappable_spans`` when the span it cannot map comes before
any event, else the live stream's events again, ending in the same ``error``. An
attribute value nested past the decoder's limit (protobuf arrays in arrays) rejects its
span, counted in the answer's partial success."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from relay import conventions as c
from relay.ingest.otlp import MAX_VALUE_DEPTH
from span_relay_demo.app import create_app
from tests.conftest import LiveServer, iter_frames
from tests.interop.conftest import wait_until
from tests.interop.spans import provider_with

NESTED = "[" * 2_000 + "]" * 2_000


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data: Path = tmp_path_factory.mktemp("unmappable")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        {
            "RELAY_DATA_DIR": str(data),
            "OTEL_TRACES_EXPORTER": "none",
            "RELAY_OTLP_HTTP": "1",
            "RELAY_HEARTBEAT_S": "1",
        }
    )
    server = LiveServer(create_app(env)).start()
    yield server
    server.stop()


def send_root(
    server: LiveServer, turn_id: str, start: dict[str, Any], end: dict[str, Any], node: bool
) -> None:
    """One run root (with a node under it, or none) through the real OTLP/HTTP exporter."""
    provider = provider_with(OTLPSpanExporter(endpoint=f"{server.url}/v1/traces"))
    tracer = provider.get_tracer("another-process")
    attributes = {
        c.OPERATION: c.OP_INVOKE_AGENT,
        c.AGENT_NAME: "helper",
        c.TURN_ID: turn_id,
        c.CONVERSATION_ID: f"thread-{turn_id}",
        **start,
    }
    root = tracer.start_span("invoke_agent helper", attributes=attributes)
    if node:
        with trace.use_span(root, end_on_exit=False):
            tracer.start_span("node plan", attributes={c.NODE_NAME: "plan", c.NODE_STEP: 1}).end()
    for key, value in end.items():
        root.set_attribute(key, value)
    root.end()
    provider.shutdown()


def read_to_end(server: LiveServer, turn_id: str) -> list[dict[str, Any]]:
    """The turn's events until its terminal one; the timeout bounds a failure (a stream
    that never ends), it measures nothing."""
    events = []
    deadline = time.monotonic() + 30  # (heartbeats keep a stream that never ends alive)
    with httpx.stream(
        "GET", f"{server.url}/turns/{turn_id}/events", params={"wait": 20}, timeout=30
    ) as r:
        assert r.status_code == 200, r.read()
        for frame in iter_frames(r):
            assert time.monotonic() < deadline, f"the stream did not end: {events}"
            if frame.data is None:
                continue
            event = json.loads(frame.data)
            events.append(event)
            if event["type"] in ("error", "turn_completed"):
                break
    return events


@pytest.mark.parametrize(
    ("start", "end", "node", "replayed"),
    [
        ({}, {c.TURN_OUTCOME: "paused", c.TURN_INTERRUPTS: NESTED}, False, 422),
        ({c.GRAPH_TOPOLOGY: NESTED}, {c.TURN_OUTCOME: "paused"}, True, 422),
        ({}, {c.TURN_OUTCOME: "answered", c.TURN_RESPONSE: NESTED}, True, 200),
    ],
    ids=["interrupts", "topology", "response-after-a-node"],
)
def test_unmappable_turn_ends(
    live: LiveServer, start: dict[str, Any], end: dict[str, Any], node: bool, replayed: int
) -> None:
    turn_id = uuid.uuid4().hex
    send_root(live, turn_id, start, end, node)
    events = read_to_end(live, turn_id)
    assert events[0]["type"] == "graph_topology"
    assert events[-1]["type"] == "error"
    assert events[-1]["code"] == "unmappable_spans"
    assert "nests deeper than 128 levels" in events[-1]["message"]
    assert events[-1]["retryable"] is False
    assert sum(e["type"] in ("error", "turn_completed", "paused") for e in events) == 1
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    record = wait_until(
        lambda: (
            (r := httpx.get(f"{live.url}/turns/{turn_id}", timeout=10)).status_code == 200
            and r.json()["status"] == "error"
            and r.json()
        ),
        what="the unmappable turn's record",
    )
    assert record["ended_at"] is not None
    # a reader that comes after the end: the terminal event again, or 204 past it
    again = httpx.get(
        f"{live.url}/turns/{turn_id}/events",
        headers={"last-event-id": str(events[-1]["seq"])},
        timeout=30,
    )
    assert again.status_code == 204
    replay = httpx.get(
        f"{live.url}/turns/{turn_id}/events",
        params={"source": "spans", "speed": 0},
        headers={"accept": "application/x-ndjson"},
        timeout=30,
    )
    assert replay.status_code == replayed, replay.text
    if replayed == 422:
        assert replay.json()["error"]["code"] == "unmappable_spans"
    else:  # the first events went out before the span: the live stream's events again
        replayed_events = [json.loads(line) for line in replay.text.splitlines() if line]
        assert replayed_events == events


def test_a_turn_of_one_span_replays(live: LiveServer) -> None:
    """The control: the same root, readable, answers and replays (a turn of one span is
    ordered only at the end of its read, which must still answer the mapping's lookups)."""
    turn_id = uuid.uuid4().hex
    response = {"status": "answered", "answer": "ok", "turn_id": turn_id}
    send_root(
        live,
        turn_id,
        {},
        {c.TURN_OUTCOME: "answered", c.TURN_RESPONSE: json.dumps(response)},
        False,
    )
    events = read_to_end(live, turn_id)
    assert [e["type"] for e in events] == ["graph_topology", "turn_completed"]
    wait_until(
        lambda: (
            httpx.get(f"{live.url}/turns/{turn_id}", timeout=10).json().get("status") == "answered"
        ),
        what="the turn's record",
    )
    replay = httpx.get(
        f"{live.url}/turns/{turn_id}/events",
        params={"source": "spans", "speed": 0},
        headers={"accept": "application/x-ndjson"},
        timeout=30,
    )
    assert replay.status_code == 200, replay.text
    assert [json.loads(line) for line in replay.text.splitlines() if line] == events


def _nested_array(levels: int) -> AnyValue:
    value = AnyValue(string_value="x")
    for _ in range(levels):
        outer = AnyValue()
        outer.array_value.values.append(value)
        value = outer
    return value


def _request(value: AnyValue) -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = uuid.uuid4().bytes
    span.span_id = uuid.uuid4().bytes[:8]
    span.name = "deep"
    span.start_time_unix_nano = 1
    attribute = span.attributes.add()
    attribute.key = "k"
    attribute.value.CopyFrom(value)
    return request.SerializeToString()


@pytest.mark.parametrize("levels", [MAX_VALUE_DEPTH, MAX_VALUE_DEPTH + 1, 45])
def test_deep_protobuf_attribute_value(live: LiveServer, levels: int) -> None:
    """Arrays in arrays, within protobuf's own limit (100 messages deep): past
    MAX_VALUE_DEPTH the span is rejected (partial success), never a 500."""
    r = httpx.post(
        f"{live.url}/v1/traces",
        content=_request(_nested_array(levels)),
        headers={"content-type": "application/x-protobuf"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(r.content)
    rejected = answer.partial_success.rejected_spans
    assert rejected == (1 if levels > MAX_VALUE_DEPTH else 0)
    if rejected:
        assert "nests deeper" in answer.partial_success.error_message
