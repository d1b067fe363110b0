"""Subgraph events on LangGraph's run stream (relay/agent_server/stream.py): a run of the
``nested`` graph (tests/interop/langgraph_js/graphs.py: ``plan``, then the subgraph
``research`` whose ``search`` writes a ``custom`` payload and whose ``summarise`` streams
tokens) streamed by ``langgraph_sdk`` from span-relay on a real uvicorn, with and without
``stream_subgraphs``, has the frames LangGraph's own ``graph.astream(..., subgraphs=True)``
makes of the same graph in process (and of one that invokes the subgraph inside a
node): the same names (``mode|research:<task id>``) and payloads, in the same order (task
and message ids aside)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph_sdk import get_sync_client

from relay import GraphAgent, Relay
from relay.agent_server.jsonable import jsonable
from tests.agent_server_graphs import nested_graph
from tests.conftest import LiveServers
from tests.interop.langgraph_js.graphs import Research, plan, research_graph

MODES = ["values", "updates", "messages-tuple", "custom"]
INPUT = {"messages": [{"type": "human", "content": "hi"}]}
#: the metadata of a message tuple span-relay writes as LangGraph does
META = ("langgraph_node", "langgraph_step", "langgraph_checkpoint_ns")


def task_free(ns: str) -> str:
    """A checkpoint namespace without its task ids (``research:<id>|x:<id>`` ->
    ``research|x``)."""
    return "|".join(part.split(":")[0] for part in ns.split("|"))


def without_ids(value: Any) -> Any:
    """Message ids dropped (each run makes its own)."""
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k != "id"}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


def normal(name: str, data: Any) -> tuple[str, Any]:
    """One frame, comparable across runs and servers."""
    mode, _, ns = name.partition("|")
    if mode == "messages":
        message, meta = data
        message = {k: v for k, v in message.items() if k != "chunk_position"}
        meta = {k: meta.get(k) for k in META}
        meta["langgraph_checkpoint_ns"] = task_free(meta["langgraph_checkpoint_ns"])
        data = [message, meta]
    return (f"{mode}|{task_free(ns)}" if ns else mode, without_ids(data))


def called_graph() -> Any:
    """The same run with the subgraph invoked inside a node (``research`` awaits
    ``research_graph().ainvoke``) instead of added as one."""
    research = research_graph()

    async def call(state: Research) -> dict[str, Any]:
        return dict(await research.ainvoke(state))

    builder = StateGraph(Research)
    builder.add_node("plan", plan)
    builder.add_node("research", call)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "research")
    builder.add_edge("research", END)
    return builder.compile()


GRAPHS = {"nested": nested_graph, "called": called_graph}


def app(env: dict[str, str]) -> FastAPI:
    relay = Relay.from_env(dict(env))
    served = FastAPI(lifespan=relay.lifespan)
    relay.mount(served, *(GraphAgent(make(), name=name) for name, make in GRAPHS.items()))
    return served


async def langgraph_frames(name: str, subgraphs: bool) -> list[tuple[str, Any]]:
    """What LangGraph's own stream makes of the run, as its server names the frames."""
    graph = GRAPHS[name]()
    graph.checkpointer = InMemorySaver()
    config = {"configurable": {"thread_id": "t"}}
    modes = ["values", "updates", "messages", "custom"]
    out: list[tuple[str, Any]] = []
    async for item in graph.astream(INPUT, config, stream_mode=modes, subgraphs=subgraphs):
        ns, mode, data = item if subgraphs else ((), *item)
        name = f"{mode}|{'|'.join(ns)}" if ns else mode
        out.append(normal(name, jsonable(data)))
    return out


def relay_frames(url: str, name: str, subgraphs: bool) -> tuple[list[tuple[str, Any]], list[str]]:
    """span-relay's frames of the run (and the raw names)."""
    sdk = get_sync_client(url=url)
    thread = sdk.threads.create()["thread_id"]
    parts = [
        (p.event, p.data)
        for p in sdk.runs.stream(
            thread, name, input=INPUT, stream_mode=MODES, stream_subgraphs=subgraphs
        )
    ]
    assert parts[0][0] == "metadata"
    return [normal(name, data) for name, data in parts[1:]], [name for name, _ in parts]


@pytest.mark.parametrize("subgraphs", [True, False])
@pytest.mark.parametrize("graph", list(GRAPHS))
async def test_subgraph_frames_are_langgraphs(
    app_env: dict[str, str], live_servers: LiveServers, graph: str, subgraphs: bool
) -> None:
    server = live_servers.start(app(app_env))
    expected = await langgraph_frames(graph, subgraphs)
    found, names = relay_frames(server.url, graph, subgraphs)
    assert found == expected
    nested = [n for n in names if "|" in n]
    if subgraphs:
        # the namespace is the subgraph node's task: research:<its task id>
        assert {n.split("|", 1)[1].split(":")[0] for n in nested} == {"research"}
        assert len({n.split("|", 1)[1] for n in nested}) == 1
        assert {n.split("|")[0] for n in nested} == {"values", "updates", "messages", "custom"}
    else:
        assert nested == []
