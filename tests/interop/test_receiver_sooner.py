"""Received spans go out as soon as nothing they need can still be on its way, on a real
uvicorn: a span that hangs from a span the relay already mapped (its run followed, its
parent's start known) is not held for the settle window; a span that comes before its
parent waits, and goes the moment the parent comes. The window here is a minute: every
event these tests wait for would otherwise arrive a minute late (the readers give up
long before), so nothing is timed."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from tests.interop.conftest import TurnReader
from tests.interop.spans import Collecting, made_up_run, protobuf_body, provider_with

PROTOBUF = {"Content-Type": "application/x-protobuf"}
MINUTE = "60000"


def test_an_exporter_that_sends_in_order_is_streamed_as_it_sends(make_relay) -> None:
    """The Python SDK's SimpleSpanProcessor with start markers: the run root's marker,
    each node's marker, each span after its node's start. Each node waits inside until
    the reader has its node_started; act waits until plan's node_completed is in too:
    plan's span went out when it came, not a window later."""
    server = make_relay(RELAY_OTLP_SETTLE_MS=MINUTE)
    provider = provider_with(OTLPSpanExporter(endpoint=f"{server.url}/v1/traces"))
    turn_id = uuid.uuid4().hex
    reader = TurnReader(server.url, turn_id, timeout=90).start()
    seen: dict[str, list[str]] = {}

    def hold(node: str) -> None:
        assert reader.wait_for("node_started", node, timeout=20), reader.types()
        if node == "act":
            assert reader.wait_for("node_completed", "plan", timeout=20), reader.types()
        seen[node] = [f"{e['type']}:{e.get('node')}" for e in reader.events()]

    made_up_run(provider, turn_id=turn_id, markers=True, while_running=hold)
    provider.shutdown()
    assert seen["plan"] == ["graph_topology:None", "node_started:plan"]
    assert seen["act"] == [
        "graph_topology:None",
        "node_started:plan",
        "node_completed:plan",
        "node_started:act",
    ]
    # act's tool and act itself follow at once; the root waits its window for children
    # still on their way (it names no span count): the turn ends when the server stops
    assert reader.wait_for("node_completed", "act", timeout=20), reader.types()
    assert reader.types()[4:] == ["tool_started", "tool_completed", "node_completed"]
    assert server.relay.receiver.stats["late"] == 0


def collected_with_markers() -> tuple[str, dict[str, Any]]:
    exporter = Collecting()
    provider = provider_with(exporter)
    turn_id = made_up_run(provider, markers=True)
    provider.shutdown()
    return turn_id, {s.name: s for s in exporter.spans}


def post(url: str, spans: list[Any]) -> None:
    r = httpx.post(f"{url}/v1/traces", content=protobuf_body(spans), headers=PROTOBUF, timeout=10)
    assert r.status_code == 200, r.text


def test_a_span_before_its_parent_waits_for_it_and_no_longer(make_relay) -> None:
    """The tool's span comes before act has started (its marker still on its way): it
    waits; act's marker comes: the two go out together, in the order they ran."""
    server = make_relay(RELAY_OTLP_SETTLE_MS=MINUTE)
    turn_id, spans = collected_with_markers()
    reader = TurnReader(server.url, turn_id, timeout=90).start()
    post(server.url, [spans["relay.start invoke_agent external"]])
    assert reader.wait_for("graph_topology", timeout=20), reader.types()
    post(server.url, [spans["execute_tool lookup"]])  # its parent, act, not started yet
    post(server.url, [spans["relay.start node act"]])
    assert reader.wait_for("tool_completed", timeout=20), reader.types()
    assert reader.types() == ["graph_topology", "node_started", "tool_started", "tool_completed"]
    assert [e.get("node") for e in reader.events()[1:]] == ["act", "act", "act"]
    assert server.relay.receiver.stats["late"] == 0


def test_a_batch_with_the_root_sends_the_rest_and_holds_the_root(make_relay) -> None:
    """A BatchSpanProcessor sends the last node with the run's root: the node's events go
    out when the batch comes; the root alone waits its window (children may still be on
    their way: it names no span count)."""
    server = make_relay(RELAY_OTLP_SETTLE_MS=MINUTE)
    turn_id, spans = collected_with_markers()
    reader = TurnReader(server.url, turn_id, timeout=90).start()
    post(server.url, [spans["relay.start invoke_agent external"], spans["relay.start node act"]])
    assert reader.wait_for("node_started", "act", timeout=20), reader.types()
    root = spans["invoke_agent external"]
    post(server.url, [spans["execute_tool lookup"], spans["node act"], root])
    assert reader.wait_for("node_completed", "act", timeout=20), reader.types()
    assert reader.types() == [
        "graph_topology",
        "node_started",
        "tool_started",
        "tool_completed",
        "node_completed",
    ]
