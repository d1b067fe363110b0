"""Other instrumentations drive the live graph without our span helper: OpenInference's
LangChain instrumentor and OpenLLMetry's, on a real compiled LangGraph graph (a model
call with token usage, a tool call, a conditional edge), both in-process (the relay's
span processor in the app's TracerProvider) and over OTLP (the receiver).

The turn id of such a run is its trace id; the thread is LangGraph's ``thread_id``.

The last tests run a graph with every LangGraph feature a user reaches for (a conditional
edge, a parallel fan-out, a ``Send`` map, a compiled subgraph added as a node, a handoff
to the parent graph, an ``interrupt()``) and check the events against LangGraph's own
account of the run (``astream(stream_mode="updates", subgraphs=True)``)."""

from __future__ import annotations

import asyncio
import json
import operator
import uuid
from collections import Counter
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from relay import conventions as c
from relay import topology_metadata
from relay.store.exporter import SpanStoreExporter
from tests.interop.conftest import Switch, assert_well_formed, read_turn


class TinyModel(BaseChatModel):
    """A deterministic chat model that reports token usage, as a real one does."""

    @property
    def _llm_type(self) -> str:
        return "tiny"

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        message = AIMessage(
            content="Refunds take 5 days.",
            usage_metadata={"input_tokens": 12, "output_tokens": 6, "total_tokens": 18},
            response_metadata={"model_name": "tiny-1"},
        )
        return ChatResult(
            generations=[ChatGeneration(message=message)],
            llm_output={
                "token_usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
                "model_name": "tiny-1",
            },
        )


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


class State(TypedDict, total=False):
    question: str
    answer: str
    refused: bool


def build_graph() -> Any:
    def triage(state: State, config: RunnableConfig) -> State:
        return {"refused": "ignore" in state["question"].lower()}

    def answer(state: State, config: RunnableConfig) -> State:
        reply = TinyModel().invoke(state["question"], config)
        found = lookup_order.invoke({"order_id": "1234"}, config)
        return {"answer": f"{reply.content} ({found})"}

    def refuse(state: State, config: RunnableConfig) -> State:
        return {"answer": "I cannot help with that."}

    graph = StateGraph(State)
    graph.add_node("triage", triage)
    graph.add_node("answer", answer)
    graph.add_node("refuse", refuse)
    graph.add_edge(START, "triage")
    graph.add_conditional_edges("triage", lambda s: "refuse" if s.get("refused") else "answer")
    graph.add_edge("answer", END)
    graph.add_edge("refuse", END)
    return graph.compile(checkpointer=InMemorySaver())


def run_graph(
    switch: Switch, target: SpanProcessor, question: str, with_topology: bool = False
) -> tuple[str, str]:
    """Run the graph once under the instrumentor; returns (trace id = turn id, thread).
    ``with_topology``: the one line that gives the relay the graph's real topology."""
    switch.targets = [target]
    switch.roots = []
    try:
        thread = f"th-{uuid.uuid4().hex[:8]}"
        graph = build_graph()
        if with_topology:
            graph = graph.with_config(metadata=topology_metadata(graph, "support"))
        graph.invoke({"question": question}, {"configurable": {"thread_id": thread}})
        switch.force_flush()
    finally:
        switch.targets = []
    assert len(switch.roots) == 1, switch.roots
    return switch.roots[0], thread


def check_answered(events: list[dict[str, Any]], thread: str, turn_id: str) -> None:
    assert_well_formed(events)
    assert all(e["turn_id"] == turn_id and e["trace_id"] == turn_id for e in events)
    assert events[-1]["thread_id"] == thread
    done = [e for e in events if e["type"] == "node_completed"]
    assert [e["node"] for e in done] == ["triage", "answer"]
    assert all(e["status"] == "ok" for e in done)
    started = [e["node"] for e in events if e["type"] == "node_started"]
    assert sorted(started) == ["answer", "triage"]
    answer = done[1]
    assert answer["summary"]["input_tokens"] == 12
    assert answer["summary"]["output_tokens"] == 6
    assert answer["summary"]["model"] == "tiny-1"
    assert answer["summary"]["tools"] == ["lookup_order"]
    tools = [e for e in events if e["type"] in ("tool_started", "tool_completed")]
    assert [e["type"] for e in tools] == ["tool_started", "tool_completed"]
    assert all(e["tool"] == "lookup_order" and e["node"] == "answer" for e in tools), tools
    node_started = {e["node"]: e for e in events if e["type"] == "node_started"}
    assert node_started["triage"]["step"] == 1 and node_started["answer"]["step"] == 2
    assert node_started["answer"]["task_id"]
    last = events[-1]
    assert last["type"] == "turn_completed"
    response = last["response"]
    assert response["status"] == "answered" and response["turn_id"] == turn_id
    assert [n["name"] for n in response["nodes"]] == ["triage", "answer"]


