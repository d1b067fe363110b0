"""Client-executed tools (relay.client_tool) over SSE and JSON, on a prebuilt ReAct agent
with a scripted fake chat model, served by a real uvicorn: the run pauses with an
interrupt of type ``client_tool``, the client resumes with the result and the token, the
tool returns it to the graph. Each limit is exceeded once (RELAY_CLIENT_TOOL_MAX_ROUNDS,
RELAY_CLIENT_TOOL_MAX_RESULT_BYTES, RELAY_CLIENT_TOOL_TIMEOUT_S), and a stale or reused
token is a 409."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.tools import tool
from langgraph.types import interrupt

from relay import GraphAgent, Relay, client_tool
from tests.conftest import LiveServer, LiveServers, events_of, stream_get, stream_post
from tests.zoo.graphs import _react_agent
from tests.zoo.models import call, scripted, text

LOCAL_TIME = client_tool(
    "local_time",
    "The person's local date and time.",
    {"type": "object", "properties": {"format": {"type": "string"}}},
)


@tool
def confirm(question: str) -> str:
    """Ask the person to confirm something (an approval: a plain interrupt, no client tool)."""
    answer = interrupt({"type": "approval", "question": question})
    return "confirmed" if isinstance(answer, dict) and answer.get("approved") else "declined"


@pytest.fixture
def serve(app_env: dict[str, str], live_servers: LiveServers) -> Callable[..., LiveServer]:
    def make(*script: Any, **env: str) -> LiveServer:
        relay = Relay.from_env({**app_env, **env})
        graph = _react_agent(
            scripted(*script, name="clock-model"), [LOCAL_TIME, confirm], name="clock"
        )
        app = FastAPI(lifespan=relay.lifespan)
        relay.mount(app, GraphAgent(graph, name="clock"))
        return live_servers.start(app)

    return make


def ask_time(call_id: str = "call_time_1") -> Any:
    return call("local_time", {"format": "iso"}, call_id)


def paused_call(end: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    assert end["type"] == "paused", end
    [item] = end["interrupts"]
    return item["id"], item["value"]


def test_a_client_tool_round_trips_over_sse(
    serve: Callable[..., LiveServer], client: httpx.Client
) -> None:
    server = serve(ask_time(), text("It is 09:30 where you are."))
    events = events_of(
        stream_post(client, f"{server.url}/chat", {"message": "What time is it for me?"})
    )
    interrupt_id, value = paused_call(events[-1])
    assert value["type"] == "client_tool" and value["name"] == "local_time"
    assert value["arguments"] == {"format": "iso"} and value["call_id"] == "call_time_1"
    assert isinstance(value["token"], str) and len(value["token"]) >= 16
    assert value["round"] == 1
    started = [e for e in events if e["type"] == "tool_started"]
    assert [(e["tool"], e["call_id"]) for e in started] == [("local_time", "call_time_1")]
    record = client.get(f"{server.url}/turns/{events[-1]['turn_id']}").json()
    assert record["status"] == "paused"

    resumed = events_of(
        stream_post(
            client,
            f"{server.url}/chat/resume",
            {
                "thread_id": events[-1]["thread_id"],
                "turn_id": events[-1]["turn_id"],
                "resume": {
                    interrupt_id: {"result": {"iso": "2026-12-03T09:30"}, "token": value["token"]}
                },
            },
        )
    )
    assert resumed[-1]["type"] == "turn_completed", resumed[-1]
    assert resumed[-1]["response"]["answer"] == "It is 09:30 where you are."
    done = [e for e in resumed if e["type"] == "tool_completed"]
    assert [(e["tool"], e["status"]) for e in done] == [("local_time", "ok")]
    assert started[0]["client"] is True and started[0]["args"] == {"format": "iso"}

    # the spans hold it all: the turn replays from them as it streamed live
    turn = events[-1]["turn_id"]
    deadline = time.monotonic() + 10
    while client.get(f"{server.url}/turns/{turn}").json()["status"] == "running":
        assert time.monotonic() < deadline, "the turn never recorded its end"
        time.sleep(0.02)
    live = events_of(stream_get(client, f"{server.url}/turns/{turn}/events"))
    replayed = events_of(
        stream_get(client, f"{server.url}/turns/{turn}/events", {"source": "spans"})
    )
    assert replayed == live


def test_a_client_tool_round_trips_over_json_and_its_token_is_single_use(
    serve: Callable[..., LiveServer], client: httpx.Client
) -> None:
    server = serve(ask_time(), text("Noon."), ask_time("call_time_2"), text("One."))
    first = client.post(f"{server.url}/chat", json={"message": "Time?"}).json()
    assert first["status"] == "paused"
    assert first["answer"] == "Waiting for the client to run local_time."
    [item] = first["interrupts"]
    token = item["value"]["token"]
    ids = {"thread_id": first["thread_id"], "turn_id": first["turn_id"]}
    # the single answer may be sent bare (one pending interrupt), as for any interrupt
    body = {**ids, "resume": {"result": "12:00", "token": token}}
    done = client.post(f"{server.url}/chat/resume", json=body)
    assert done.status_code == 200 and done.json()["status"] == "answered", done.text
    assert done.json()["answer"] == "Noon."
    again = client.post(f"{server.url}/chat/resume", json=body)  # the same request: attaches
    assert again.status_code == 200 and again.json()["turn_id"] == first["turn_id"]
    reused = client.post(
        f"{server.url}/chat/resume", json={**ids, "resume": {"result": "13:00", "token": token}}
    )
    assert reused.status_code == 409, reused.text
    assert reused.json()["error"]["code"] == "client_tool_token_stale"

    second = client.post(
        f"{server.url}/chat", json={"message": "And now?", "thread_id": first["thread_id"]}
    ).json()
    assert second["status"] == "paused"
    stale = client.post(
        f"{server.url}/chat/resume",
        json={  # the first turn's token
            "thread_id": second["thread_id"],
            "turn_id": second["turn_id"],
            "resume": {"result": "14:00", "token": token},
        },
    )
    assert stale.status_code == 409, stale.text
    assert stale.json()["error"]["code"] == "client_tool_token_stale"
    missing = client.post(
        f"{server.url}/chat/resume",
        json={
            "thread_id": second["thread_id"],
            "turn_id": second["turn_id"],
            "resume": {"result": "14:00"},
        },
    )
    assert missing.status_code == 422, missing.text
    assert "token" in missing.json()["error"]["message"]
    failed = client.post(
        f"{server.url}/chat/resume",
        json={
            "thread_id": second["thread_id"],
            "turn_id": second["turn_id"],
            "resume": {
                "error": "The clock is unavailable.",
                "token": second["interrupts"][0]["value"]["token"],
            },
        },
    )
    assert failed.status_code == 200 and failed.json()["answer"] == "One.", failed.text


def test_a_result_over_the_size_limit_is_a_413(
    serve: Callable[..., LiveServer], client: httpx.Client
) -> None:
    server = serve(ask_time(), text("Fine."), RELAY_CLIENT_TOOL_MAX_RESULT_BYTES="64")
    paused = client.post(f"{server.url}/chat", json={"message": "Time?"}).json()
    token = paused["interrupts"][0]["value"]["token"]
    ids = {"thread_id": paused["thread_id"], "turn_id": paused["turn_id"]}
    big = client.post(
        f"{server.url}/chat/resume", json={**ids, "resume": {"result": "x" * 100, "token": token}}
    )
    assert big.status_code == 413, big.text
    error = big.json()["error"]
    assert error["code"] == "client_tool_result_too_large"
    assert "RELAY_CLIENT_TOOL_MAX_RESULT_BYTES" in error["message"]
    small = client.post(
        f"{server.url}/chat/resume",
        json={  # still paused: a smaller one
            **ids,
            "resume": {"result": "09:30", "token": token},
        },
    )
    assert small.status_code == 200 and small.json()["status"] == "answered", small.text


def test_more_rounds_than_allowed_end_the_turn(
    serve: Callable[..., LiveServer], client: httpx.Client
) -> None:
    server = serve(
        ask_time("call_a"), ask_time("call_b"), text("Free."), RELAY_CLIENT_TOOL_MAX_ROUNDS="1"
    )
    paused = client.post(f"{server.url}/chat", json={"message": "Time?"}).json()
    value = paused["interrupts"][0]["value"]
    ids = {"thread_id": paused["thread_id"], "turn_id": paused["turn_id"]}
    events = events_of(
        stream_post(
            client,
            f"{server.url}/chat/resume",
            {**ids, "resume": {"result": "09:30", "token": value["token"]}},
        )
    )
    end = events[-1]
    assert end["type"] == "error" and end["code"] == "client_tool_rounds", end
    assert "RELAY_CLIENT_TOOL_MAX_ROUNDS" in end["message"]
    assert [e["type"] for e in events].count("error") == 1
    record = client.get(f"{server.url}/turns/{paused['turn_id']}").json()
    assert record["status"] == "error"
    nxt = client.post(
        f"{server.url}/chat", json={"message": "Hello?", **{"thread_id": paused["thread_id"]}}
    )
    assert nxt.status_code == 200 and nxt.json()["answer"] == "Free.", nxt.text


def test_rounds_count_across_an_approval_in_between(
    serve: Callable[..., LiveServer], client: httpx.Client
) -> None:
    """RELAY_CLIENT_TOOL_MAX_ROUNDS counts a turn's client-tool pauses over all its runs:
    a resume that answers only an approval goes on counting (it does not start again at
    round 1), so the second call, after the approval, is past a limit of 1."""
    server = serve(
        ask_time("call_a"),
        call("confirm", {"question": "Book it?"}, "call_c"),
        ask_time("call_b"),
        text("Booked."),
        RELAY_CLIENT_TOOL_MAX_ROUNDS="1",
    )
    paused = client.post(f"{server.url}/chat", json={"message": "Book a call?"}).json()
    ids = {"thread_id": paused["thread_id"], "turn_id": paused["turn_id"]}
    value = paused["interrupts"][0]["value"]
    assert value["round"] == 1
    approval = client.post(
        f"{server.url}/chat/resume",
        json={**ids, "resume": {"result": "09:30", "token": value["token"]}},
    ).json()
    assert approval["status"] == "paused", approval
    assert approval["interrupts"][0]["value"]["type"] == "approval"
    events = events_of(
        stream_post(client, f"{server.url}/chat/resume", {**ids, "resume": {"approved": True}})
    )
    end = events[-1]
    assert end["type"] == "error" and end["code"] == "client_tool_rounds", end
    assert [e["type"] for e in events].count("error") == 1
    assert client.get(f"{server.url}/turns/{ids['turn_id']}").json()["status"] == "error"


def test_a_client_that_does_not_answer_in_time_ends_the_turn(
    serve: Callable[..., LiveServer], client: httpx.Client
) -> None:
    server = serve(ask_time(), text("Free."), RELAY_CLIENT_TOOL_TIMEOUT_S="0.3")
    frames = stream_post(client, f"{server.url}/chat", {"message": "Time?"})
    paused = events_of(frames)[-1]
    interrupt_id, value = paused_call(paused)
    # the turn's stream stays open through the pause and ends with the relay's error
    rest = events_of(
        stream_get(
            client, f"{server.url}/turns/{paused['turn_id']}/events", {"after": paused["seq"]}
        )
    )
    end = rest[-1]
    assert end["type"] == "error" and end["code"] == "client_tool_timeout", end
    assert "RELAY_CLIENT_TOOL_TIMEOUT_S" in end["message"]
    assert [e["type"] for e in rest].count("error") == 1
    record = client.get(f"{server.url}/turns/{paused['turn_id']}").json()
    assert record["status"] == "error" and record["ended_at"]
    late = client.post(
        f"{server.url}/chat/resume",
        json={
            "thread_id": paused["thread_id"],
            "turn_id": paused["turn_id"],
            "resume": {interrupt_id: {"result": "09:30", "token": value["token"]}},
        },
    )
    assert late.status_code == 409, late.text
    nxt = client.post(
        f"{server.url}/chat", json={"message": "Hello?", "thread_id": paused["thread_id"]}
    )
    assert nxt.status_code == 200 and nxt.json()["answer"] == "Free.", nxt.text


def test_after_a_restart_a_late_answer_is_refused_and_the_turn_ends_once(
    make_server: Callable[..., LiveServer], client: httpx.Client
) -> None:
    """The demo's local_time (a client tool of the demo graph): the instance that ran the
    pausing run stops before its timer fires; on the next instance (a short limit, long
    past) an answer is too late. Either the answer ends the turn (409
    ``client_tool_timeout``) or the start-up sweep did first (409: the turn is ending, or
    has ended and the token answers nothing); the tool never runs, and the turn ends with
    one error naming the limit."""
    first = make_server(RELAY_CLIENT_TOOL_TIMEOUT_S="3600")
    paused = events_of(
        stream_post(client, f"{first.url}/chat", {"message": "What time is it for me?"})
    )[-1]
    interrupt_id, value = paused_call(paused)
    first.stop()
    second = make_server(RELAY_CLIENT_TOOL_TIMEOUT_S="0.001")
    ids = {"thread_id": paused["thread_id"], "turn_id": paused["turn_id"]}
    late = client.post(
        f"{second.url}/chat/resume",
        json={
            **ids,
            "resume": {interrupt_id: {"result": {"local": "noon"}, "token": value["token"]}},
        },
    )
    assert late.status_code == 409, late.text
    code = late.json()["error"]["code"]
    assert code in {"client_tool_timeout", "turn_running", "client_tool_token_stale"}, late.text
    if code == "client_tool_timeout":
        assert "RELAY_CLIENT_TOOL_TIMEOUT_S" in late.json()["error"]["message"]
    events = events_of(
        stream_get(client, f"{second.url}/turns/{ids['turn_id']}/events", {"after": paused["seq"]})
    )
    assert events[-1]["type"] == "error" and events[-1]["code"] == "client_tool_timeout"
    assert [e["type"] for e in events].count("error") == 1
    assert "noon" not in str(events)  # the late result never reached the graph
    assert client.get(f"{second.url}/turns/{ids['turn_id']}").json()["status"] == "error"


def test_after_a_restart_a_turn_nobody_answers_ends_on_its_own(
    make_server: Callable[..., LiveServer], client: httpx.Client
) -> None:
    """The instance that ran the pausing run stops before its timer fires, and nobody
    ever answers: the next instance's start-up sweep ends the turn with its error, and
    its thread takes a new message again (it was ``409 thread_paused``). A turn paused
    on an approval (no client tool), newer, so the sweep reads it first, stays paused."""
    first = make_server(RELAY_CLIENT_TOOL_TIMEOUT_S="3600")
    clock = events_of(
        stream_post(client, f"{first.url}/chat", {"message": "What time is it for me?"})
    )[-1]
    paused_call(clock)
    approval = client.post(
        f"{first.url}/chat",
        json={"message": "Please refund order 1234 ($20).", "thread_id": "t-approval"},
    ).json()
    assert approval["status"] == "paused", approval
    busy = client.post(
        f"{first.url}/chat", json={"message": "Hello?", "thread_id": clock["thread_id"]}
    )
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "thread_paused"
    first.stop()
    # a stream ends by 60 s whatever happens (a reconnect frame): a sweep that does not
    # end the turn fails the test then, not at the suite's timeout
    second = make_server(
        RELAY_CLIENT_TOOL_TIMEOUT_S="0.001",
        RELAY_SERVER_TIMEOUT_S="60",
        RELAY_TURN_TIMEOUT_S="40",
        RELAY_TOOL_TIMEOUT_S="20",
    )
    events = events_of(
        stream_get(client, f"{second.url}/turns/{clock['turn_id']}/events", {"after": clock["seq"]})
    )
    assert events[-1]["type"] == "error" and events[-1]["code"] == "client_tool_timeout"
    assert [e["type"] for e in events].count("error") == 1
    assert client.get(f"{second.url}/turns/{clock['turn_id']}").json()["status"] == "error"
    assert client.get(f"{second.url}/turns/{approval['turn_id']}").json()["status"] == "paused"
    nxt = client.post(
        f"{second.url}/chat",
        json={"message": "How do refunds work?", "thread_id": clock["thread_id"]},
    )
    assert nxt.status_code == 200 and nxt.json()["status"] == "answered", nxt.text
