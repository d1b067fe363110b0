"""``relay.subscribe(turn_id, after)``: a turn's events in-process (DESIGN.md §2), the same
events a stream reader gets, across a pause and its resume."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.conftest import LiveServer, events_of, stream_get, stream_post

REFUND = "Please refund order 1234 ($20)."


def subscribed(server: LiveServer, turn_id: str, after: int = 0) -> list[dict[str, Any]]:
    async def collect() -> list[dict[str, Any]]:
        return [e.to_dict() async for e in server.relay.subscribe(turn_id, after)]

    assert server.loop is not None
    return asyncio.run_coroutine_threadsafe(collect(), server.loop).result(timeout=60)


def test_subscribe_follows_the_turn_through_its_pause(
    server: LiveServer, client: httpx.Client
) -> None:
    first = events_of(stream_post(client, f"{server.url}/chat", {"message": REFUND}))
    assert first[-1]["type"] == "paused"  # the run's stream ends; the turn goes on
    turn_id = first[0]["turn_id"]
    thread_id = first[0]["thread_id"]
    done: list[list[dict[str, Any]]] = []

    async def follow() -> None:  # a subscriber from the start, in another spelling
        done.append([e.to_dict() async for e in server.relay.subscribe(turn_id.upper())])

    assert server.loop is not None
    future = asyncio.run_coroutine_threadsafe(follow(), server.loop)
    resumed = client.post(
        f"{server.url}/chat/resume",
        json={"thread_id": thread_id, "turn_id": turn_id, "resume": {"approved": True}},
    )
    assert resumed.status_code == 200 and resumed.json()["status"] == "answered"
    future.result(timeout=60)
    events = done[0]
    types = [e["type"] for e in events]
    assert types[0] == "graph_topology" and "paused" in types
    assert types[-1] == "turn_completed"  # the turn's end, across the pause
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[: len(first)] == first
    whole = events_of(stream_get(client, f"{server.url}/turns/{turn_id}/events"))
    assert events == whole  # the very events a stream reader gets
    assert subscribed(server, turn_id, after=len(events) - 1) == [events[-1]]