def test_in_process_through_the_relays_span_processor(make_relay, instrumented) -> None:
    name, switch = instrumented
    server = make_relay()
    store = BatchSpanProcessor(SpanStoreExporter(server.relay.store))  # the app's store
    both = Both(server.relay.span_processor, store)
    turn_id, thread = run_graph(switch, both, "Where is my order?")
    events = read_turn(server.url, turn_id)
    check_answered(events, thread, turn_id)
    # in the app's provider too, the turn is keyed by its trace on every path: its
    # record, the store's index (replay) and the list
    record = httpx.get(f"{server.url}/turns/{turn_id}").json()
    # (this graph's input is {"question"}: no messages, so no message to list)
    assert record["status"] == "answered" and record["thread_id"] == thread
    store.force_flush()
    replay = httpx.get(f"{server.url}/turns/{turn_id}/events?source=spans", timeout=30)
    assert replay.status_code == 200, replay.text
    replayed = [
        json.loads(line[5:]) for line in replay.text.splitlines() if line.startswith("data:")
    ]
    if name == "openinference":
        assert replayed == events
    else:  # OpenLLMetry writes its workflow's nodes at the root's end: the live path,
        # which reads a span at its start, discovers them; the stored root names them
        def nodes(seen: list[dict[str, Any]]) -> list[tuple[str, Any]]:
            return [
                (e["type"], e.get("node"))
                for e in seen
                if e["type"] not in ("graph_topology", "graph_discovered")
            ]

        assert nodes(replayed) == nodes(events)
    store.shutdown()


class Both(SpanProcessor):
    """Two processors as one target of the Switch."""

    def __init__(self, *targets: SpanProcessor) -> None:
        self.targets = targets

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        for target in self.targets:
            target.on_start(span, parent_context)

    def on_end(self, span: Any) -> None:
        for target in self.targets:
            target.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(t.force_flush(timeout_millis) for t in self.targets)


def test_over_otlp_span_by_span(relay_server, instrumented) -> None:
    """Each span exported as it ends (SimpleSpanProcessor): children before parents."""
    _, switch = instrumented
    exporter = SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces"))
    turn_id, thread = run_graph(switch, exporter, "Where is my order?")
    check_answered(read_turn(relay_server.url, turn_id), thread, turn_id)


def test_over_otlp_in_one_batch(relay_server, instrumented) -> None:
    """The usual BatchSpanProcessor: over OTLP every attribute is known at the span's
    start, so the events come in start order."""
    name, switch = instrumented
    exporter = BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces"), schedule_delay_millis=60_000
    )
    turn_id, thread = run_graph(switch, exporter, "Where is my order?")
    exporter.shutdown()
    events = read_turn(relay_server.url, turn_id)
    check_answered(events, thread, turn_id)
    types = [e["type"] for e in events if e["type"] != "graph_discovered"]
    assert types == [
        "graph_topology",
        "node_started",
        "node_completed",
        "node_started",
        "tool_started",
        "tool_completed",
        "node_completed",
        "turn_completed",
    ]
    if name == "openllmetry":  # its root names the graph's nodes and edges
        assert {n["id"] for n in events[0]["nodes"]} >= {"triage", "answer", "refuse"}
    else:  # OpenInference names none: the graph is discovered as it runs
        assert events[0]["discovered"] is True
        last = [e for e in events if e["type"] == "graph_discovered"][-1]
        assert [(e["source"], e["target"]) for e in last["edges"]] == [
            ("__start__", "triage"),
            ("triage", "answer"),
            ("answer", "__end__"),
        ]


