"""A graph nobody here wrote (LangGraph's prebuilt ReAct agent on a scripted fake chat
model) served with RELAY_AUTH=jwt: its tool reads the verified user from its config and
answers for that user only; the tool's span and the run's root carry ``enduser.id``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from relay import GraphAgent, Relay
from relay import conventions as c
from tests.auth.issuer import Issuer, bearer
from tests.conftest import LiveServer, events_of, stream_post
from tests.zoo.graphs import _react_agent
from tests.zoo.models import call, scripted, text

BALANCES = {"alice": 120, "bob": 7}


@tool
def my_balance(config: RunnableConfig) -> str:
    """The requesting user's store-credit balance."""
    user = config["configurable"].get("user")
    if user is None:
        return "I don't know who you are."
    return json.dumps(
        {
            "user": user["id"],
            "balance": BALANCES.get(user["id"], 0),
            "email": user["claims"].get("email"),
        }
    )


@pytest.fixture
def served(app_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[LiveServer, Issuer]]:
    issuer = Issuer()
    relay = Relay.from_env({**app_env, **issuer.env(issuer.write_jwks(tmp_path / "k.json"))})
    model = scripted(
        call("my_balance", {}, "call_1"),
        text("There you are."),
        call("my_balance", {}, "call_2"),
        text("There you are."),
        name="m",
    )
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(_react_agent(model, [my_balance], name="bank"), name="bank"))
    server = LiveServer(app).start()
    yield server, issuer
    server.stop()


def test_each_tool_call_acts_as_the_requesting_user(served: tuple[LiveServer, Issuer]) -> None:
    server, issuer = served
    with httpx.Client(timeout=30) as client:
        for who, email in (("alice", "a@example.test"), ("bob", None)):
            token = issuer.token(who, **({"email": email} if email else {}))
            events = events_of(
                stream_post(
                    client,
                    f"{server.url}/chat",
                    {"message": "What is my balance?"},
                    headers=bearer(token),
                )
            )
            assert events[-1]["type"] == "turn_completed", events[-1]
            tool = next(e for e in events if e["type"] == "tool_completed")
            assert tool["status"] == "ok"
            relay = server.relay
            assert relay.store_processor.force_flush(10_000)
            _, spans = relay.store.turn_spans(events[0]["turn_id"])
            tool_span = next(s for s in spans if s.name == "execute_tool my_balance")
            assert tool_span.attributes[c.ENDUSER_ID] == who
            root = next(s for s in spans if s.name == "invoke_agent bank")
            assert root.attributes[c.ENDUSER_ID] == who
            # what the tool answered, in the thread's state: this user's balance
            graph = relay.agents["bank"].graph
            state = asyncio.run_coroutine_threadsafe(
                graph.aget_state({"configurable": {"thread_id": events[0]["thread_id"]}}),
                server.loop,
            ).result(10)
            said = json.loads(state.values["messages"][-2].content)
            assert said == {"user": who, "balance": BALANCES[who], "email": email}
