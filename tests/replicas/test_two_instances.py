"""Two instances sharing Redis (the bus) and PostgreSQL (turns, spans, checkpoints): a turn
started on A is read on B, and after a disconnect resumed on B with Last-Event-ID, with no
gap and no duplicate; a turn paused on A resumes on B; turn ids stay idempotency keys.

Where a turn must still be running when the test looks, generate is held at a
:class:`tests.conftest.ModelGate` (both instances run in this process) until the test has
looked; no delay is raced against the machine's speed."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.conftest import ModelGate, iter_frames
from tests.interop.conftest import assert_well_formed, read_turn, wait_until

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite


def pair(make_instance, redis_url: str, postgres_url: str):
    shared = {"RELAY_BUS": redis_url, "RELAY_STORE": postgres_url}
    return make_instance("a", **shared), make_instance("b", **shared)


def start_async(client: httpx.Client, base: str, message: str, **headers: str) -> dict:
    response = client.post(
        f"{base}/chat", json={"message": message}, headers={"Prefer": "respond-async", **headers}
    )
    assert response.status_code == 202, response.text
    return response.json()


def test_turn_on_a_read_on_b_resumed_on_b(
    make_instance, redis_url, postgres_url, model_gate: ModelGate
) -> None:
    a, b = pair(make_instance, redis_url, postgres_url)
    with httpx.Client(timeout=30) as client:
        # held in generate until the first reader on B has dropped
        turn = start_async(client, a.url, "How do refunds work?")
        turn_id = turn["turn_id"]
        assert client.get(f"{b.url}/turns/{turn_id}").json()["status"] == "running"
        first: list[dict] = []
        with client.stream("GET", f"{b.url}/turns/{turn_id}/events") as response:
            assert response.status_code == 200
            for frame in iter_frames(response):
                if frame.event is not None:
                    first.append(frame.json)
                if len(first) == 3:
                    break  # the client drops mid-turn
        assert not any(e["type"] == "turn_completed" for e in first)
        model_gate.open()
        rest: list[dict] = []
        with client.stream(
            "GET",
            f"{b.url}/turns/{turn_id}/events",
            headers={"Last-Event-ID": str(first[-1]["seq"])},
        ) as response:
            assert response.status_code == 200
            for frame in iter_frames(response):
                if frame.event is not None:
                    rest.append(frame.json)
        events = first + rest
        assert_well_formed(events)
        assert events[-1]["type"] == "message_saved"  # the answer's save trails it
        events = events[:-1]
        assert events[-1]["type"] == "turn_completed"
        assert events[-1]["response"]["status"] == "answered"
        # B's stream is A's log, event for event
        assert read_turn(a.url, turn_id) == events
        assert wait_until(
            lambda: client.get(f"{b.url}/turns/{turn_id}").json()["status"] == "answered",
            what="the record on B",
        )
        # a late reader on B after the turn: the finished turn resends its terminal event
        late = read_turn(b.url, turn_id)
        assert late == events


def test_a_reader_on_b_from_the_start_while_a_runs(
    make_instance, redis_url, postgres_url, model_gate: ModelGate
) -> None:
    # generate runs on A until B's reader has its node_started: B showed generate running
    # while it ran on A (an order made to happen, where timing it needs a quiet machine)
    a, b = pair(make_instance, redis_url, postgres_url)
    with httpx.Client(timeout=30) as client:
        turn_id = start_async(client, a.url, "How do refunds work?")["turn_id"]
        events: list[dict] = []
        with client.stream("GET", f"{b.url}/turns/{turn_id}/events") as response:
            for frame in iter_frames(response):
                if frame.event is not None:
                    events.append(frame.json)
                if frame.event == "node_started" and frame.json["node"] == "generate":
                    model_gate.open()
    assert not model_gate.timed_out, "B never showed generate while it ran on A"
    assert_well_formed(events)
    generate = [e["type"] for e in events if e.get("node") == "generate"]
    assert generate[0] == "node_started" and generate[-1] == "node_completed"


def test_pause_on_a_resume_on_b(make_instance, redis_url, postgres_url) -> None:
    a, b = pair(make_instance, redis_url, postgres_url)
    with httpx.Client(timeout=30) as client:
        paused = client.post(f"{a.url}/chat", json={"message": "Please refund order 1234 ($20)."})
        assert paused.status_code == 200
        body = paused.json()
        assert body["status"] == "paused"
        turn_id = body["turn_id"]
        thread_id = body["thread_id"]
        assert client.get(f"{b.url}/turns/{turn_id}").json()["status"] == "paused"
        resumed = client.post(
            f"{b.url}/chat/resume",
            json={"thread_id": thread_id, "turn_id": turn_id, "resume": {"approved": True}},
        )
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "answered"
        # the turn's stream spans both runs, on either instance
        on_b = read_turn(b.url, turn_id)
        assert_well_formed(on_b)
        types = [e["type"] for e in on_b]
        assert "paused" in types and types[-1] == "turn_completed"
        assert [e["run_kind"] for e in on_b if e["type"] == "graph_topology"] == ["chat", "resume"]
        assert read_turn(a.url, turn_id) == on_b
        assert client.get(f"{a.url}/turns/{turn_id}").json()["status"] == "answered"


def test_turn_ids_are_idempotency_keys_across_instances(
    make_instance, redis_url, postgres_url
) -> None:
    a, b = pair(make_instance, redis_url, postgres_url)
    turn_id = uuid.uuid4().hex
    with httpx.Client(timeout=30) as client:
        first = client.post(
            f"{a.url}/chat", json={"message": "How do refunds work?", "turn_id": turn_id}
        )
        assert first.status_code == 200 and first.json()["turn_id"] == turn_id
        conflict = client.post(
            f"{b.url}/chat", json={"message": "Something else", "turn_id": turn_id}
        )
        assert conflict.status_code == 409
        assert conflict.json()["error"]["code"] == "turn_conflict"
        listed = client.get(f"{b.url}/turns", params={"thread_id": first.json()["thread_id"]})
        assert [t["turn_id"] for t in listed.json()["turns"]] == [turn_id]


def test_a_restarted_replica_marks_only_its_own_turns_interrupted(
    make_instance, redis_url, postgres_url, model_gate: ModelGate
) -> None:
    a, _ = pair(make_instance, redis_url, postgres_url)
    with httpx.Client(timeout=30) as client:
        # the turn is held in generate (never let go: it is cancelled at the end)
        turn_id = start_async(client, a.url, "How do refunds work?")["turn_id"]
        assert model_gate.held.wait(30), "the turn never reached generate"
        # a third replica starts while A runs the turn: it must not touch A's turn
        make_instance("c", RELAY_BUS=redis_url, RELAY_STORE=postgres_url)
        assert client.get(f"{a.url}/turns/{turn_id}").json()["status"] == "running"
        client.post(f"{a.url}/turns/{turn_id}/cancel")


def test_one_running_turn_per_thread_across_instances(
    make_instance, redis_url, postgres_url, model_gate: ModelGate
) -> None:
    a, b = pair(make_instance, redis_url, postgres_url)
    thread = f"shared-{uuid.uuid4().hex[:8]}"
    with httpx.Client(timeout=30) as client:
        # the first turn is held in generate until the second request has its answer
        first = client.post(
            f"{a.url}/chat",
            json={"message": "How do refunds work?", "thread_id": thread},
            headers={"Prefer": "respond-async"},
        )
        assert first.status_code == 202
        second = client.post(
            f"{b.url}/chat", json={"message": "How do refunds work?", "thread_id": thread}
        )
        model_gate.open()
        assert second.status_code == 409
        assert second.json()["error"]["code"] == "thread_busy"
        turn_id = first.json()["turn_id"]
        assert wait_until(
            lambda: client.get(f"{b.url}/turns/{turn_id}").json()["status"] == "answered",
            what="the first turn",
        )
        # the thread is free again, on any instance
        third = client.post(
            f"{b.url}/chat", json={"message": "How do refunds work?", "thread_id": thread}
        )
        assert third.status_code == 200 and third.json()["status"] == "answered"


def test_a_client_tool_paused_on_a_is_answered_on_b(make_instance, redis_url, postgres_url) -> None:
    """The demo's local_time: the single-use token is checked against the shared
    checkpoint, so B takes the answer; the used token is then refused on A."""
    a, b = pair(make_instance, redis_url, postgres_url)
    with httpx.Client(timeout=30) as client:
        body = client.post(f"{a.url}/chat", json={"message": "What time is it for me?"}).json()
        assert body["status"] == "paused", body
        [item] = body["interrupts"]
        assert item["value"]["type"] == "client_tool"
        ids = {"thread_id": body["thread_id"], "turn_id": body["turn_id"]}
        answer = {"result": {"local": "09:30", "time_zone": "UTC"}, "token": item["value"]["token"]}
        resumed = client.post(f"{b.url}/chat/resume", json={**ids, "resume": answer})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["answer"] == "It is 09:30 where you are (UTC)."
        reused = client.post(
            f"{a.url}/chat/resume", json={**ids, "resume": {**answer, "result": {"local": "10:00"}}}
        )
        assert reused.status_code == 409, reused.text
