"""Graphs nobody here wrote, served by ``relay.mount(app, GraphAgent(graph))`` on a real
uvicorn, checked against what LangGraph itself says of the same graph (DESIGN.md §10).

For each case of :data:`tests.zoo.graphs.CASES` (a prebuilt ReAct agent, a supervisor, a
swarm, a deep agent with human-in-the-loop approval, a StateGraph with a conditional
edge, a fan-out, a ``Send`` map, a compiled subgraph and an ``interrupt()``):

- ``graph_topology`` is ``graph.get_graph()``;
- every node LangGraph's own ``astream(stream_mode="updates", subgraphs=True)`` reports
  has its ``node_started`` and ``node_completed``, in the same order, with the same
  namespace; the node that interrupts is ``paused``, a handoff is never an error;
- the interrupt pauses the turn and ``POST /chat/resume`` completes it;
- the model's tokens arrive as ``text_delta`` inside their (running) node;
- the replay from stored spans is the live stream, event for event;
- the AG-UI stream of the same turn opens and closes a step per node, in that order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langgraph.checkpoint.memory import InMemorySaver

from relay import GraphAgent, Relay
from tests.conftest import LiveServer, events_of, stream_get, stream_post
from tests.zoo import reference
from tests.zoo.graphs import CASES, Case

Namespace = tuple[str, ...]


@pytest.fixture
def zoo(app_env: dict[str, str]) -> Iterator[LiveServer]:
    """A server with every case's graph mounted, each under its case's name."""
    relay = Relay.from_env(app_env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, *(GraphAgent(case.build(), name=case.name) for case in CASES))
    server = LiveServer(app).start()
    yield server
    server.stop()


def _run(client: httpx.Client, url: str, case: Case) -> tuple[list[dict[str, Any]], ...]:
    """The turn over SSE: the first run's events and, when it paused, the resume's."""
    first = events_of(
        stream_post(client, f"{url}/graphs/{case.name}/chat", {"message": case.message})
    )
    if not case.expect_interrupt:
        return (first,)
    assert first[-1]["type"] == "paused", first[-1]
    resumed = events_of(
        stream_post(
            client,
            f"{url}/graphs/{case.name}/chat/resume",
            {
                "thread_id": first[0]["thread_id"],
                "turn_id": first[0]["turn_id"],
                "resume": case.resume,
            },
        )
    )
    return first, resumed


def _completed(events: list[dict[str, Any]]) -> list[tuple[Namespace, str]]:
    return [(tuple(e["namespace"]), e["node"]) for e in events if e["type"] == "node_completed"]


def _is_subsequence(wanted: list[Any], seen: list[Any]) -> bool:
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


def _check_nodes(events: list[dict[str, Any]], expected: list[tuple[Namespace, str]]) -> None:
    """What LangGraph reports, in its order, among the relay's node events; each
    node_completed after its node_started; no error anywhere."""
    completed = _completed(events)
    assert _is_subsequence(expected, completed), (expected, completed)
    started = {e["span_id"]: e for e in events if e["type"] == "node_started"}
    for done in (e for e in events if e["type"] == "node_completed"):
        start = started[done["span_id"]]
        assert (start["node"], start["namespace"]) == (done["node"], done["namespace"])
        assert start["seq"] < done["seq"]
        assert done["status"] in ("ok", "paused"), done
    assert not [e for e in events if e["type"] == "error"]


def _check_deltas(events: list[dict[str, Any]]) -> None:
    """Every text_delta sits inside a node that is running (started, not yet done)."""
    running: dict[str, str] = {}
    for event in events:
        if event["type"] == "node_started":
            running[event["span_id"]] = event["node"]
        elif event["type"] == "node_completed":
            running.pop(event["span_id"], None)
        elif event["type"] == "text_delta":
            assert event["node"] in running.values(), (event, running)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_graph_nobody_here_wrote(zoo: LiveServer, case: Case) -> None:
    truth = asyncio.run(
        reference.drive(
            case.build(InMemorySaver()), case, {"configurable": {"thread_id": "reference"}}
        )
    )
    with httpx.Client(timeout=30) as client:
        runs = _run(client, zoo.url, case)
        first = runs[0]
        topology = first[0]
        want = reference.topology(case.build())
        assert topology["type"] == "graph_topology"
        assert topology["nodes"] == want["nodes"]
        assert sorted(map(str, topology["edges"])) == sorted(
            str({**e, "conditional": bool(e["conditional"])}) for e in want["edges"]
        )
        _check_nodes(first, truth.first.nodes)
        if case.expect_interrupt:
            assert truth.resumed is not None
            paused = first[-1]
            assert paused["resume"]["path"] == f"/graphs/{case.name}/chat/resume"
            assert len(paused["interrupts"]) == 1
            assert paused["interrupts"][0]["value"] == truth.first.interrupts[0][1]
            assert any(e["type"] == "node_completed" and e["status"] == "paused" for e in first)
            resumed = runs[1]
            _check_nodes(resumed, truth.resumed.nodes)
            assert resumed[-1]["type"] == "turn_completed"
            assert resumed[-1]["response"]["answer"]
        else:
            assert first[-1]["type"] == "turn_completed"
            assert first[-1]["response"]["status"] == "answered"
            assert first[-1]["response"]["answer"]
        every = [e for run in runs for e in run]
        assert any(e["type"] == "text_delta" for e in every), "no model token was streamed"
        for run in runs:
            _check_deltas(run)

        turn_id = first[0]["turn_id"]
        listed = client.get(f"{zoo.url}/turns", params={"graph": case.name}).json()["turns"]
        assert [(t["turn_id"], t["graph"]) for t in listed] == [(turn_id, case.name)]
        live = events_of(stream_get(client, f"{zoo.url}/turns/{turn_id}/events"))
        replayed = events_of(
            stream_get(client, f"{zoo.url}/turns/{turn_id}/events", params={"source": "spans"})
        )
        assert [e["type"] for e in replayed] == [e["type"] for e in live]
        assert replayed == live

        agui = stream_get(client, f"{zoo.url}/turns/{turn_id}/events", params={"format": "agui"})
        steps = [
            (tuple(f.json["metadata"].get("namespace", ())), f.json["stepName"].split("#")[0])
            for f in agui
            if f.json.get("type") == "STEP_STARTED"
        ]
        assert steps == [
            (tuple(e["namespace"]), e["node"]) for e in live if e["type"] == "node_started"
        ]


def test_a_thread_and_its_turns_belong_to_their_graph(zoo: LiveServer) -> None:
    """Several graphs on one server share the checkpointer: a thread begun on one graph is
    not another graph's state, and a turn is found only through its own graph."""
    custom = next(c for c in CASES if c.name == "custom")
    with httpx.Client(timeout=30) as client:
        first = events_of(
            stream_post(
                client,
                f"{zoo.url}/graphs/custom/chat",
                {"message": custom.message, "thread_id": "shared-1"},
            )
        )
        assert first[-1]["type"] == "paused"
        turn_id = first[0]["turn_id"]
        other = client.post(
            f"{zoo.url}/graphs/react/chat", json={"message": "Weather?", "thread_id": "shared-1"}
        )
        assert other.status_code == 409, other.text
        assert other.json()["error"]["code"] == "thread_conflict"
        assert "/graphs/custom/chat" in other.json()["error"]["message"]
        wrong = client.post(
            f"{zoo.url}/graphs/react/chat/resume",
            json={"thread_id": "shared-1", "turn_id": turn_id, "resume": custom.resume},
        )
        assert wrong.status_code == 404 and wrong.json()["error"]["code"] == "unknown_turn"
        right = client.post(
            f"{zoo.url}/graphs/custom/chat/resume",
            json={"thread_id": "shared-1", "turn_id": turn_id, "resume": custom.resume},
        )
        assert right.status_code == 200 and right.json()["status"] == "answered"
