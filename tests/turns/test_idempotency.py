"""Idempotent turns and resumes, background runs: a refund never runs twice."""

from __future__ import annotations

import threading
import uuid

import httpx

from tests.conftest import (
    LiveServer,
    ModelGate,
    events_of,
    iter_frames,
    lag_after_end_recorded,
    stream_post,
)
from tests.contract import check_stream, sequence

REFUNDS = "How do refunds work?"
REFUND_ORDER = "Please refund order 1234 ($20)."


def model_calls(server: LiveServer, turn_id: str) -> int:
    """How many node spans of `generate` the turn's log holds (one per model call)."""

    def count() -> int:
        reader = server.relay.bus.reader(turn_id, 0)
        try:
            return sum(
                1
                for e in reader.take()
                if e.type == "node_started" and e.fields["node"] == "generate"
            )
        finally:
            reader.close()

    return server.call(count)


def test_same_turn_id_same_body_attaches(server: LiveServer, client: httpx.Client) -> None:
    turn_id = str(uuid.uuid4())
    body = {"message": REFUNDS, "turn_id": turn_id, "thread_id": "t-idem"}
    first = client.post(f"{server.url}/chat", json=body)
    second = client.post(f"{server.url}/chat", json=body)
    assert second.status_code == 200
    assert second.content == first.content  # the recorded answer, byte for byte
    streamed = events_of(stream_post(client, f"{server.url}/chat", body))
    check_stream(streamed)
    assert streamed[-1]["response"] == first.json()
    assert model_calls(server, turn_id) == 1


def test_same_turn_id_other_body_is_409(server: LiveServer, client: httpx.Client) -> None:
    turn_id = str(uuid.uuid4())
    client.post(f"{server.url}/chat", json={"message": REFUNDS, "turn_id": turn_id})
    r = client.post(f"{server.url}/chat", json={"message": "Something else", "turn_id": turn_id})
    assert r.status_code == 409 and r.json()["error"]["code"] == "turn_conflict"


def test_concurrent_duplicates_start_one_run(server: LiveServer) -> None:
    turn_id = str(uuid.uuid4())
    body = {"message": REFUNDS, "turn_id": turn_id, "thread_id": "t-race"}
    results: list[httpx.Response] = []
    barrier = threading.Barrier(6)

    def post() -> None:
        with httpx.Client(timeout=30) as c:
            barrier.wait()
            results.append(
                c.post(
                    f"{server.url}/chat", json=body, headers={"X-Relay-Fault": "generate=delay:0.3"}
                )
            )

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert [r.status_code for r in results] == [200] * 6
    assert len({r.content for r in results}) == 1
    assert model_calls(server, turn_id) == 1


def test_resume_sent_the_moment_the_run_pauses(server: LiveServer, client: httpx.Client) -> None:
    """A resume in the moment between the record saying ``paused`` and the run's task
    letting go of the thread waits for the run to settle: no 409."""
    lag_after_end_recorded(server, 0.5)
    events = events_of(stream_post(client, f"{server.url}/chat", {"message": REFUND_ORDER}))
    assert events[-1]["type"] == "paused"  # read as it arrives: the run is still ending
    r = client.post(
        f"{server.url}/chat/resume",
        json={
            "thread_id": events[-1]["thread_id"],
            "turn_id": events[-1]["turn_id"],
            "resume": {"approved": True},
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "answered"


def test_next_message_sent_the_moment_the_turn_completes(
    server: LiveServer, client: httpx.Client
) -> None:
    """The thread's next message, sent the moment its previous turn's stream ends, waits
    for that run to finish recording instead of a 409 thread_busy."""
    lag_after_end_recorded(server, 0.5, ("answered",))
    first = events_of(stream_post(client, f"{server.url}/chat", {"message": REFUNDS}))
    assert first[-1]["type"] in ("turn_completed", "message_saved")
    thread = first[-1]["thread_id"]
    r = client.post(f"{server.url}/chat", json={"message": REFUNDS, "thread_id": thread})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "answered"


def test_repeated_resume_runs_the_tool_once(server: LiveServer, client: httpx.Client) -> None:
    paused = client.post(
        f"{server.url}/chat", json={"message": REFUND_ORDER, "thread_id": "t-twice"}
    ).json()
    body = {"thread_id": "t-twice", "turn_id": paused["turn_id"], "resume": {"approved": True}}
    results: list[httpx.Response] = []

    def post() -> None:
        with httpx.Client(timeout=30) as c:
            results.append(c.post(f"{server.url}/chat/resume", json=body))

    threads = [threading.Thread(target=post) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert [r.status_code for r in results] == [200] * 4
    assert {r.json()["status"] for r in results} == {"answered"}
    assert server.call(lambda: server.app.state.ledger.count()) == 1
    # streaming the same resume again replays that run, not a new one
    events = events_of(stream_post(client, f"{server.url}/chat/resume", body))
    check_stream(events)
    assert "tool_completed:issue_refund" in sequence(events)
    assert server.call(lambda: server.app.state.ledger.count()) == 1


def test_background_run(server: LiveServer, client: httpx.Client, model_gate: ModelGate) -> None:
    r = client.post(
        f"{server.url}/chat", json={"message": REFUNDS}, headers={"Prefer": "respond-async"}
    )
    assert r.status_code == 202
    turn_id = r.json()["turn_id"]
    assert r.headers["location"] == f"/turns/{turn_id}"
    # the model's stream waits at the gate: the turn is running when it is asked
    assert client.get(f"{server.url}{r.headers['location']}").json()["status"] == "running"
    model_gate.open()
    with client.stream("GET", f"{server.url}/turns/{turn_id}/events") as log:
        events = events_of(list(iter_frames(log)))
    assert events[-1]["type"] == "turn_completed"
    turn = client.get(f"{server.url}/turns/{turn_id}").json()
    assert turn["status"] == "answered"
    assert turn["response"] == events[-1]["response"]


def test_enqueue_policy_runs_in_order(make_server, client: httpx.Client) -> None:
    server = make_server(RELAY_THREAD_POLICY="enqueue")
    first = client.post(
        f"{server.url}/chat",
        json={"message": REFUNDS, "thread_id": "q"},
        headers={"Prefer": "respond-async", "X-Relay-Fault": "generate=delay:0.5"},
    ).json()
    second = client.post(f"{server.url}/chat", json={"message": REFUNDS, "thread_id": "q"})
    assert second.status_code == 200
    done_first = client.get(f"{server.url}/turns/{first['turn_id']}").json()
    assert done_first["status"] == "answered"
    assert (
        done_first["ended_at"]
        <= client.get(f"{server.url}/turns/{second.json()['turn_id']}").json()["ended_at"]
    )
