"""Redis killed mid-stream (a private redis-server, so the machine's stays up): the reader
on the other instance is told (a ``reset`` ``bus_lost`` note) and its stream stays open;
readiness goes red on both instances and new requests get a clear 503; with Redis back
(empty), the turn's owner writes its log again and the reader goes on to the turn's real
end with no gap, never a made-up one."""

from __future__ import annotations

import httpx

from tests.conftest import ModelGate
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

        # told, and still open: no error frame, no end
        wait_until(lambda: any(f.event == "reset" for f in reader.frames), what="the note")
        note = next(f for f in reader.frames if f.event == "reset")
        assert note.id is None and note.json["code"] == "bus_lost"  # out of the log: no seq
        seen = note.json["last_seq"]
        assert seen == reader.events()[-2]["seq"]
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
        model_gate.open()  # the turn goes on (A holds its log and writes it again)

        reader.join(60)
        events = [f.json for f in reader.frames if f.id is not None]
        live = [e for e in events if e["type"] != "message_saved"]
        assert [e["type"] for e in live if e["type"] in ("turn_completed", "error")] == [
            "turn_completed"
        ]
        assert [e["seq"] for e in live] == list(range(1, len(live) + 1))  # no gap
        assert all(f.event != "error" for f in reader.frames)
        # the record follows the end the stream already had (the run records it next)
        wait_until(
            lambda: client.get(f"{b.url}/turns/{turn_id}").json()["status"] == "answered",
            what="the record's end",
        )
        # and new turns work again
        again = client.post(f"{b.url}/chat", json={"message": "How do refunds work?"})
        assert again.status_code == 200 and again.json()["status"] == "answered"
