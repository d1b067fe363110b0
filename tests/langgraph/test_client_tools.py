"""relay.client_tool on a prebuilt agent (scripted fake chat model, in-memory checkpoints,
no relay): the call pauses with a ``client_tool`` interrupt, the answer is the tool's
output, the relay's stop ends a call past a limit with an error text and stops the graph
after its node, leaving the thread free. And ``client_tools_of``: an AG-UI client's tools."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from relay import ClientTool, client_tool, client_tools_of
from relay.langgraph.client_tools import (
    ANSWERED_KEY,
    MAX_ROUNDS_KEY,
    ROUND_KEY,
    TOOLS_KEY,
    run_graph,
    stop_answers,
)
from tests.zoo.graphs import _react_agent
from tests.zoo.models import call, scripted, text

CLOCK = client_tool(
    "clock", "The client's clock.", {"type": "object", "properties": {"tz": {"type": "string"}}}
)


def agent(*script: Any) -> Any:
    return _react_agent(scripted(*script), [CLOCK], checkpointer=InMemorySaver())


def config(**extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": "t1", **extra}}


async def test_a_call_pauses_and_the_answer_is_the_output() -> None:
    graph = agent(call("clock", {"tz": "UTC"}, "c1"), text("Done."))
    values, limit = await run_graph(graph, {"messages": [("user", "time?")]}, config())
    assert limit is None
    [pending] = values["__interrupt__"]
    assert {k: pending.value[k] for k in ("type", "name", "arguments", "call_id", "round")} == {
        "type": "client_tool",
        "name": "clock",
        "arguments": {"tz": "UTC"},
        "call_id": "c1",
        "round": 1,
    }
    values, limit = await run_graph(
        graph, Command(resume={pending.id: {"result": {"now": "09:30"}}}), config()
    )
    assert limit is None
    assert [m.content for m in values["messages"] if m.type == "tool"] == ['{"now": "09:30"}']
    assert values["messages"][-1].content == "Done."


async def test_an_error_answer_is_the_tools_error_text() -> None:
    graph = agent(call("clock", {}, "c1"), text("Sorry."))
    values, _ = await run_graph(graph, {"messages": [("user", "time?")]}, config())
    [pending] = values["__interrupt__"]
    values, _ = await run_graph(
        graph, Command(resume={pending.id: {"error": "no clock"}}), config()
    )
    tool = [m.content for m in values["messages"] if m.type == "tool"]
    assert tool == ["Error: the client could not run clock: no clock"]


async def test_a_round_past_the_limit_stops_the_graph_after_its_node() -> None:
    graph = agent(call("clock", {}, "c1"), call("clock", {}, "c2"), text("Next turn."))
    values, _ = await run_graph(
        graph, {"messages": [("user", "time?")]}, config(**{MAX_ROUNDS_KEY: 1})
    )
    [pending] = values["__interrupt__"]
    values, limit = await run_graph(
        graph,
        Command(resume={pending.id: {"result": "9"}}),
        config(**{MAX_ROUNDS_KEY: 1, ROUND_KEY: 1, ANSWERED_KEY: ["c1"]}),
    )
    assert limit is not None and limit.code == "client_tool_rounds"
    assert "RELAY_CLIENT_TOOL_MAX_ROUNDS" in limit.message
    assert values["messages"][-1].content.startswith("Error: clock was not run")
    state = await graph.aget_state(config())
    assert not state.interrupts  # the thread is free: the next message runs
    values, limit = await run_graph(graph, {"messages": [("user", "hi")]}, config())
    assert limit is None and values["messages"][-1].content == "Next turn."


async def test_the_relays_stop_ends_a_call_past_its_time() -> None:
    graph = agent(call("clock", {}, "c1"))
    values, _ = await run_graph(graph, {"messages": [("user", "time?")]}, config())
    [pending] = values["__interrupt__"]
    values, limit = await run_graph(
        graph, Command(resume=stop_answers([pending.id], "client_tool_timeout")), config()
    )
    assert limit is not None and limit.code == "client_tool_timeout"
    assert "RELAY_CLIENT_TOOL_TIMEOUT_S" in values["messages"][-1].content


def test_client_tools_of_an_agui_clients_tools() -> None:
    tools = client_tools_of(
        {
            "configurable": {
                TOOLS_KEY: [
                    {
                        "name": "get_location",
                        "description": "Where",
                        "parameters": {
                            "type": "object",
                            "properties": {"precise": {"type": "boolean"}},
                        },
                    },
                    {"name": "no_schema", "description": "x"},
                    {"bad": True},
                ]
            }
        }
    )
    assert [t.name for t in tools] == ["get_location", "no_schema"]
    assert all(isinstance(t, ClientTool) for t in tools)
    assert tools[0].args == {"precise": {"type": "boolean"}}
    assert client_tools_of({"configurable": {}}) == []


def test_parameters_must_be_an_object_schema() -> None:
    with pytest.raises(ValueError, match="object JSON Schema"):
        client_tool("x", "y", {"type": "string"})
