"""``relay.subscribe(turn_id, after)``: a turn's events in-process (DESIGN.md §2), the same
events a stream reader gets, across a pause and its resume; and off the store while the
turn is live: its record is read only for another spelling of the id, a finished turn,
or one the bus does not hold."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import httpx
import pytest

from relay.bus import UnknownTurn
from tests.conftest import LiveServer, ModelGate, events_of, stream_get, stream_post

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


class CountedTurns:
    """The relay's turn store, noting every record read (``get``) and the task that made
    it; everything else goes to the store as it is."""

    def __init__(self, turns: Any) -> None:
        self._turns = turns
        self._reads: list[tuple[asyncio.Task[Any] | None, str]] = []

    async def get(self, turn_id: str) -> Any:
        self._reads.append((asyncio.current_task(), turn_id))
        return await self._turns.get(turn_id)

    def reads(self, task: asyncio.Task[Any] | None) -> list[str]:
        """The ids ``task`` read records of (a subscriber's: not a route's)."""
        return [turn_id for by, turn_id in self._reads if by is task and task is not None]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._turns, name)


@pytest.fixture
def counted(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> CountedTurns:
    """``relay.turns`` (what ``relay.subscribe`` reads) counting its reads; the runs keep
    the store they were given."""
    turns = CountedTurns(server.relay.turns)
    monkeypatch.setattr(server.relay, "turns", turns)
    return turns


class Follower:
    """``relay.subscribe(spelling, after)`` on the server's loop, from a test's thread:
    ``attached`` is set once it has had its first event."""

    def __init__(self, server: LiveServer, spelling: str, after: int = 0) -> None:
        self.attached = threading.Event()
        self.events: list[dict[str, Any]] = []
        self.task: asyncio.Task[Any] | None = None  # the subscriber's, on the server's loop

        async def follow() -> None:
            self.task = asyncio.current_task()
            async for event in server.relay.subscribe(spelling, after):
                self.events.append(event.to_dict())
                self.attached.set()

        assert server.loop is not None
        self._future = asyncio.run_coroutine_threadsafe(follow(), server.loop)

    def result(self) -> list[dict[str, Any]]:
        self._future.result(timeout=60)
        return self.events


def test_subscribe_reads_no_record_while_the_turn_runs(
    server: LiveServer, client: httpx.Client, counted: CountedTurns, model_gate: ModelGate
) -> None:
    turn_id = str(uuid.uuid4()).upper()  # the client's own spelling
    started = client.post(
        f"{server.url}/chat",
        json={"message": "How do refunds work?", "turn_id": turn_id},
        headers={"Prefer": "respond-async"},
    )
    assert started.status_code == 202
    assert model_gate.held.wait(30)  # the turn runs: generate waits at the gate
    follower = Follower(server, turn_id)
    assert follower.attached.wait(30)  # attached while the turn runs
    model_gate.open()
    events = follower.result()
    assert (
        counted.reads(follower.task) == []
    )  # the bus knew the live turn: the store was never asked
    assert events[0]["type"] == "graph_topology" and events[-1]["type"] == "turn_completed"
    assert {e["turn_id"] for e in events} == {turn_id}
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert (
        events
        == events_of(stream_get(client, f"{server.url}/turns/{turn_id}/events"))[: len(events)]
    )


def test_subscribe_reads_no_record_for_a_paused_turn_in_its_own_spelling(
    server: LiveServer, client: httpx.Client, counted: CountedTurns
) -> None:
    first = events_of(stream_post(client, f"{server.url}/chat", {"message": REFUND}))
    assert first[-1]["type"] == "paused"  # the turn is not over: its log stays live
    turn_id, thread_id = first[0]["turn_id"], first[0]["thread_id"]
    follower = Follower(server, turn_id, after=len(first) - 1)
    assert follower.attached.wait(30)
    resumed = client.post(
        f"{server.url}/chat/resume",
        json={"thread_id": thread_id, "turn_id": turn_id, "resume": {"approved": True}},
    )
    assert resumed.status_code == 200
    events = follower.result()
    assert counted.reads(follower.task) == []
    assert events[0] == first[-1] and events[-1]["type"] == "turn_completed"


def test_subscribe_reads_the_record_for_another_spelling_of_a_live_turn(
    server: LiveServer, client: httpx.Client, counted: CountedTurns, model_gate: ModelGate
) -> None:
    created = str(uuid.uuid4())  # hyphens, lower case
    other = created.replace("-", "").upper()
    started = client.post(
        f"{server.url}/chat",
        json={"message": "How do refunds work?", "turn_id": created},
        headers={"Prefer": "respond-async"},
    )
    assert started.status_code == 202
    assert model_gate.held.wait(30)
    follower = Follower(server, other)
    assert follower.attached.wait(30)
    model_gate.open()
    events = follower.result()
    assert counted.reads(follower.task) == [other]  # once, to learn the turn's own spelling
    assert {e["turn_id"] for e in events} == {created}  # as the client created it
    assert events[-1]["type"] == "turn_completed"


def test_subscribe_reads_the_record_of_a_finished_turn(
    server: LiveServer, client: httpx.Client, counted: CountedTurns
) -> None:
    answered = client.post(f"{server.url}/chat", json={"message": "How do refunds work?"})
    assert answered.status_code == 200
    turn_id = answered.json()["turn_id"]
    whole = events_of(stream_get(client, f"{server.url}/turns/{turn_id}/events"))
    follower = Follower(server, turn_id)
    events = follower.result()
    assert events[-1]["type"] == "turn_completed" and events == whole[: len(events)]
    assert counted.reads(follower.task) == [turn_id]  # the log is over: the record is read
    again = Follower(server, turn_id, after=len(events) - 1)
    assert again.result() == [events[-1]]
    assert counted.reads(again.task) == [turn_id]


def test_subscribe_reads_the_record_of_a_turn_the_bus_does_not_hold(
    server: LiveServer, counted: CountedTurns
) -> None:
    unknown = uuid.uuid4().hex
    follower = Follower(server, unknown)
    with pytest.raises(UnknownTurn):
        follower.result()
    assert counted.reads(follower.task) == [unknown]