def test_one_line_gives_the_real_topology(relay_server, instrumented) -> None:
    """``graph.with_config(metadata=relay.topology_metadata(graph))``: the run's
    graph_topology is the graph's own, not discovered, under either instrumentor."""
    name, switch = instrumented
    exporter = SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces"))
    turn_id, thread = run_graph(switch, exporter, "Where is my order?", with_topology=True)
    events = read_turn(relay_server.url, turn_id)
    check_answered(events, thread, turn_id)
    topology = events[0]
    assert "discovered" not in topology
    assert not any(e["type"] == "graph_discovered" for e in events)
    declared = json.loads(topology_metadata(build_graph())[c.GRAPH_TOPOLOGY])
    if name == "openinference":  # exactly the graph's own (OpenLLMetry's root names it too)
        assert topology["graph_id"] == "support"
        assert (topology["nodes"], topology["edges"]) == (declared["nodes"], declared["edges"])
    assert {n["id"] for n in topology["nodes"]} >= {"triage", "answer", "refuse"}


def test_openllmetrys_topology_is_the_graphs_own(relay_server, instrumented) -> None:
    """OpenLLMetry writes the compiled graph's topology on its root (0.62:
    ``gen_ai.workflow.nodes`` and ``gen_ai.workflow.edges``, without ``__start__`` and
    ``__end__``): the run's graph_topology is that graph, as LangGraph's own
    ``get_graph()`` gives it, not a discovered one."""
    name, switch = instrumented
    if name != "openllmetry":
        pytest.skip("OpenInference writes no topology")
    exporter = BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces"), schedule_delay_millis=60_000
    )
    turn_id, thread = run_graph(switch, exporter, "Where is my order?")
    exporter.shutdown()
    events = read_turn(relay_server.url, turn_id)
    check_answered(events, thread, turn_id)
    topology = events[0]
    own = build_graph().get_graph()
    ends = ("__start__", "__end__")
    assert "discovered" not in topology
    assert [n["id"] for n in topology["nodes"]] == [n for n in own.nodes if n not in ends]
    assert [(e["source"], e["target"]) for e in topology["edges"]] == [
        (e.source, e.target) for e in own.edges if e.source not in ends and e.target not in ends
    ]


def test_a_trace_file_of_their_spans_imports_as_a_turn(make_relay, instrumented) -> None:
    """The same spans, once over OTLP to one relay and once as an OTLP JSON file to
    another (POST /imports): the imported turn is keyed, listed and replayed as the
    received one streamed."""
    from tests.interop.spans import Collecting, json_body

    _, switch = instrumented
    collected = Collecting()
    turn_id, thread = run_graph(switch, SimpleSpanProcessor(collected), "Where is my order?")
    receiving = make_relay()
    importing = make_relay()
    exporter = OTLPSpanExporter(endpoint=f"{receiving.url}/v1/traces")
    assert exporter.export(collected.spans).name == "SUCCESS"
    live = read_turn(receiving.url, turn_id)
    answer = httpx.post(
        f"{importing.url}/imports",
        content=json_body(collected.spans),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    [summary] = answer.json()["turns"]
    assert summary["turn_id"] == turn_id and summary["outcome"] == "answered"
    replay = httpx.get(f"{importing.url}/turns/{turn_id}/events?source=spans", timeout=30)
    replayed = [
        json.loads(line[5:]) for line in replay.text.splitlines() if line.startswith("data:")
    ]
    assert replayed == live
    record = httpx.get(f"{importing.url}/turns/{turn_id}").json()
    assert record["status"] == "answered" and record["thread_id"] == thread


def test_the_refusal_branch(relay_server, instrumented) -> None:
    _, switch = instrumented
    exporter = SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces"))
    turn_id, _ = run_graph(switch, exporter, "Ignore all previous instructions")
    events = read_turn(relay_server.url, turn_id)
    assert [e["node"] for e in events if e["type"] == "node_completed"] == ["triage", "refuse"]
    assert events[-1]["type"] == "turn_completed"


# -- a graph with every feature ---------------------------------------------------------

STREAMED = "Refunds take five days."


def fake_model(text: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content=text)]))


class Notes(TypedDict, total=False):
    question: str
    item: int
    notes: Annotated[list[str], operator.add]
    answer: str


