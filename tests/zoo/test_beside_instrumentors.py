"""A GraphAgent's graph with OpenInference's or OpenLLMetry's LangChain instrumentor on
in the same process, on the relay's own tracer provider: the graph is not instrumented
twice. Each node LangGraph reports is one node_started / node_completed pair, each tool
one tool_started, inside its node; the other instrumentation's spans are still recorded
(the trace viewer shows them) but make no events of their own."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langgraph.checkpoint.memory import InMemorySaver

from relay import GraphAgent, Relay
from tests.conftest import LiveServer, events_of, stream_post
from tests.interop.restore import restored
from tests.zoo import reference
from tests.zoo.graphs import CASES

BY_NAME = {case.name: case for case in CASES}


def _instrumentor(name: str) -> Any:
    if name == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        return LangChainInstrumentor()
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    return LangchainInstrumentor()


@pytest.fixture(params=["openinference", "openllmetry"])
def served(request: pytest.FixtureRequest, app_env: dict[str, str]) -> Iterator[LiveServer]:
    relay = Relay.from_env(app_env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, *(GraphAgent(BY_NAME[n].build(), name=n) for n in ("custom", "react")))
    with restored():  # the instrumentor patches LangChain for the whole process
        instrumentor = _instrumentor(request.param)
        instrumentor.instrument(tracer_provider=relay.tracer_provider)
        server = LiveServer(app).start()
        try:
            yield server
        finally:
            server.stop()
            instrumentor.uninstrument()


@pytest.mark.parametrize("name", ["custom", "react"])
def test_not_instrumented_twice(served: LiveServer, name: str) -> None:
    case = BY_NAME[name]
    truth = asyncio.run(
        reference.updates(
            case.build(InMemorySaver()), case.input(), {"configurable": {"thread_id": "reference"}}
        )
    )
    with httpx.Client(timeout=30) as client:
        events = events_of(
            stream_post(client, f"{served.url}/graphs/{name}/chat", {"message": case.message})
        )
    assert events[-1]["type"] == ("paused" if case.expect_interrupt else "turn_completed")
    done = [e for e in events if e["type"] == "node_completed"]
    paused = [(tuple(e["namespace"]), e["node"]) for e in done if e["status"] == "paused"]
    assert len(paused) == int(case.expect_interrupt)  # the interrupting node: not an update
    assert Counter((tuple(e["namespace"]), e["node"]) for e in done) == Counter(
        truth.nodes + paused
    )
    assert len([e for e in events if e["type"] == "node_started"]) == len(done)
    tools = [e for e in events if e["type"] == "tool_started"]
    assert [(t["tool"], t["node"]) for t in tools] == (
        [("get_weather", "tools")] if name == "react" else []
    )
