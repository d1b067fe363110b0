"""The GenAI conventions' workflow spans over OTLP, on a real uvicorn: ``invoke_workflow``
(a graph run; ``gen_ai.workflow.name``) and the proposed ``invoke_node`` (one node, named
after its verb), shaped as Google's ADK emits them (google/adk-python,
``telemetry/node_tracing.py``: attributes at start, ``gen_ai.conversation.id`` on both,
``gen_ai.workflow.nested`` on a workflow inside another), sent by the OpenTelemetry SDK's
own OTLP exporter. Also OpenLLMetry's ``gen_ai.workflow.structure`` (the LangGraph
topology as one JSON object) on such a root."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider

from relay import conventions as c
from tests.interop.conftest import assert_well_formed, read_turn, wait_until
from tests.interop.spans import provider_with

NESTED = "gen_ai.workflow.nested"


def workflow_run(
    provider: TracerProvider, thread: str, root_attributes: dict[str, Any] | None = None
) -> str:
    """``trip``: plan, then book (a tool call, and the nested workflow ``pay`` with its
    node ``charge``). Returns the trace id (the turn id of a foreign run)."""
    tracer = provider.get_tracer("google.adk")

    def workflow(name: str, nested: bool = False, **extra: Any) -> Any:
        attributes = {
            c.OPERATION: c.OP_INVOKE_WORKFLOW,
            c.CONVERSATION_ID: thread,
            c.WORKFLOW_NAME: name,
            **extra,
        }
        if nested:
            attributes[NESTED] = True
        return tracer.start_as_current_span(f"invoke_workflow {name}", attributes=attributes)

    def node(name: str) -> Any:
        return tracer.start_as_current_span(
            f"invoke_node {name}",
            attributes={c.OPERATION: c.OP_INVOKE_NODE, c.CONVERSATION_ID: thread},
        )

    with workflow("trip", **(root_attributes or {})) as root:
        with node("plan"):
            pass
        with node("book"):
            with tracer.start_as_current_span(
                "execute_tool reserve",
                attributes={c.OPERATION: c.OP_TOOL, c.TOOL_NAME: "reserve", c.TOOL_CALL_ID: "r1"},
            ):
                pass
            with workflow("pay", nested=True), node("charge"):
                pass
    return format(root.get_span_context().trace_id, "032x")


def sent(server: Any, **kwargs: Any) -> tuple[str, str]:
    thread = f"th-{uuid.uuid4().hex[:8]}"
    provider = provider_with(OTLPSpanExporter(endpoint=f"{server.url}/v1/traces"))
    turn_id = workflow_run(provider, thread, **kwargs)
    provider.shutdown()
    return turn_id, thread


def test_invoke_workflow_is_a_run_and_invoke_node_its_nodes(relay_server) -> None:
    turn_id, thread = sent(relay_server)
    events = read_turn(relay_server.url, turn_id)
    assert_well_formed(events)
    assert all(e["turn_id"] == turn_id and e["thread_id"] == thread for e in events)
    topology = events[0]
    assert topology["graph_id"] == "trip" and topology["discovered"] is True
    nodes = [
        (e["type"], e["node"], e["namespace"])
        for e in events
        if e["type"] in ("node_started", "node_completed")
    ]
    assert nodes == [
        ("node_started", "plan", []),
        ("node_completed", "plan", []),
        ("node_started", "book", []),
        ("node_started", "pay", ["book"]),  # the nested workflow: a subgraph's node
        ("node_started", "charge", ["book", "pay"]),
        ("node_completed", "charge", ["book", "pay"]),
        ("node_completed", "pay", ["book"]),
        ("node_completed", "book", []),
    ]
    tools = [(e["type"], e["tool"], e["node"]) for e in events if e["type"].startswith("tool_")]
    assert tools == [("tool_started", "reserve", "book"), ("tool_completed", "reserve", "book")]
    last = [e for e in events if e["type"] == "graph_discovered"][-1]
    assert [(e["source"], e["target"]) for e in last["edges"]] == [
        ("__start__", "plan"),
        ("plan", "book"),
        ("book", "__end__"),
    ]
    assert events[-1]["type"] == "turn_completed"
    # the response lists every node as it completed, those of the nested workflow too
    assert [n["name"] for n in events[-1]["response"]["nodes"]] == ["plan", "charge", "pay", "book"]
    record = httpx.get(f"{relay_server.url}/turns/{turn_id}").json()
    assert record["status"] == "answered" and record["thread_id"] == thread
    receiver = relay_server.relay.receiver
    wait_until(lambda: receiver.stats["stored"] == receiver.stats["accepted"], what="stored")
    replay = httpx.get(f"{relay_server.url}/turns/{turn_id}/events?source=spans", timeout=30)
    replayed = [
        json.loads(line[5:]) for line in replay.text.splitlines() if line.startswith("data:")
    ]
    assert replayed == events


def test_openllmetrys_workflow_structure_is_the_topology(relay_server) -> None:
    """``gen_ai.workflow.structure`` as OpenLLMetry writes it for a LangGraph graph:
    nodes without ``__start__``/``__end__``, edges grouped by source."""
    structure = {
        "nodes": ["plan", "book"],
        "edges": [
            [["__start__"], ["plan"]],
            [["plan"], ["book", "__end__"]],
            [["book"], ["__end__"]],
        ],
    }
    turn_id, _ = sent(
        relay_server, root_attributes={"gen_ai.workflow.structure": json.dumps(structure)}
    )
    events = read_turn(relay_server.url, turn_id)
    assert_well_formed(events)
    topology = events[0]
    assert "discovered" not in topology
    assert [n["id"] for n in topology["nodes"]] == ["__start__", "plan", "book", "__end__"]
    assert [(e["source"], e["target"]) for e in topology["edges"]] == [
        ("__start__", "plan"),
        ("plan", "book"),
        ("plan", "__end__"),
        ("book", "__end__"),
    ]
    assert not any(e["type"] == "graph_discovered" for e in events)
