"""LangGraph's streaming protocol (relay/http/agent_server_events.py) on a real uvicorn:
``run.start`` and ``input.respond`` posted to ``/threads/{id}/commands`` start and resume
runs that are span-relay turns, and ``/threads/{id}/stream/events`` shows them; a stream
cut anywhere and opened again with its cursor (``since``, or ``Last-Event-ID``) gets
exactly what it missed, and the thread's later turns after it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.agent_server_graphs import ANSWER, agent_server_app
from tests.conftest import LiveServer, LiveServers

ALL = ["lifecycle", "values", "updates", "messages", "custom", "input"]


@pytest.fixture
def server(app_env: dict[str, str], live_servers: LiveServers) -> LiveServer:
    return live_servers.start(agent_server_app(app_env))


def command(url: str, thread_id: str, method: str, params: dict[str, Any]) -> httpx.Response:
    body = {"id": 1, "method": method, "params": params}
    return httpx.post(f"{url}/threads/{thread_id}/commands", json=body, timeout=30)


def read_events(
    url: str,
    thread_id: str,
    until: Callable[[list[dict[str, Any]]], bool],
    channels: list[str] = ALL,
    since: int | None = None,
    headers: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Events of the thread's stream until ``until(events so far)``; the connection is
    then closed (a cut, when the stream would have gone on)."""
    body: dict[str, Any] = {"channels": channels}
    if since is not None:
        body["since"] = since
    found: list[dict[str, Any]] = []
    with httpx.stream(
        "POST",
        f"{url}/threads/{thread_id}/stream/events",
        json=body,
        headers=headers or {},
        timeout=30,
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        frame: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                frame[name] = value
                continue
            if "data" in frame:
                event = json.loads(frame["data"])
                assert frame["event"] == event["method"] and int(frame["id"]) == event["seq"]
                found.append(event)
                if until(found):
                    break
            frame = {}
    return found


def lifecycle(events: list[dict[str, Any]]) -> list[str]:
    return [e["params"]["data"]["event"] for e in events if e["method"] == "lifecycle"]


def ended(*statuses: str) -> Callable[[list[dict[str, Any]]], bool]:
    def done(events: list[dict[str, Any]]) -> bool:
        return bool(events) and lifecycle(events[-1:]) in [[s] for s in statuses]

    return done


def after(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda events: len(events) >= count


def test_run_start_is_a_turn_and_the_stream_shows_it(server: LiveServer) -> None:
    thread_id = str(uuid.uuid4())
    started = command(
        server.url,
        thread_id,
        "run.start",
        {"assistant_id": "chat", "input": {"messages": [{"role": "user", "content": "hi"}]}},
    )
    assert started.status_code == 200, started.text
    answer = started.json()
    assert answer["type"] == "success" and answer["id"] == 1
    run_id = answer["result"]["run_id"]
    assert httpx.get(f"{server.url}/turns/{run_id}").json()["thread_id"] == thread_id
    assert httpx.get(f"{server.url}/threads/{thread_id}").status_code == 200

    events = read_events(server.url, thread_id, ended("completed"))
    assert lifecycle(events) == ["running", "completed"]
    assert events[0]["params"]["data"] == {"event": "running", "graph_name": "chat"}
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))  # ordered, no id twice
    assert len({e["event_id"] for e in events}) == len(events)
    assert all(e["event_id"].startswith(f"{run_id}:") for e in events)
    assert all(e["params"]["namespace"] == [] for e in events)

    customs = [e["params"]["data"] for e in events if e["method"] == "custom"]
    assert customs == [{"payload": {"stage": "prepare"}}]
    updates = [e for e in events if e["method"] == "updates"]
    assert [u["params"]["node"] for u in updates] == ["prepare", "agent"]
    assert updates[0]["params"]["data"] == {"node": "prepare", "values": {"notes": "ready"}}
    values = [e["params"]["data"] for e in events if e["method"] == "values"]
    assert values[-1]["notes"] == "ready"
    assert values[-1]["messages"][-1]["content"] == ANSWER

    messages = [e["params"]["data"] for e in events if e["method"] == "messages"]
    kinds = [m["event"] for m in messages]
    assert kinds[:2] == ["message-start", "content-block-start"]
    assert messages[0]["role"] == "ai"
    deltas = [m["delta"]["text"] for m in messages if m["event"] == "content-block-delta"]
    assert "".join(deltas) == ANSWER
    finished = [m for m in messages if m["event"] == "content-block-finish"]
    assert finished[0]["content"] == {"type": "text", "text": ANSWER}
    assert kinds.count("message-start") == kinds.count("message-finish")

    # a connection asks for some channels: it gets those, with the same ids
    only = read_events(server.url, thread_id, ended("completed"), channels=["lifecycle", "custom"])
    assert only == [e for e in events if e["method"] in ("lifecycle", "custom")]


