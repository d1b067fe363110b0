"""Heartbeats through a silent node, and what happens when the reader goes away.

Where an order in time matters, the test makes it happen: generate is held at a
:class:`tests.conftest.ModelGate` until the client has seen what it waits for, and the
grace timer's expiry is handed to the test; nothing here compares durations, so the
tests pass on a loaded machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.conftest import (
    SSE_HEADERS,
    Frame,
    LiveServer,
    ModelGate,
    events_of,
    iter_frames,
    stream_post,
)
from tests.contract import check_stream, sequence

REFUNDS = "How do refunds work?"


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 30.0,
    every: float = 0.05,
    what: str = "condition",
) -> Any:
    """Poll until ``predicate`` is true; ``timeout`` only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{what} not met in {timeout:g} s")


def watching(server: LiveServer, turn_id: str) -> tuple[int, Any] | None:
    """(readers, grace timer) of a running turn, read on the server's loop."""

    def read() -> tuple[int, Any] | None:
        run = server.relay.runs._runs.get(turn_id)
        return None if run is None else (run.watchers, run.cancel_timer)

    return server.call(read)


def test_heartbeats_during_a_slow_node(
    make_server, client: httpx.Client, model_gate: ModelGate
) -> None:
    # generate is silent (held before its first word) until this client has received
    # three heartbeats after its node_started: they came while the node was silent
    server = make_server(RELAY_HEARTBEAT_S="0.2")
    beats_while_running: list[Frame] = []

    def received(frame: Frame) -> None:
        if frame.event == "node_started" and frame.json["node"] == "generate":
            beats_while_running.clear()
        elif frame.comment == "hb" and model_gate.held.is_set():
            beats_while_running.append(frame)
            if len(beats_while_running) == 3:
                model_gate.open()

    frames = stream_post(client, f"{server.url}/chat", {"message": REFUNDS}, on_frame=received)
    assert not model_gate.timed_out, "three heartbeats did not arrive while generate ran"
    kinds = ["hb" if f.comment == "hb" else (f.event or "retry") for f in frames]
    events = events_of(frames)
    check_stream(events)
    started = next(
        i
        for i, f in enumerate(frames)
        if f.event == "node_started" and f.json["node"] == "generate"
    )
    completed = next(
        i
        for i, f in enumerate(frames)
        if f.event == "node_completed" and f.json["node"] == "generate"
    )
    beats = [f for f in frames[started:completed] if f.comment == "hb"]
    assert len(beats) >= 3, kinds
    assert all(f.raw == ": hb" for f in beats)


def test_disconnect_cancels_after_grace(make_server) -> None:
    server = make_server(RELAY_DISCONNECT_GRACE_S="0.5", RELAY_HEARTBEAT_S="0.2")
    baseline = server.task_count()
    # The grace timer's callback is handed to the test instead of cancelling: when it
    # fires, the test checks that the turn ran on through the grace, then lets the relay's
    # own callback cancel it. Timing "disconnect -> cancelled" would time the machine.
    runs = server.relay.runs
    cancel_if_unwatched = runs._cancel_if_unwatched
    reader_left = runs.reader_left
    expired: list[str] = []
    left_at: list[float] = []

    def record_left(turn_id: str, completed: bool, on_disconnect: str = "cancel") -> None:
        left_at.append(asyncio.get_running_loop().time())
        reader_left(turn_id, completed, on_disconnect)

    runs.reader_left = record_left
    runs._cancel_if_unwatched = expired.append
    with (
        httpx.Client(timeout=30) as c,
        c.stream(
            "POST",
            f"{server.url}/chat",
            json={"message": REFUNDS},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:600"},
        ) as r,
    ):
        turn_id = None
        for frame in iter_frames(r):
            if frame.event == "graph_topology":
                turn_id = frame.json["turn_id"]
            if frame.event == "node_started" and frame.json["node"] == "generate":
                break
    # the client is gone; the turn still runs until the grace period is over...
    assert turn_id is not None
    wait_for(lambda: expired, what="the grace timer")
    assert expired == [turn_id]
    assert server.call(lambda: runs.running(turn_id)), "cancelled before the grace was over"
    readers, timer = watching(server, turn_id)
    assert readers == 0
    # the timer was set for the grace after the reader left (the loop's own clock, read
    # at the two points: arithmetic, not a measured duration)
    assert timer.when() - left_at[0] >= 0.5 - 1e-6
    server.call(lambda: cancel_if_unwatched(turn_id))  # ...then the timer does its work
    with httpx.Client(timeout=30) as c:
        record = wait_for(
            lambda: (
                (t := c.get(f"{server.url}/turns/{turn_id}").json())["status"] == "cancelled" and t
            )
        )
        assert record["ended_at"] is not None
        # ...then its spans end cancelled and its log ends with the terminal event
        with c.stream("GET", f"{server.url}/turns/{turn_id}/events") as log:
            events = events_of(list(iter_frames(log)))
    generate = [e for e in events if e["type"] == "node_completed"][-1]
    assert generate["node"] == "generate" and generate["status"] == "cancelled"
    assert events[-1]["type"] == "error" and events[-1]["code"] == "cancelled"
    check_stream(events)
    wait_for(lambda: server.task_count() <= baseline)


