"""A resume may answer some of the pending interrupts (issue 33, item 2).

A graph written for this test: two nodes run side by side from START, each asks its own
question with ``interrupt``, and a last node joins their answers. LangGraph takes a
``Command(resume={id: answer})`` that answers one of two pending interrupts: the answered
node goes on, and the run pauses again on the other. The relay does the same on a real
uvicorn, over SSE, JSON and AG-UI (before, it refused such a resume with a 422): the turn
pauses again on what is left, in the same turn's next run, and the last answer ends it
with LangGraph's own final answer."""

from __future__ import annotations

import asyncio
import operator
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from fastapi import FastAPI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from relay import GraphAgent, Relay
from tests import contract
from tests.conftest import LiveServer, events_of, stream_get, stream_post
from tests.delivery.agui_checks import post_agui


class State(TypedDict):
    got: Annotated[list[str], operator.add]
    answer: str


def ask_a(state: State) -> dict[str, Any]:
    return {"got": [f"a={interrupt({'ask': 'colour'})}"]}


def ask_b(state: State) -> dict[str, Any]:
    return {"got": [f"b={interrupt({'ask': 'size'})}"]}


def join(state: State) -> dict[str, Any]:
    return {"answer": ", ".join(sorted(state["got"]))}


def two_questions(checkpointer: Any = None) -> Any:
    builder = StateGraph(State)
    builder.add_node("ask_a", ask_a)
    builder.add_node("ask_b", ask_b)
    builder.add_node("join", join)
    builder.add_edge(START, "ask_a")
    builder.add_edge(START, "ask_b")
    builder.add_edge(["ask_a", "ask_b"], "join")
    builder.add_edge("join", END)
    return builder.compile(checkpointer=checkpointer)


def langgraphs_own() -> list[Any]:
    """LangGraph's view: what is pending at first, after answering 'colour' alone, and
    the final state once 'size' is answered."""

    async def run() -> list[Any]:
        graph = two_questions(InMemorySaver())
        config: Any = {"configurable": {"thread_id": "own"}}
        await graph.ainvoke({"got": []}, config)
        first = (await graph.aget_state(config)).interrupts
        colour = next(i for i in first if i.value == {"ask": "colour"})
        await graph.ainvoke(Command(resume={colour.id: "red"}), config)
        second = (await graph.aget_state(config)).interrupts
        final = await graph.ainvoke(Command(resume={second[0].id: "L"}), config)
        return [[i.value for i in first], [i.value for i in second], final]

    return asyncio.run(run())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(RELAY_DATA_DIR=str(tmp_path_factory.mktemp("partial")), OTEL_TRACES_EXPORTER="none")
    relay = Relay.from_env(env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(two_questions(), name="two"))
    server = LiveServer(app).start()
    yield server
    server.stop()


def pending_of(paused: dict[str, Any]) -> dict[str, str]:
    """``{question: interrupt id}`` of a ``paused`` event."""
    return {i["value"]["ask"]: i["id"] for i in paused["interrupts"]}


def test_a_resume_answers_one_of_two_interrupts_over_sse_and_json(served: LiveServer) -> None:
    first_own, second_own, final_own = langgraphs_own()
    url = f"{served.url}/graphs/two"
    with httpx.Client(timeout=60) as client:
        started = events_of(stream_post(client, f"{url}/chat", {"input": {"got": []}}))
        contract.check_stream(started)
        paused = started[-1]
        assert paused["type"] == "paused"
        asked = pending_of(paused)
        assert sorted(asked) == sorted(v["ask"] for v in first_own)
        turn = {"thread_id": paused["thread_id"], "turn_id": paused["turn_id"]}
        # one of the two answered: the turn pauses again, on the other, as LangGraph does
        again = events_of(
            stream_post(client, f"{url}/chat/resume", {**turn, "resume": {asked["colour"]: "red"}})
        )
        contract.check_stream(again)
        assert again[-1]["type"] == "paused" and again[-1]["turn_id"] == turn["turn_id"]
        left = pending_of(again[-1])
        assert [{"ask": ask} for ask in left] == second_own
        assert left["size"] == asked["size"]  # the same interrupt, still waiting
        done = [e["node"] for e in again if e["type"] == "node_completed"]
        assert "ask_a" in done and "join" not in done
        record = client.get(f"{served.url}/turns/{turn['turn_id']}").json()
        assert record["status"] == "paused"
        # the last answer, as JSON: the turn ends with LangGraph's own answer
        answered = client.post(f"{url}/chat/resume", json={**turn, "resume": {left["size"]: "L"}})
        assert answered.status_code == 200, answered.text
        assert answered.json()["status"] == "answered"
        assert answered.json()["answer"] == final_own["answer"] == "a=red, b=L"
        # an answer to an interrupt that is no longer pending is refused, clearly
        stale = client.post(f"{url}/chat/resume", json={**turn, "resume": {asked["size"]: "M"}})
        assert stale.status_code == 409, stale.text
        # the turn's three runs replay from the stored spans as they went live
        events = f"{served.url}/turns/{turn['turn_id']}/events"
        live = events_of(stream_get(client, events))
        replayed = events_of(stream_get(client, events, {"source": "spans", "speed": "0"}))
        assert [e["type"] for e in live].count("paused") == 2
        assert replayed == live


def test_an_agui_resume_answers_one_of_two_interrupts(served: LiveServer) -> None:
    thread = uuid.uuid4().hex

    def body(run: str, resume: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "threadId": thread,
            "runId": run,
            "messages": [{"id": "m1", "role": "user", "content": "Pick for me."}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        if resume is not None:
            out["resume"] = resume
        return out

    url = f"{served.url}/graphs/two"
    with httpx.Client(timeout=60) as client:
        first = post_agui(client, url, body("run-1"))
        outcome = first[-1]["outcome"]
        assert first[-1]["type"] == "RUN_FINISHED" and outcome["type"] == "interrupt"
        asked = {i["metadata"]["value"]["ask"]: i["id"] for i in outcome["interrupts"]}
        assert sorted(asked) == ["colour", "size"]
        one = [{"interruptId": asked["size"], "status": "resolved", "payload": "S"}]
        second = post_agui(client, url, body("run-2", one))
        assert second[-1]["type"] == "RUN_FINISHED"
        left = second[-1]["outcome"]
        assert left["type"] == "interrupt"
        assert [i["id"] for i in left["interrupts"]] == [asked["colour"]]
        other = [{"interruptId": asked["colour"], "status": "resolved", "payload": "blue"}]
        third = post_agui(client, url, body("run-3", other))
        assert third[-1]["type"] == "RUN_FINISHED"
        assert third[-1]["outcome"]["type"] == "success"
        assert third[-1]["result"]["answer"] == "a=blue, b=S"
