"""relay.langgraph.instrument: the spans GraphAgent gives any graph, on a real SDK tracer.

Parents, attributes at start, outcomes, and no double instrumentation, for graphs driven
both ways (async ``ainvoke``, where LangChain ends runs in a shielded copy of the context,
and sync ``invoke``)."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from relay import conventions as c
from relay.langgraph.instrument import GraphInstrumentation, task_of
from relay.langgraph.spans import NodeLog, traced_node


class State(TypedDict, total=False):
    n: int


@pytest.fixture
def spans() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {s.name: s for s in exporter.get_finished_spans()}


def sid(span: ReadableSpan | None) -> int | None:
    return span.context.span_id if span is not None else None  # type: ignore[union-attr]


def chain(tracer: Any) -> Any:
    def plain(state: State) -> State:  # fn(state): no config
        with tracer.start_as_current_span("user work"):
            return {"n": state.get("n", 0) + 1}

    def wrapped(state: State, config: RunnableConfig) -> State:
        return {"n": state["n"] + 1}

    builder = StateGraph(State)
    builder.add_node("plain", plain)
    builder.add_node("wrapped", traced_node(tracer, "wrapped", wrapped))  # its own helper
    builder.add_edge(START, "plain")
    builder.add_edge("plain", "wrapped")
    builder.add_edge("wrapped", END)
    return builder.compile()


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_one_node_span_per_node_under_the_root(spans: Any, mode: str) -> None:
    tracer, exporter = spans
    graph = chain(tracer)
    log = NodeLog()
    with tracer.start_as_current_span("root"):
        handler = GraphInstrumentation(tracer, None, log)
        config: RunnableConfig = {"callbacks": [handler]}
        if mode == "async":
            assert asyncio.run(graph.ainvoke({"n": 0}, config)) == {"n": 2}
        else:
            assert graph.invoke({"n": 0}, config) == {"n": 2}
        handler.close()
    found = by_name(exporter)
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("node plain") == 1 and names.count("node wrapped") == 1  # not twice
    root = found["root"]
    for node in ("node plain", "node wrapped"):
        assert found[node].parent is not None and found[node].parent.span_id == sid(root)
        assert found[node].attributes[c.NODE_OUTCOME] == "ok"
        assert found[node].attributes[c.NODE_TASK_ID]
        assert tuple(found[node].attributes[c.NODE_NAMESPACE]) == ()
    assert found["user work"].parent.span_id == sid(found["node plain"])
    assert [(n["name"], n["status"]) for n in log.snapshot()] == [
        ("plain", "ok"),
        ("wrapped", "ok"),
    ]


def test_subgraph_nodes_are_children_of_their_parent_node(spans: Any) -> None:
    tracer, exporter = spans
    inner = StateGraph(State)
    inner.add_node("step", lambda s: {"n": s["n"] + 10})
    inner.add_edge(START, "step")
    outer = StateGraph(State)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    graph = outer.compile()
    with tracer.start_as_current_span("root"):
        asyncio.run(graph.ainvoke({"n": 1}, {"callbacks": [GraphInstrumentation(tracer)]}))
    found = by_name(exporter)
    assert found["node step"].parent.span_id == sid(found["node sub"])
    assert tuple(found["node step"].attributes[c.NODE_NAMESPACE]) == ("sub",)
    assert found["node sub"].parent.span_id == sid(found["root"])


def test_an_interrupt_pauses_the_node_and_the_resume_runs_it_again(spans: Any) -> None:
    tracer, exporter = spans

    def ask(state: State) -> State:
        answer = interrupt({"type": "approval"})
        return {"n": 1 if answer["approved"] else 0}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}

    async def run() -> None:
        first = await graph.ainvoke({}, {**config, "callbacks": [GraphInstrumentation(tracer)]})
        assert first["__interrupt__"]
        done = await graph.ainvoke(
            Command(resume={"approved": True}),
            {**config, "callbacks": [GraphInstrumentation(tracer)]},
        )
        assert done == {"n": 1}

    asyncio.run(run())
    outcomes = [
        s.attributes[c.NODE_OUTCOME] for s in exporter.get_finished_spans() if s.name == "node ask"
    ]
    assert outcomes == ["paused", "ok"]
    assert all(s.status.is_ok for s in exporter.get_finished_spans())


def test_a_failing_node_is_an_error_and_close_ends_what_a_cancel_left_open(spans: Any) -> None:
    tracer, exporter = spans
    started = asyncio.Event()

    async def boom(state: State) -> State:
        raise ValueError("no")

    async def hang(state: State) -> State:
        started.set()
        await asyncio.sleep(3600)
        return {}

    for fn, name in ((boom, "boom"), (hang, "hang")):
        builder = StateGraph(State)
        builder.add_node(name, fn)
        builder.add_edge(START, name)
        graph = builder.compile()

        async def run(graph: Any = graph, name: str = name) -> None:
            handler = GraphInstrumentation(tracer)
            task = asyncio.create_task(graph.ainvoke({}, {"callbacks": [handler]}))
            if name == "hang":
                await started.wait()
                task.cancel()
            with pytest.raises((ValueError, asyncio.CancelledError)):
                await task
            handler.close()

        asyncio.run(run())
    found = by_name(exporter)
    assert found["node boom"].attributes[c.NODE_OUTCOME] == "error"
    assert not found["node boom"].status.is_ok
    assert found["node hang"].attributes[c.NODE_OUTCOME] == "cancelled"


def test_task_of_reads_langgraph_metadata() -> None:
    assert task_of({"langgraph_node": "b", "langgraph_checkpoint_ns": "a:1|b:2"}) == (
        "b",
        "a:1|b:2",
        ["a"],
        "2",
    )
    assert task_of({"langgraph_node": "a", "langgraph_checkpoint_ns": "a:1|b:2"}) is None
    assert task_of({"langgraph_node": "a"}) is None
    assert task_of(None) is None
