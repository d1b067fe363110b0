"""Heartbeats through a silent node, and what happens when the reader goes away."""

from __future__ import annotations

import time

import httpx

from tests.conftest import SSE_HEADERS, events_of, iter_frames, stream_post
from tests.contract import check_stream, sequence

REFUNDS = "How do refunds work?"


def wait_for(predicate, timeout: float = 10.0, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not met in time")


def test_heartbeats_during_a_slow_node(make_server, client: httpx.Client) -> None:
    server = make_server(RELAY_HEARTBEAT_S="0.2")
    frames = stream_post(client, f"{server.url}/chat", {"message": REFUNDS},
                         headers={"X-Relay-Fault": "generate=delay:1.2"})
    kinds = ["hb" if f.comment == "hb" else (f.event or "retry") for f in frames]
    events = events_of(frames)
    check_stream(events)
    started = next(i for i, f in enumerate(frames)
                   if f.event == "node_started" and f.json["node"] == "generate")
    completed = next(i for i, f in enumerate(frames)
                     if f.event == "node_completed" and f.json["node"] == "generate")
    beats = [f for f in frames[started:completed] if f.comment == "hb"]
    assert len(beats) >= 3, kinds
    assert all(f.raw == ": hb" for f in beats)
    # the heartbeats arrived while the node was silent, spread over its 1.2 s
    assert beats[-1].arrived - beats[0].arrived >= 0.3


def test_disconnect_cancels_after_grace(make_server) -> None:
    server = make_server(RELAY_DISCONNECT_GRACE_S="0.5", RELAY_HEARTBEAT_S="0.2")
    baseline = server.task_count()
    with httpx.Client(timeout=30) as c, c.stream(
            "POST", f"{server.url}/chat", json={"message": REFUNDS},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:30"}) as r:
        turn_id = None
        for frame in iter_frames(r):
            if frame.event == "graph_topology":
                turn_id = frame.json["turn_id"]
            if frame.event == "node_started" and frame.json["node"] == "generate":
                break
    # the client is gone; the turn still runs during the grace period...
    assert turn_id is not None
    assert server.call(lambda: server.relay.runs.running(turn_id))
    cut_at = time.monotonic()
    with httpx.Client(timeout=10) as c:
        record = wait_for(lambda: (t := c.get(f"{server.url}/turns/{turn_id}").json())
                          ["status"] == "cancelled" and t)
        elapsed = time.monotonic() - cut_at
        print(f"disconnect to cancelled: {elapsed:.2f} s (grace 0.5 s)")
        assert 0.4 <= elapsed < 5, elapsed
        assert record["ended_at"] is not None
        # ...then its spans end cancelled and its log ends with the terminal event
        with c.stream("GET", f"{server.url}/turns/{turn_id}/events") as log:
            events = events_of(list(iter_frames(log)))
    generate = [e for e in events if e["type"] == "node_completed"][-1]
    assert generate["node"] == "generate" and generate["status"] == "cancelled"
    assert events[-1]["type"] == "error" and events[-1]["code"] == "cancelled"
    check_stream(events)
    wait_for(lambda: server.task_count() <= baseline, timeout=5)


def test_a_second_reader_keeps_the_turn_alive(make_server) -> None:
    server = make_server(RELAY_DISCONNECT_GRACE_S="0.3", RELAY_HEARTBEAT_S="0.2")
    with httpx.Client(timeout=30) as first, first.stream(
            "POST", f"{server.url}/chat", json={"message": REFUNDS},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:1.5"}) as r:
        frames = iter_frames(r)
        turn_id = next(f for f in frames if f.event).json["turn_id"]
        with httpx.Client(timeout=30) as second, second.stream(
                "GET", f"{server.url}/turns/{turn_id}/events") as watcher:
            watched = iter_frames(watcher)
            assert next(f for f in watched if f.event).json["type"] == "graph_topology"
            assert server.call(lambda: server.relay.runs._runs[turn_id].watchers) == 2
            r.close()  # the first reader leaves mid-turn...
            events = events_of(list(watched))  # ...the second reads on to the end
    assert events[-1]["type"] == "turn_completed"
    assert events[-1]["response"]["status"] == "answered"


def test_on_disconnect_continue_keeps_running(make_server) -> None:
    server = make_server(RELAY_DISCONNECT_GRACE_S="0.2")
    with httpx.Client(timeout=30) as c, c.stream(
            "POST", f"{server.url}/chat?on_disconnect=continue", json={"message": REFUNDS},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:1"}) as r:
        frame = next(f for f in iter_frames(r) if f.event)
        turn_id = frame.json["turn_id"]
    with httpx.Client(timeout=10) as c:
        record = wait_for(lambda: (t := c.get(f"{server.url}/turns/{turn_id}").json())
                          ["status"] != "running" and t)
    assert record["status"] == "answered"


def test_cancel_endpoint(make_server, client: httpx.Client) -> None:
    server = make_server()
    with httpx.Client(timeout=30) as c, c.stream(
            "POST", f"{server.url}/chat", json={"message": REFUNDS},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:30"}) as r:
        frames = iter_frames(r)
        turn_id = next(f for f in frames if f.event).json["turn_id"]
        first = client.post(f"{server.url}/turns/{turn_id}/cancel")
        assert first.status_code == 202 and first.json()["cancelled"] is True
        rest = list(frames)
    assert rest[-1].event == "error" and rest[-1].json["code"] == "cancelled"
    again = client.post(f"{server.url}/turns/{turn_id}/cancel")
    assert again.status_code == 200 and again.json() == {
        "turn_id": turn_id, "cancelled": False, "status": "cancelled"}
    assert client.post(f"{server.url}/turns/nope/cancel").status_code == 404


def test_json_caller_gets_a_cancelled_response(make_server, client: httpx.Client) -> None:
    import threading

    server = make_server()
    result: dict = {}

    def call() -> None:
        result["r"] = client.post(f"{server.url}/chat", json={
            "message": REFUNDS, "thread_id": "t-json-cancel"},
            headers={"X-Relay-Fault": "generate=delay:30"})

    thread = threading.Thread(target=call)
    thread.start()
    with httpx.Client(timeout=10) as c:
        turns = wait_for(lambda: c.get(f"{server.url}/turns",
                                       params={"thread_id": "t-json-cancel"}).json()["turns"])
        c.post(f"{server.url}/turns/{turns[0]['turn_id']}/cancel")
    thread.join(timeout=10)
    assert result["r"].status_code == 200
    assert result["r"].json()["status"] == "cancelled"


def test_one_running_turn_per_thread(make_server, client: httpx.Client) -> None:
    server = make_server()
    with httpx.Client(timeout=30) as c, c.stream(
            "POST", f"{server.url}/chat", json={"message": REFUNDS, "thread_id": "busy"},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:1"}) as r:
        frames = iter_frames(r)
        next(f for f in frames if f.event)
        second = client.post(f"{server.url}/chat", json={"message": REFUNDS,
                                                         "thread_id": "busy"})
        assert second.status_code == 409
        assert second.json()["error"]["code"] == "thread_busy"
        events = events_of(list(frames))
    assert sequence(events)[-1] == "turn_completed"