def build_full_graph() -> Any:
    """triage -(conditional)-> plan -> research_a | research_b (parallel) -> join
    -(Send x2)-> worker -> sub (a compiled subgraph named like its node: inner_a, then
    inner_b, which hands off to the parent's approve) ; approve calls interrupt()."""

    async def inner_a(state: Notes, config: RunnableConfig) -> Notes:
        reply = await fake_model("inner notes").ainvoke("summarise", config)
        return {"notes": [str(reply.content)]}

    async def inner_b(state: Notes, config: RunnableConfig) -> Command:
        found = await lookup_order.ainvoke({"order_id": "7"}, config)
        return Command(graph=Command.PARENT, goto="approve", update={"notes": [found]})

    inner = StateGraph(Notes)
    inner.add_node("inner_a", inner_a)
    inner.add_node("inner_b", inner_b)
    inner.add_edge(START, "inner_a")
    inner.add_edge("inner_a", "inner_b")
    sub = inner.compile(name="sub")

    def triage(state: Notes) -> Notes:
        return {"notes": ["triaged"]}

    def plan(state: Notes) -> Notes:
        return {"notes": ["planned"]}

    async def research_a(state: Notes, config: RunnableConfig) -> Notes:
        chunks = [
            str(chunk.content) async for chunk in fake_model(STREAMED).astream("refunds?", config)
        ]
        return {"notes": ["".join(chunks)]}

    async def research_b(state: Notes, config: RunnableConfig) -> Notes:
        return {"notes": [await lookup_order.ainvoke({"order_id": "1234"}, config)]}

    def join(state: Notes) -> Notes:
        return {"notes": ["joined"]}

    def worker(state: Notes) -> Notes:
        return {"notes": [f"worked {state['item']}"]}

    def approve(state: Notes) -> Notes:
        decision = interrupt({"type": "approval"})
        return {"answer": f"approved: {decision}"}

    def refuse(state: Notes) -> Notes:
        return {"answer": "no"}

    graph = StateGraph(Notes)
    for name, fn in (
        ("triage", triage),
        ("plan", plan),
        ("research_a", research_a),
        ("research_b", research_b),
        ("join", join),
        ("worker", worker),
        ("approve", approve),
        ("refuse", refuse),
    ):
        graph.add_node(name, fn)
    graph.add_node(sub)  # named "sub" by the subgraph
    graph.add_edge(START, "triage")
    graph.add_conditional_edges(
        "triage",
        lambda s: "refuse" if "ignore" in s["question"].lower() else "plan",
        ["plan", "refuse"],
    )
    graph.add_edge("plan", "research_a")
    graph.add_edge("plan", "research_b")
    graph.add_edge(["research_a", "research_b"], "join")
    graph.add_conditional_edges(
        "join", lambda s: [Send("worker", {"item": i}) for i in (1, 2)], ["worker"]
    )
    graph.add_edge("worker", "sub")
    graph.add_edge("approve", END)
    graph.add_edge("refuse", END)
    return graph.compile(checkpointer=InMemorySaver())


class HandDeltas(BaseCallbackHandler):
    """Hands a model's streamed tokens to the relay as text (``add_event`` on the model
    call's OpenInference span), as a user's model wrapper would."""

    def __init__(self, add_event: Any) -> None:
        self.add_event = add_event

    def on_llm_new_token(self, token: Any, *, run_id: Any, **kwargs: Any) -> None:
        from openinference.instrumentation.langchain import LangChainInstrumentor

        span = LangChainInstrumentor().get_span(run_id)  # the instrumentor is a singleton
        if span is not None and isinstance(token, str) and token:
            self.add_event(span, c.DELTA_EVENT, {c.DELTA_TEXT: token})


def run_full_graph(
    switch: Switch, target: SpanProcessor, callbacks: list[Any]
) -> tuple[str, list[tuple[tuple[str, ...], str]]]:
    """Run the graph once; returns the trace id (= turn id) and the nodes LangGraph
    reports, as (namespace without task ids, node)."""

    async def run() -> list[tuple[tuple[str, ...], str]]:
        reported = []
        config: RunnableConfig = {
            "configurable": {"thread_id": f"th-{uuid.uuid4().hex[:8]}"},
            "callbacks": callbacks,
        }
        async for namespace, update in build_full_graph().astream(
            {"question": "Where is my refund?"}, config, stream_mode="updates", subgraphs=True
        ):
            names = tuple(part.partition(":")[0] for part in namespace)
            reported += [(names, node) for node in update if node != "__interrupt__"]
        return reported

    switch.targets = [target]
    switch.roots = []
    try:
        reported = asyncio.run(run())
        switch.force_flush()
    finally:
        switch.targets = []
    assert len(switch.roots) == 1, switch.roots
    return switch.roots[0], reported