def test_a_cut_stream_reconnects_with_its_cursor_and_gets_exactly_the_rest(
    server: LiveServer,
) -> None:
    url = server.url
    thread_id = str(uuid.uuid4())
    params = {"assistant_id": "approval", "input": {"question": "Go?"}}
    first_run = command(url, thread_id, "run.start", params).json()["result"]["run_id"]

    # the whole of the first run, as one connection sees it
    whole = read_events(url, thread_id, ended("interrupted"))
    assert lifecycle(whole) == ["running", "interrupted"]
    [asked] = [e for e in whole if e["method"] == "input.requested"]
    assert asked["params"]["data"]["payload"] == {"question": "Go?"}
    assert "__interrupt__" not in whole[-2]["params"]["data"]

    # cut after each event in turn: the reconnect with the cursor has exactly the rest
    for cut in range(1, len(whole)):
        head = read_events(url, thread_id, after(cut))
        assert head == whole[:cut]
        rest = read_events(url, thread_id, ended("interrupted"), since=head[-1]["seq"])
        assert head + rest == whole

    # answered: the paused turn goes on; a reconnect by Last-Event-ID gets only the resume
    interrupt_id = asked["params"]["data"]["interrupt_id"]
    responded = command(
        url,
        thread_id,
        "input.respond",
        {"namespace": [], "interrupt_id": interrupt_id, "response": "yes"},
    )
    assert responded.status_code == 200, responded.text
    assert responded.json()["result"]["run_id"] == first_run  # a resume is the same turn
    resumed = read_events(
        url, thread_id, ended("completed"), headers={"Last-Event-ID": str(whole[-1]["seq"])}
    )
    assert lifecycle(resumed) == ["running", "completed"]
    assert resumed[0]["seq"] > whole[-1]["seq"]
    assert [e["params"]["data"] for e in resumed if e["method"] == "values"][-1] == {
        "question": "Go?",
        "answer": "yes",
    }

    # the thread's next run (a new turn): the stream goes on from the first turn into it
    second = command(url, thread_id, "run.start", {**params, "input": {"question": "Again?"}})
    second_run = second.json()["result"]["run_id"]
    assert second_run != first_run
    onward = read_events(url, thread_id, ended("interrupted"), since=resumed[-1]["seq"])
    assert lifecycle(onward) == ["running", "interrupted"]
    assert all(e["event_id"].startswith(f"{second_run}:") for e in onward)
    assert onward[0]["seq"] > resumed[-1]["seq"]

    # everything from the start (since 0) is the three parts, nothing else
    everything = read_events(url, thread_id, lambda events: events[-1] == onward[-1], since=0)
    assert everything == whole + resumed + onward

    # run.start on the interrupted thread resumes it (the protocol's "interrupted -> resume")
    again = command(url, thread_id, "run.start", {"assistant_id": "approval", "input": "no"})
    assert again.json()["result"]["run_id"] == second_run
    last = read_events(url, thread_id, ended("completed"), since=onward[-1]["seq"])
    assert [e["params"]["data"] for e in last if e["method"] == "values"][-1]["answer"] == "no"


