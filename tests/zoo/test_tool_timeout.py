"""RELAY_TOOL_TIMEOUT_S, enforced by the library on a graph's own async tool: a prebuilt
ReAct agent whose tool never returns ends its turn with ``error`` ``tool_timeout`` (the
tool's span and ``tool_completed`` say ``error``), and its thread takes the next turn.
(A sync tool runs in a worker thread, which nothing can stop: it is not bounded.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.tools import tool

from relay import GraphAgent, Relay
from tests.conftest import LiveServer, events_of, stream_post
from tests.zoo.graphs import _react_agent
from tests.zoo.models import call, scripted, text


@tool
async def lookup_forever(query: str) -> str:
    """A lookup whose backend never answers."""
    await asyncio.Event().wait()  # nothing ever sets it
    return "never"


@pytest.fixture
def served(app_env: dict[str, str]) -> Iterator[LiveServer]:
    relay = Relay.from_env({**app_env, "RELAY_TOOL_TIMEOUT_S": "0.2"})
    model = scripted(
        call("lookup_forever", {"query": "x"}, "call_slow_1"),
        text("Here is your answer."),
        name="slow-model",
    )
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(_react_agent(model, [lookup_forever], name="slow"), name="slow"))
    server = LiveServer(app).start()
    yield server
    server.stop()


def test_a_tool_that_never_returns_ends_the_turn(served: LiveServer) -> None:
    with httpx.Client(timeout=30) as client:
        events = events_of(stream_post(client, f"{served.url}/chat", {"message": "Look x up."}))
        end = events[-1]
        assert end["type"] == "error" and end["code"] == "tool_timeout", end
        assert "lookup_forever" in end["message"]
        done = [e for e in events if e["type"] == "tool_completed"]
        assert [(e["tool"], e["status"]) for e in done] == [("lookup_forever", "error")]
        record = client.get(f"{served.url}/turns/{end['turn_id']}").json()
        assert record["status"] == "error"
        again = client.post(
            f"{served.url}/chat",
            json={  # the thread is free again (not a
                "message": "And now?",
                "thread_id": end["thread_id"],
            },
        )  # 409 thread_busy); the
        assert again.status_code == 200, again.text  # agent's own checks judge its history
        assert again.json()["turn_id"] != end["turn_id"]
