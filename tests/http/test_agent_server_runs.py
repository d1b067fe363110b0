"""The runs routes of LangGraph's Agent Server API (relay/http/agent_server_runs.py) on a real
uvicorn: a background run, read while it runs, its stream cut and joined again with
``Last-Event-ID`` (the rest, nothing twice), the whole stream again after the run ended
and after a restart (from the stored spans), a cancel, a join; and their clear errors.

The run waits on a gate (a ``threading.Event`` the test sets) between its two halves, so
the cut always falls while it runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, TypedDict

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import AIMessage
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph_sdk import get_sync_client

from relay import GraphAgent, Relay
from tests.conftest import LiveServers

GATES: dict[str, threading.Event] = {}


class Gated(TypedDict, total=False):
    gate: str
    messages: list[Any]
    said: list[str]


async def first(state: Gated) -> dict[str, Any]:
    write = get_stream_writer()
    for n in range(3):
        write({"part": n})
    return {"said": ["first"]}


async def second(state: Gated) -> dict[str, Any]:
    import asyncio

    gate = GATES[state["gate"]]
    await asyncio.to_thread(gate.wait, 30)
    write = get_stream_writer()
    for n in range(3, 6):
        write({"part": n})
    return {"said": [*state.get("said", []), "second"], "messages": [AIMessage("done", id="m1")]}


def gated_graph() -> Any:
    builder = StateGraph(Gated)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile()


def gated_app(env: dict[str, str]) -> FastAPI:
    relay = Relay.from_env(env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(gated_graph(), name="gated"))
    return app


@pytest.fixture
def gate() -> Iterator[tuple[str, threading.Event]]:
    name = f"gate-{len(GATES)}-{threading.get_ident()}"
    GATES[name] = threading.Event()
    yield name, GATES[name]
    GATES[name].set()
    del GATES[name]


Frame = tuple[str, str, Any]  # (id, event, data)


def frames_of(response: httpx.Response, stop_after: int | None = None) -> list[Frame]:
    """The SSE frames of a streamed response (all, or the first ``stop_after``)."""
    import json

    found: list[Frame] = []
    event_id, name, data = "", "", None
    for line in response.iter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and name:
            found.append((event_id, name, data))
            event_id, name, data = "", "", None
            if stop_after is not None and len(found) >= stop_after:
                break
    return found


def start_run(url: str, thread_id: str, gate: str) -> dict[str, Any]:
    created = httpx.post(
        f"{url}/threads/{thread_id}/runs",
        json={
            "assistant_id": "gated",
            "input": {"gate": gate},
            "if_not_exists": "create",
            "stream_mode": ["values", "updates", "custom"],
        },
    )
    assert created.status_code == 200, created.text
    run = created.json()
    assert created.headers["content-location"] == f"/threads/{thread_id}/runs/{run['run_id']}"
    return run


def test_a_background_run_cut_and_joined_again_gets_exactly_the_rest(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    thread_id = "2b6f3c1e-8f7a-4d55-9a55-0c3b2f1d9e01"
    run = start_run(server.url, thread_id, gate[0])
    run_id = run["run_id"]
    assert run["status"] == "running" and run["thread_id"] == thread_id
    sdk = get_sync_client(url=server.url)
    assert sdk.runs.get(thread_id, run_id)["status"] == "running"
    assert [r["run_id"] for r in sdk.runs.list(thread_id)] == [run_id]

    join = f"{server.url}/threads/{thread_id}/runs/{run_id}/stream"
    modes = [("stream_mode", m) for m in ("values", "updates", "custom")]
    with httpx.stream("GET", join, params=modes, timeout=30) as first_part:
        assert first_part.status_code == 200
        assert first_part.headers["location"].startswith(
            f"/threads/{thread_id}/runs/{run_id}/stream?stream_mode=values"
        )
        # metadata, the input's values, 3 custom, the first step's update (the gate holds
        # the second step)
        before = frames_of(first_part, stop_after=6)
    assert [name for _, name, _ in before] == [
        "metadata",
        "values",
        "custom",
        "custom",
        "custom",
        "updates",
    ]
    assert [d for _, name, d in before if name == "custom"] == [{"part": n} for n in range(3)]

    gate[1].set()
    with httpx.stream(
        "GET", join, params=modes, headers={"Last-Event-ID": before[-1][0]}, timeout=30
    ) as rest_part:
        rest = frames_of(rest_part)
    assert [d for _, name, d in rest if name == "custom"] == [{"part": n} for n in range(3, 6)]
    assert rest[-1][1] == "values" and rest[-1][2]["said"] == ["first", "second"]

    with httpx.stream("GET", join, params=modes, headers={"Last-Event-ID": "-1"}) as whole:
        everything = frames_of(whole)
    assert everything == before + rest  # the same ids, the same frames: none lost, none twice
    ids = [event_id for event_id, _, _ in everything]
    assert len(set(ids)) == len(ids) and all(ids)

    assert sdk.runs.get(thread_id, run_id)["status"] == "success"
    joined = httpx.get(f"{join.removesuffix('/stream')}/join").json()
    assert joined["said"] == ["first", "second"]
    # the JS and Python SDKs read the same stream: the Python one joins it too
    parts = list(sdk.runs.join_stream(thread_id, run_id, stream_mode="custom"))
    assert [p.data for p in parts if p.event == "custom"] == [{"part": n} for n in range(6)]

    # a restart: the bus held the log in memory; the stored spans give the same frames
    live_servers.stop_all()
    again = live_servers.start(gated_app(app_env))
    url = f"{again.url}/threads/{thread_id}/runs/{run_id}/stream"
    with httpx.stream("GET", url, params=modes, headers={"Last-Event-ID": "-1"}) as replayed:
        assert frames_of(replayed) == everything
    with httpx.stream(
        "GET", url, params=modes, headers={"Last-Event-ID": before[-1][0]}
    ) as replayed_rest:
        assert frames_of(replayed_rest) == rest


def test_a_cancelled_run_ends_interrupted_and_its_join_says_so(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    thread_id = "2b6f3c1e-8f7a-4d55-9a55-0c3b2f1d9e02"
    run_id = start_run(server.url, thread_id, gate[0])["run_id"]
    base = f"{server.url}/threads/{thread_id}/runs/{run_id}"
    refused = httpx.post(f"{base}/cancel", params={"action": "rollback"})
    assert refused.status_code == 422 and "action" in refused.text  # rollback: not served
    cancelled = httpx.post(f"{base}/cancel", params={"wait": "1"}, timeout=30)
    assert cancelled.status_code == 200
    assert cancelled.json()["__error__"]["error"] == "cancelled"
    assert httpx.get(base).json()["status"] == "interrupted"
    with httpx.stream("GET", f"{base}/stream", headers={"Last-Event-ID": "-1"}) as stream:
        frames = frames_of(stream)
    assert frames[-1][1] == "error" and frames[-1][2]["error"] == "cancelled"


def test_the_runs_routes_refuse_what_is_wrong(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    thread_id = "2b6f3c1e-8f7a-4d55-9a55-0c3b2f1d9e03"
    run_id = start_run(server.url, thread_id, gate[0])["run_id"]
    base = f"{server.url}/threads/{thread_id}/runs"
    bad = httpx.get(f"{base}/{run_id}/stream", headers={"Last-Event-ID": "nonsense"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_last_event_id"
    assert httpx.get(f"{base}/{'0' * 32}").status_code == 404
    other = f"{server.url}/threads/2b6f3c1e-8f7a-4d55-9a55-0c3b2f1d9eff/runs/{run_id}"
    assert httpx.get(other).status_code == 404  # a run is found on its own thread only
    busy = httpx.post(base, json={"assistant_id": "gated", "input": {"gate": gate[0]}})
    assert busy.status_code == 409  # the thread runs a run: multitask_strategy reject
    for strategy in ("interrupt", "rollback", "enqueue"):
        other = httpx.post(
            base,
            json={"assistant_id": "gated", "input": {}, "multitask_strategy": strategy},
        )
        assert other.status_code == 422, other.text
        assert other.json()["error"]["code"] == "unsupported_multitask_strategy"
        assert "only 'reject'" in other.json()["error"]["message"]
    assert httpx.get(f"{base}", params={"status": "nonsense"}).status_code == 422
    assert [r["status"] for r in httpx.get(base, params={"status": "running"}).json()] == [
        "running"
    ]
    gate[1].set()
    assert httpx.get(f"{base}/{run_id}/join", timeout=30).json()["said"] == ["first", "second"]


def test_on_disconnect_cancel_stops_the_run_and_continue_lets_it_end(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    outcomes = {}
    for n, on_disconnect in enumerate(("cancel", "continue")):
        thread_id = f"2b6f3c1e-8f7a-4d55-9a55-0c3b2f1d9e1{n}"
        body = {
            "assistant_id": "gated",
            "input": {"gate": gate[0]},
            "if_not_exists": "create",
            "stream_mode": ["values", "updates", "custom"],
            "on_disconnect": on_disconnect,
        }
        url = f"{server.url}/threads/{thread_id}/runs/stream"
        with httpx.stream("POST", url, json=body, timeout=30) as stream:
            location = stream.headers["content-location"]
            # the first step's frames: the gate holds the second; then the reader goes
            assert len(frames_of(stream, stop_after=6)) == 6
        if on_disconnect == "continue":
            gate[1].set()
        outcomes[on_disconnect] = httpx.get(f"{server.url}{location}/join", timeout=30).json()
        status = httpx.get(f"{server.url}{location}").json()["status"]
        outcomes[on_disconnect]["status"] = status
    assert outcomes["cancel"]["__error__"]["error"] == "cancelled"
    assert outcomes["cancel"]["status"] == "interrupted"
    assert outcomes["continue"]["said"] == ["first", "second"]
    assert outcomes["continue"]["status"] == "success"