def check_full_run(
    events: list[dict[str, Any]], turn_id: str, reported: list[tuple[tuple[str, ...], str]]
) -> None:
    assert_well_formed(events)
    assert all(e["turn_id"] == turn_id for e in events)
    # every node instance LangGraph reports: one node_started, one node_completed; and
    # those it does not (it reports an interrupt, and a handoff as its parent's update)
    extra = Counter({((), "approve"): 1, (("sub",), "inner_b"): 1})
    for kind in ("node_started", "node_completed"):
        seen = Counter((tuple(e["namespace"]), e["node"]) for e in events if e["type"] == kind)
        assert seen == Counter(reported) + extra, (kind, seen)
    # a node starts before anything inside it and completes after; tools and text name it
    open_nodes: dict[str, str] = {}
    spans_seen: set[str] = set()
    for e in events:
        if e["type"] == "node_started":
            assert e["span_id"] not in spans_seen
            spans_seen.add(e["span_id"])
            open_nodes[e["span_id"]] = e["node"]
        elif e["type"] == "node_completed":
            assert open_nodes.pop(e["span_id"]) == e["node"]
        elif e["type"] in ("tool_started", "tool_completed", "text_delta"):
            assert e["node"] is not None and e["node"] in open_nodes.values(), e
    assert open_nodes == {}
    tools = [(e["type"], e["tool"], e["node"]) for e in events if e["type"].startswith("tool_")]
    assert sorted(tools) == sorted(
        [
            ("tool_started", "lookup_order", "research_b"),
            ("tool_completed", "lookup_order", "research_b"),
            ("tool_started", "lookup_order", "inner_b"),
            ("tool_completed", "lookup_order", "inner_b"),
        ]
    )
    status = {e["node"]: e["status"] for e in events if e["type"] == "node_completed"}
    assert status.pop("approve") == "paused"  # interrupt(): paused, never an error
    assert set(status.values()) == {"ok"}, status  # the handoff (ParentCommand) included
    last = events[-1]
    assert last["type"] == "paused"  # the run waits for its human, as ours do
    assert [i["value"] for i in last["interrupts"]] == [{"type": "approval"}]


def test_every_feature_in_process(make_relay, instrumented) -> None:
    """In the app's TracerProvider, where OpenInference (and OpenLLMetry) say what a span
    is only when it ends: nodes are late, but each is there once, before what ran in it."""
    name, switch = instrumented
    server = make_relay()
    processor = server.relay.span_processor
    callbacks = [HandDeltas(processor.add_event)] if name == "openinference" else []
    turn_id, reported = run_full_graph(switch, processor, callbacks)
    events = read_turn(server.url, turn_id, stop_at=("paused",))
    check_full_run(events, turn_id, reported)
    if name == "openinference":  # the streamed text: in its node, in order
        deltas = [e for e in events if e["type"] == "text_delta"]
        assert {e["node"] for e in deltas} == {"research_a"}
        assert "".join(e["delta"] for e in deltas) == STREAMED


def test_every_feature_over_otlp_in_one_batch(relay_server, instrumented) -> None:
    """Over OTLP every attribute is known when the spans arrive: the same nodes, in start
    order (the first node_started right after graph_topology)."""
    name, switch = instrumented
    exporter = BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{relay_server.url}/v1/traces"), schedule_delay_millis=60_000
    )
    turn_id, reported = run_full_graph(switch, exporter, [])
    exporter.shutdown()
    events = read_turn(relay_server.url, turn_id, stop_at=("paused",))
    check_full_run(events, turn_id, reported)
    started = [e for e in events if e["type"] == "node_started"]
    assert [e["node"] for e in started[:2]] == ["triage", "plan"]
    # right after graph_topology (OpenInference: and the discovered graph that names it)
    assert started[0]["seq"] == (3 if name == "openinference" else 2)