def test_a_second_reader_keeps_the_turn_alive(make_server, model_gate: ModelGate) -> None:
    # generate is held until the relay has seen the first reader go and set no grace
    # timer for it: the turn cannot end before the departure is handled
    server = make_server(RELAY_DISCONNECT_GRACE_S="0.3", RELAY_HEARTBEAT_S="0.2")
    with (
        httpx.Client(timeout=30) as first,
        first.stream(
            "POST", f"{server.url}/chat", json={"message": REFUNDS}, headers=SSE_HEADERS
        ) as r,
    ):
        frames = iter_frames(r)
        turn_id = next(f for f in frames if f.event).json["turn_id"]
        with (
            httpx.Client(timeout=30) as second,
            second.stream("GET", f"{server.url}/turns/{turn_id}/events") as watcher,
        ):
            watched = iter_frames(watcher)
            assert next(f for f in watched if f.event).json["type"] == "graph_topology"
            assert server.call(lambda: server.relay.runs._runs[turn_id].watchers) == 2
            r.close()  # the first reader leaves mid-turn...
            assert wait_for(lambda: watching(server, turn_id) == (1, None))
            model_gate.open()
            events = events_of(list(watched))  # ...the second reads on to the end
    assert events[-1]["type"] == "turn_completed"
    assert events[-1]["response"]["status"] == "answered"


def test_on_disconnect_continue_keeps_running(make_server, model_gate: ModelGate) -> None:
    # generate is held until the relay has seen the only reader go (and set no timer)
    server = make_server(RELAY_DISCONNECT_GRACE_S="0.2")
    with (
        httpx.Client(timeout=30) as c,
        c.stream(
            "POST",
            f"{server.url}/chat?on_disconnect=continue",
            json={"message": REFUNDS},
            headers=SSE_HEADERS,
        ) as r,
    ):
        frame = next(f for f in iter_frames(r) if f.event)
        turn_id = frame.json["turn_id"]
    assert wait_for(lambda: watching(server, turn_id) == (0, None))
    model_gate.open()
    with httpx.Client(timeout=30) as c:
        record = wait_for(
            lambda: (
                (t := c.get(f"{server.url}/turns/{turn_id}").json())["status"] != "running" and t
            )
        )
    assert record["status"] == "answered"


def test_cancel_endpoint(make_server, client: httpx.Client) -> None:
    server = make_server()
    with (
        httpx.Client(timeout=30) as c,
        c.stream(
            "POST",
            f"{server.url}/chat",
            json={"message": REFUNDS},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:30"},
        ) as r,
    ):
        frames = iter_frames(r)
        turn_id = next(f for f in frames if f.event).json["turn_id"]
        first = client.post(f"{server.url}/turns/{turn_id}/cancel")
        assert first.status_code == 202 and first.json()["cancelled"] is True
        rest = list(frames)
    assert rest[-1].event == "error" and rest[-1].json["code"] == "cancelled"
    again = client.post(f"{server.url}/turns/{turn_id}/cancel")
    assert again.status_code == 200 and again.json() == {
        "turn_id": turn_id,
        "cancelled": False,
        "status": "cancelled",
    }
    assert client.post(f"{server.url}/turns/nope/cancel").status_code == 404


def test_json_caller_gets_a_cancelled_response(make_server, client: httpx.Client) -> None:
    import threading

    server = make_server()
    result: dict = {}

    def call() -> None:
        result["r"] = client.post(
            f"{server.url}/chat",
            json={"message": REFUNDS, "thread_id": "t-json-cancel"},
            headers={"X-Relay-Fault": "generate=delay:30"},
        )

    thread = threading.Thread(target=call)
    thread.start()
    with httpx.Client(timeout=30) as c:
        turns = wait_for(
            lambda: c.get(f"{server.url}/turns", params={"thread_id": "t-json-cancel"}).json()[
                "turns"
            ]
        )
        c.post(f"{server.url}/turns/{turns[0]['turn_id']}/cancel")
    thread.join(timeout=30)
    assert result["r"].status_code == 200
    assert result["r"].json()["status"] == "cancelled"


def test_one_running_turn_per_thread(
    make_server, client: httpx.Client, model_gate: ModelGate
) -> None:
    server = make_server()
    with (
        httpx.Client(timeout=30) as c,
        c.stream(
            "POST",
            f"{server.url}/chat",
            json={"message": REFUNDS, "thread_id": "busy"},
            headers=SSE_HEADERS,
        ) as r,
    ):
        frames = iter_frames(r)
        next(f for f in frames if f.event)
        # the first turn is held in generate until the second request has its answer
        second = client.post(f"{server.url}/chat", json={"message": REFUNDS, "thread_id": "busy"})
        model_gate.open()
        assert second.status_code == 409
        assert second.json()["error"]["code"] == "thread_busy"
        events = events_of(list(frames))
    assert sequence(events)[-1] == "turn_completed"
