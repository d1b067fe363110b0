"""A Logfire-instrumented agent over OTLP, on a real uvicorn: the logfire SDK as it ships
(``logfire.configure(send_to_logfire=False)``, an OTLP exporter to the relay as an
additional span processor) exports a *pending span* when a span starts (zero-length,
``logfire.span_type = "pending_span"``, the span's start attributes, the span as its
parent, ``logfire.pending_parent_id``). The relay reads it as that span's start: a node
shows while it runs, not when it ends.

The agent: a LangGraph graph written here (plan, then book with a tool call), its run and
nodes in Logfire spans shaped as the GenAI conventions' ``invoke_workflow`` and
``invoke_node``. LangGraph's own account of the same run (``stream_mode="updates"``) is
the reference for the nodes and their order."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypedDict

import httpx
import logfire
import pytest
from langgraph.graph import END, START, StateGraph
from logfire._internal.exporters.remove_pending import RemovePendingSpansExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from relay import conventions as c
from tests.interop.conftest import TurnReader, assert_well_formed, read_turn, wait_until
from tests.interop.restore import restored
from tests.interop.test_instrumentors import build_graph as instrumented_graph
from tests.interop.test_instrumentors import check_answered

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class State(TypedDict, total=False):
    city: str
    booked: str


@pytest.fixture
def logfire_to(request) -> Iterator[Callable[[str], Any]]:
    """``logfire_to(url)``: a local Logfire instance (not the global one) that exports
    every span, and every pending span, to the relay at ``url`` as it ends."""
    made: list[Any] = []

    def make(url: str) -> Any:
        exporter = RemovePendingSpansExporter(OTLPSpanExporter(endpoint=f"{url}/v1/traces"))
        instance = logfire.configure(
            local=True,
            send_to_logfire=False,
            console=False,
            metrics=False,
            service_name="logfire-agent",
            additional_span_processors=[SimpleSpanProcessor(exporter)],
        )
        made.append(instance)
        return instance

    yield make
    for instance in made:
        instance.shutdown()


def build_graph(lf: Any, thread: str, inside: Callable[[str], None]) -> Any:
    """plan -> book; each node in an ``invoke_node`` span, book's tool in an
    ``execute_tool`` span; ``inside(node)`` runs in the node, before its span ends."""

    def traced(name: str, fn: Callable[[State], State]) -> Callable[[State], State]:
        def node(state: State) -> State:
            with lf.span(
                f"invoke_node {name}",
                _span_name=f"invoke_node {name}",
                **{c.OPERATION: c.OP_INVOKE_NODE, c.CONVERSATION_ID: thread},
            ):
                inside(name)
                return fn(state)

        return node

    def plan(state: State) -> State:
        return {"city": "Lisbon"}

    def book(state: State) -> State:
        with lf.span(
            "execute_tool reserve",
            _span_name="execute_tool reserve",
            **{c.OPERATION: c.OP_TOOL, c.TOOL_NAME: "reserve", c.TOOL_CALL_ID: "r1"},
        ):
            return {"booked": f"the 9:40 to {state['city']}"}

    graph = StateGraph(State)
    graph.add_node("plan", traced("plan", plan))
    graph.add_node("book", traced("book", book))
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "book")
    graph.add_edge("book", END)
    return graph.compile()


def test_a_logfire_agents_nodes_show_when_they_start(relay_server, logfire_to) -> None:
    lf = logfire_to(relay_server.url)
    thread = f"th-{uuid.uuid4().hex[:8]}"
    readers: dict[str, TurnReader] = {}
    seen: dict[str, list[str]] = {}

    def inside(node: str) -> None:
        """Hold the node until the reader has its node_started (the node's span has not
        ended: only its pending span can have said so)."""
        reader = readers["turn"]
        assert reader.wait_for("node_started", node, timeout=20), reader.types()
        seen[node] = [f"{e['type']}:{e.get('node')}" for e in reader.events()]

    # the run's turn id is its trace id, known once the root span is open: the reader
    # starts inside it, before the graph runs
    graph = build_graph(lf, thread, inside)
    updates: list[str] = []
    with lf.span(
        "invoke_workflow trip",
        _span_name="invoke_workflow trip",
        **{c.OPERATION: c.OP_INVOKE_WORKFLOW, c.WORKFLOW_NAME: "trip", c.CONVERSATION_ID: thread},
    ) as root:
        turn_id = format(root.get_span_context().trace_id, "032x")
        readers["turn"] = TurnReader(relay_server.url, turn_id).start()
        for update in graph.stream({}, stream_mode="updates"):
            updates += list(update)
    lf.force_flush()
    events = readers["turn"].join()
    assert updates == ["plan", "book"]  # LangGraph's own account of the run
    assert_well_formed(events)
    # each node_started came from its pending span, while the node still ran
    assert seen["plan"] == ["graph_topology:None", "graph_discovered:None", "node_started:plan"]
    assert seen["book"][-1] == "node_started:book" and "node_completed:book" not in seen["book"]
    assert [e["node"] for e in events if e["type"] == "node_completed"] == updates
    assert events[0]["graph_id"] == "trip" and events[0]["thread_id"] == thread
    tools = [(e["type"], e["tool"], e["node"]) for e in events if e["type"].startswith("tool_")]
    assert tools == [("tool_started", "reserve", "book"), ("tool_completed", "reserve", "book")]
    assert events[-1]["type"] == "turn_completed"
    receiver = relay_server.relay.receiver
    assert receiver.stats["late"] == 0 and receiver.stats["mapping_failures"] == 0
    # the pending spans are stored with the rest: the replay gives the same events
    wait_until(lambda: receiver.stats["stored"] == receiver.stats["accepted"], what="stored")
    replay = httpx.get(f"{relay_server.url}/turns/{turn_id}/events?source=spans", timeout=30)
    replayed = [
        json.loads(line[5:]) for line in replay.text.splitlines() if line.startswith("data:")
    ]
    assert replayed == [e for e in events if e["type"] != "message_saved"]


# -- LangChain's instrumentors under Logfire ---------------------------------------------------


class Forward(SpanExporter):
    """Exports to the current test's relay (a module's Logfire instance outlives a test's
    server); keeps the trace ids of the roots it saw."""

    def __init__(self) -> None:
        self.target: SpanExporter | None = None
        self.roots: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            if span.parent is None:
                self.roots.append(format(span.context.trace_id, "032x"))
        return self.target.export(spans) if self.target else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def under_logfire(request) -> Iterator[Forward]:
    """OpenInference's or OpenLLMetry's LangChain instrumentor on a Logfire instance's
    tracer provider: their spans get pending spans too (with no attributes: those
    instrumentors set them after the span starts)."""
    if request.param == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor: Any = LangChainInstrumentor()
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        instrumentor = LangchainInstrumentor()
    forward = Forward()
    lf = logfire.configure(
        local=True,
        send_to_logfire=False,
        console=False,
        metrics=False,
        additional_span_processors=[SimpleSpanProcessor(RemovePendingSpansExporter(forward))],
    )
    with restored():
        instrumentor.instrument(tracer_provider=lf.config.get_tracer_provider())
        try:
            yield forward
        finally:
            instrumentor.uninstrument()
            lf.shutdown()


def test_pending_spans_without_attributes_change_nothing(relay_server, under_logfire) -> None:
    """Their nodes are recognised at their end, as without Logfire; the pending spans
    (names and parents only) neither add nodes nor lose any."""
    forward = under_logfire
    forward.target = OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces")
    forward.roots = []
    thread = f"th-{uuid.uuid4().hex[:8]}"
    try:
        graph = instrumented_graph()
        graph.invoke({"question": "Where is my order?"}, {"configurable": {"thread_id": thread}})
    finally:
        forward.target = None
    [turn_id] = forward.roots
    check_answered(read_turn(relay_server.url, turn_id), thread, turn_id)
    stats = relay_server.relay.receiver.stats
    assert stats["mapping_failures"] == 0 and stats["late"] == 0
