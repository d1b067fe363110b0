"""Redis killed mid-stream (a private redis-server, so the machine's stays up): the reader
on the other instance gets a terminal error frame, the turn still finishes and its outcome
is recorded, readiness goes red on both instances and new requests get a clear 503; with
Redis back, readiness is green again and a reader resumes with Last-Event-ID without a
silent gap."""

from __future__ import annotations

import httpx

from tests.conftest import ModelGate, iter_frames
from tests.interop.conftest import TurnReader, wait_until


def ready(base: str) -> bool:
    return httpx.get(f"{base}/readyz", timeout=10).status_code == 200


def test_redis_killed_mid_stream(
    make_instance, private_redis, postgres_url, model_gate: ModelGate
) -> None:
    shared = {"RELAY_BUS": private_redis.url, "RELAY_STORE": postgres_url}
    a = make_instance("a", **shared)
    b = make_instance("b", **shared)
    assert ready(a.url) and ready(b.url)
    with httpx.Client(timeout=30) as client:
        # the turn is held in generate until B's reader has been cut by the outage: Redis
        # dies mid-turn however slow the machine
        response = client.post(
            f"{a.url}/chat",
            json={"message": "How do refunds work?"},
            headers={"Prefer": "respond-async"},
        )
        assert response.status_code == 202
        turn_id = response.json()["turn_id"]
        reader = TurnReader(b.url, turn_id).start()
        wait_until(lambda: "node_started" in reader.types(), what="B streaming A's turn")

        private_redis.kill()

        events = reader.join(30)
        model_gate.open()  # the turn goes on (A holds its log)
        last = reader.frames[-1]
        assert last.event == "error" and last.id is None  # out of the log: no seq
        assert last.json["code"] == "bus_unavailable" and last.json["retryable"] is True
        assert last.json["last_seq"] == events[-2]["seq"]
        assert all(e["type"] != "turn_completed" for e in events)
        seen = events[-2]["seq"]

        # the turn itself goes on (A holds its log) and its outcome is recorded
        wait_until(
            lambda: client.get(f"{b.url}/turns/{turn_id}").json()["status"] == "answered",
            what="the turn's outcome",
        )
        # readiness is red on both, and what needs the bus says so
        wait_until(lambda: not ready(a.url) and not ready(b.url), what="readiness red")
        problems = httpx.get(f"{b.url}/readyz").json()["problems"]
        assert any("Redis" in p for p in problems), problems
        refused = client.post(f"{b.url}/chat", json={"message": "How do refunds work?"})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "bus_unavailable"
        assert refused.headers["retry-after"]
        stream = client.get(f"{b.url}/turns/{turn_id}/events", headers={"Last-Event-ID": str(seen)})
        assert stream.status_code == 503

        private_redis.start()  # same port, empty: the data before the kill is gone
        wait_until(lambda: ready(a.url) and ready(b.url), what="readiness green")

        # resuming on B: the rest of the turn, or an explicit answer; never a silent gap
        resumed: list = []
        with client.stream(
            "GET", f"{b.url}/turns/{turn_id}/events", headers={"Last-Event-ID": str(seen)}
        ) as response:
            assert response.status_code == 200
            resumed = [
                f
                for f in iter_frames(response)
                if f.event is not None and f.event != "message_saved"
            ]
        assert resumed
        if resumed[0].event == "reset":  # events after `seen` went down with Redis
            assert resumed[0].json["code"] == "cursor_expired"
        else:
            seqs = [f.json["seq"] for f in resumed]
            # the rest, in order; or (its log gone with Redis) the outcome from its record
            assert seqs == list(range(seen + 1, seen + 1 + len(seqs))) or len(resumed) == 1
            assert resumed[-1].event == "turn_completed"
        # and new turns work again
        again = client.post(f"{b.url}/chat", json={"message": "How do refunds work?"})
        assert again.status_code == 200 and again.json()["status"] == "answered"