def test_a_stream_without_a_cursor_starts_at_the_latest_turn(server: LiveServer) -> None:
    url = server.url
    thread_id = str(uuid.uuid4())
    for question in ("One?", "Two?"):
        params = {"assistant_id": "broken", "input": {"question": question}}
        assert command(url, thread_id, "run.start", params).status_code == 200
        failed = read_events(url, thread_id, ended("failed"))
    assert lifecycle(failed) == ["running", "failed"]
    assert "step fail" in failed[-1]["params"]["data"]["error"]  # the relay's words
    turns = httpx.get(f"{url}/turns", params={"thread_id": thread_id}).json()
    latest = max(turns["turns"], key=lambda t: t["started_at"])["turn_id"]
    assert all(e["event_id"].startswith(f"{latest}:") for e in failed)


def test_bad_commands_and_stream_requests_are_4xx(server: LiveServer) -> None:
    url = server.url
    thread_id = str(uuid.uuid4())
    posted = httpx.post(f"{url}/threads/{thread_id}/commands", json={"method": "run.start"})
    assert posted.status_code == 422 and posted.json()["error"] == "invalid_argument"
    unknown = command(url, thread_id, "run.fly", {})
    assert unknown.status_code == 422
    assert unknown.json() | {"message": ""} == {
        "type": "error",
        "id": 1,
        "error": "unknown_command",
        "code": "unknown_command",
        "message": "",
    }
    assert command(url, thread_id, "state.fork", {}).json()["error"] == "not_supported"
    no_assistant = command(url, thread_id, "run.start", {"assistant_id": "nope", "input": {}})
    assert no_assistant.status_code == 404
    assert command(url, thread_id, "run.start", {"input": {}}).status_code == 422
    nothing_paused = command(
        url, thread_id, "input.respond", {"namespace": [], "interrupt_id": "x", "response": 1}
    )
    assert nothing_paused.status_code == 404 and nothing_paused.json()["error"] == "no_such_run"

    events = f"{url}/threads/{thread_id}/stream/events"
    assert httpx.post(events, json={"channels": ["values"]}).status_code == 404  # no thread
    assert command(url, thread_id, "run.start", {"assistant_id": "broken", "input": {}}).is_success
    for body in (
        {},
        {"channels": []},
        {"channels": ["nope"]},
        {"channels": ["values"], "since": -1},
        {"channels": ["values"], "since": "x"},
        {"channels": ["values"], "namespaces": "x"},
        {"channels": ["values"], "what": 1},
    ):
        answer = httpx.post(events, json=body)
        assert answer.status_code == 422, body
        assert answer.json()["error"]["code"] in ("invalid_request", "unknown_fields")
    bad_header = httpx.post(events, json={"channels": ["values"]}, headers={"Last-Event-ID": "x"})
    assert bad_header.status_code == 422
    future = httpx.post(events, json={"channels": ["values"], "since": 2 << 32})  # turn 2
    assert future.status_code == 400 and future.json()["error"]["code"] == "invalid_cursor"


def test_after_a_restart_the_cursor_holds_from_the_stored_spans(
    app_env: dict[str, str], live_servers: LiveServers
) -> None:
    first = live_servers.start(agent_server_app(app_env))
    thread_id = str(uuid.uuid4())
    params = {"assistant_id": "chat", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    assert command(first.url, thread_id, "run.start", params).status_code == 200
    whole = read_events(first.url, thread_id, ended("completed"))
    first.stop()

    # a new process on the same data: the in-process bus holds no log; the turn's stored
    # spans give it back, and the same events with the same ids come of it
    again = live_servers.start(agent_server_app(app_env))
    for cut in (1, len(whole) // 2, len(whole) - 1):
        rest = read_events(again.url, thread_id, ended("completed"), since=whole[cut - 1]["seq"])
        assert whole[:cut] + rest == whole
