"""Frontend tools over ``POST /agui`` on a graph of its own: ``RunAgentInput.tools`` reach
the graph (``relay.client_tools_of(config)``), a model node binds them and a node runs
them as client tools; the run ends with the call pending (``pendingToolCallIds``), and the
next run's tool message (by ``toolCallId``) resumes the turn. Every stream is checked
against the ``ag-ui-protocol`` models and the rules the real client enforces."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from relay import GraphAgent, Relay, client_tools_of
from tests.conftest import LiveServer
from tests.delivery.agui_checks import check_stream, post_agui, user
from tests.zoo.models import call, scripted, text

LOCATION = {
    "name": "get_location",
    "description": "Where the person is, from the browser.",
    "parameters": {"type": "object", "properties": {"precise": {"type": "boolean"}}},
}


def build(model: Any) -> Any:
    async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        bound = model.bind_tools(client_tools_of(config))
        return {"messages": [await bound.ainvoke(state["messages"], config)]}

    async def tools(state: MessagesState, config: RunnableConfig) -> Any:
        return await ToolNode(client_tools_of(config)).ainvoke(state, config)

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(name="whereami")


@pytest.fixture
def served(app_env: dict[str, str]) -> Iterator[LiveServer]:
    relay = Relay.from_env(app_env)
    model = scripted(
        call("get_location", {"precise": False}, "call_loc_1"),
        text("You are in Lyon."),
        text("You're welcome."),
        name="where-model",
    )
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(build(model), name="whereami"))
    server = LiveServer(app).start()
    yield server
    server.stop()


def run_input(thread: str, run: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": messages,
        "state": {},
        "tools": [LOCATION],
        "context": [],
        "forwardedProps": {},
    }


def test_a_frontend_tool_round_trips_over_agui(served: LiveServer) -> None:
    thread = uuid.uuid4().hex
    asked = [user("Where am I?")]
    with httpx.Client(timeout=30) as client:
        first = post_agui(client, served.url, run_input(thread, "run-1", asked))
        check_stream(first)
        starts = [e for e in first if e["type"] == "TOOL_CALL_START"]
        assert [(e["toolCallId"], e["toolCallName"]) for e in starts] == [
            ("call_loc_1", "get_location")
        ]
        args = next(e for e in first if e["type"] == "TOOL_CALL_ARGS")
        assert json.loads(args["delta"]) == {"precise": False}
        assert not [e for e in first if e["type"] == "TOOL_CALL_RESULT"]
        assert first[-1]["type"] == "RUN_FINISHED"
        assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["call_loc_1"]}

        history = [
            *asked,
            {
                "id": "a1",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": "call_loc_1",
                        "type": "function",
                        "function": {"name": "get_location", "arguments": '{"precise": false}'},
                    }
                ],
            },
            {"id": "t1", "role": "tool", "toolCallId": "call_loc_1", "content": '{"city": "Lyon"}'},
        ]
        second = post_agui(client, served.url, run_input(thread, "run-2", history))
        check_stream(second)
        assert not [e for e in second if e["type"].startswith("TOOL_CALL")], (
            "the client's call is not repeated"
        )
        assert second[-1]["type"] == "RUN_FINISHED"
        assert second[-1]["outcome"] == {"type": "success"}
        assert second[-1]["result"]["answer"] == "You are in Lyon."
        turn = second[-1]["result"]["turn_id"]
        state = client.get(f"{served.url}/turns/{turn}").json()
        assert state["status"] == "answered"

        # the same run again (a retry): it attaches to the run that answered the call
        again = post_agui(client, served.url, run_input(thread, "run-2", history))
        assert again[-1]["result"] == second[-1]["result"]
        # another run with the same tool messages: they answer nothing pending now
        third = client.post(f"{served.url}/agui", json=run_input(thread, "run-3", history))
        assert third.status_code == 409, third.text
        assert third.json()["error"]["code"] == "not_paused"
        # a new user message after them is a new turn (the old tool messages are history)
        fourth = post_agui(
            client,
            served.url,
            run_input(
                thread,
                "run-4",
                [
                    *history,
                    {"id": "a2", "role": "assistant", "content": "You are in Lyon."},
                    user("Thanks!", "m2"),
                ],
            ),
        )
        check_stream(fourth)
        assert fourth[-1]["result"]["answer"] == "You're welcome."
