"""The zoo's supervisor (langgraph-supervisor) and deep agent (deepagents, a tool that
needs approval) under OpenInference and OpenLLMetry as they ship, exporting over OTLP
(HTTP and gRPC, through the SDK's BatchSpanProcessor) to a relay-only server, as an app in
another process would: no span of ours anywhere. Each run's spans go out in one export, at
its end (``force_flush``): batches that a loaded machine spaces wider than the receiver's
settle window would make the live stream depend on when each came, which is the
receiver's settling (tests/interop/test_receiver_settle.py), not what this test holds.

Each turn is held against LangGraph's own account of it (``astream(updates)``, the same
pass): every top-level node it reports is streamed once, in its order; the topology is
the instrumentor's (OpenLLMetry names the nodes) or discovered (OpenInference); the deep
agent pauses on its approval with a ``paused`` event, and the resume, a new trace on the
same thread, continues the same turn to its answer; the answer is the graph's last
message; the turn's record has its message; and the replay from the span store equals
the live stream, event for event."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.interop.conftest import TurnReader, assert_well_formed, grpc_endpoint
from tests.zoo.graphs import CASES
from tests.zoo.reference import resume, updates

ZOO = {case.name: case for case in CASES if case.name in ("supervisor", "deep")}


def exporter_for(server: Any, protocol: str) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=grpc_endpoint(server), insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return Http(endpoint=f"{server.url}/v1/traces")


def top_nodes(events: list[dict[str, Any]], type_: str) -> list[str]:
    return [e["node"] for e in events if e["type"] == type_ and e["namespace"] == []]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_turn_over_otlp(relay_server, instrumented, name: str, protocol: str) -> None:
    instrumentation, switch = instrumented
    case = ZOO[name]
    graph = case.build(checkpointer=InMemorySaver())
    thread = f"zoo-{uuid.uuid4().hex[:8]}"
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    exporter = BatchSpanProcessor(
        exporter_for(relay_server, protocol), schedule_delay_millis=60_000
    )
    switch.targets = [exporter]
    switch.roots = []
    try:
        first = asyncio.run(updates(graph, case.input(), config))
        exporter.force_flush()
        assert len(switch.roots) == 1
        turn_id = switch.roots[0]  # a foreign turn is keyed by its trace id
        reader = TurnReader(relay_server.url, turn_id).start()
        resumed = None
        if case.expect_interrupt:
            assert first.interrupted
            assert reader.wait_for("paused"), reader.types()
            resumed = asyncio.run(resume(graph, case.resume, config))
            exporter.force_flush()
    finally:
        switch.targets = []
        exporter.shutdown()
    live = reader.join()
    assert_well_formed(live)
    assert all(e["turn_id"] == turn_id and e["thread_id"] == thread for e in live)
    reported = [node for ns, node in first.nodes + (resumed.nodes if resumed else []) if ns == ()]
    if case.expect_interrupt:  # the node that paused is streamed in both runs
        paused_node = next(
            e["node"]
            for e in live
            if e["type"] == "node_completed" and e["status"] == "paused" and e["namespace"] == []
        )
        reported.insert(len([n for ns, n in first.nodes if ns == ()]), paused_node)
    assert top_nodes(live, "node_started") == reported
    assert top_nodes(live, "node_completed") == reported
    topology = live[0]
    if instrumentation == "openllmetry":  # its root names the graph's nodes
        assert {n["id"] for n in topology["nodes"]} >= set(reported)
    else:
        assert topology["discovered"] is True
        graph_seen = [e for e in live if e["type"] == "graph_discovered"][-1]
        assert {n["id"] for n in graph_seen["nodes"]} >= set(reported) | {"__start__"}
    if case.expect_interrupt:
        paused = next(e for e in live if e["type"] == "paused")
        assert paused["interrupts"] and paused["resume"]["path"] is None
        restarted = [e for e in live if e["type"] == "graph_topology"]
        assert [e["run_kind"] for e in restarted] == ["chat", "resume"]
    done = live[-1]
    assert done["type"] == "turn_completed"
    state = graph.get_state(config)
    assert done["response"]["answer"] == state.values["messages"][-1].content
    record = httpx.get(f"{relay_server.url}/turns/{turn_id}").json()
    assert record["status"] == "answered" and record["message"] == case.message
    replay = httpx.get(f"{relay_server.url}/turns/{turn_id}/events?source=spans", timeout=30)
    assert replay.status_code == 200, replay.text
    replayed = [
        json.loads(line[5:]) for line in replay.text.splitlines() if line.startswith("data:")
    ]
    assert replayed == live
    assert relay_server.relay.receiver.stats["late"] == 0
