"""Redis restarted without persistence mid-turn (a private redis-server): the reader on
the other replica is told of the loss, is never handed a made-up end, and ends with the
turn's real ``turn_completed``, every event in between and no gap in the seqs; the loss
is counted in ``relay_bus_lost_total``. A reconnect after the real terminal event gets
204 (a browser's EventSource stops), also once the bus holds nothing of the turn."""

from __future__ import annotations

import httpx
import redis

from tests.conftest import ModelGate, iter_frames
from tests.interop.conftest import TurnReader, wait_until


def ready(base: str) -> bool:
    return httpx.get(f"{base}/readyz", timeout=10).status_code == 200


def bus_lost(base: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("relay_bus_lost_total")
    ]
    return sum(values)


def test_redis_restarted_empty_mid_turn(
    make_instance, private_redis, postgres_url, model_gate: ModelGate
) -> None:
    shared = {"RELAY_BUS": private_redis.url, "RELAY_STORE": postgres_url}
    a = make_instance("a", **shared)
    b = make_instance("b", **shared, RELAY_METRICS="prometheus")
    assert ready(a.url) and ready(b.url)
    with httpx.Client(timeout=30) as client:
        response = client.post(
            f"{a.url}/chat",
            json={"message": "How do refunds work?"},
            headers={"Prefer": "respond-async"},
        )
        assert response.status_code == 202
        turn_id = response.json()["turn_id"]
        reader = TurnReader(b.url, turn_id, timeout=120).start()
        wait_until(lambda: reader.wait_for("node_started", timeout=1), what="B streams A's turn")

        private_redis.kill()
        private_redis.start()  # same port, empty: everything before the restart is gone
        wait_until(lambda: ready(a.url) and ready(b.url), what="readiness green again")
        # the reader is told (before the turn goes on: the model is still held)
        wait_until(lambda: any(f.event == "reset" for f in reader.frames), what="the reader told")
        model_gate.open()  # the turn goes on and ends

        reader.join(120)
        frames = [f for f in reader.frames if f.event is not None]
        notes = [f for f in frames if f.event == "reset"]
        assert notes and all(n.json["code"] == "bus_lost" and n.id is None for n in notes)
        events = [f.json for f in frames if f.id is not None]
        # no made-up end: the only terminal event is the turn's real one, last
        terminal = [e for e in events if e["type"] in ("turn_completed", "error", "cancelled")]
        assert [e["type"] for e in terminal] == ["turn_completed"], terminal
        live = [e for e in events if e["type"] != "message_saved"]
        assert live[-1]["type"] == "turn_completed"
        seqs = [e["seq"] for e in live]
        assert seqs == list(range(1, len(seqs) + 1)), seqs  # every event, no gap

        record = client.get(f"{a.url}/turns/{turn_id}").json()
        assert record["status"] == "answered"
        # the same events as the stored replay derives from the turn's spans (A stores
        # them as its exporter flushes)
        replay = f"{b.url}/turns/{turn_id}/events?source=spans&speed=0"
        wait_until(lambda: client.get(replay).status_code == 200, what="the spans stored")
        stored = [
            f.json
            for f in iter_frames(client.get(replay))
            if f.id is not None and f.json["type"] != "message_saved"
        ]
        assert [(e["seq"], e["type"]) for e in live] == [(e["seq"], e["type"]) for e in stored]
        assert bus_lost(b.url) > 0  # the loss is counted where the reader was

        # a reconnect after the real terminal event: 204, whatever the bus still holds
        # (a reader that has the terminal event but not the answer's message_saved gets
        # just that, never the end again)
        end = live[-1]["seq"]
        last = events[-1]["seq"]  # what an EventSource sends as Last-Event-ID

        def reconnect(base: str, seq: int) -> httpx.Response:
            return client.get(f"{base}/turns/{turn_id}/events", headers={"Last-Event-ID": str(seq)})

        def sent(response: httpx.Response) -> list[tuple[int, str]]:
            return [(f.json["seq"], f.json["type"]) for f in iter_frames(response) if f.id]

        for base in (a.url, b.url):
            assert reconnect(base, last).status_code == 204
            rest = reconnect(base, end)
            assert rest.status_code == 204 or sent(rest) == [(end + 1, "message_saved")]
        # and once the bus holds nothing of the turn (its TTL ran out)
        keys = redis.Redis(port=private_redis.port)
        for key in keys.scan_iter("relay:turn:*"):
            keys.delete(key)
        for base in (a.url, b.url):
            assert reconnect(base, last).status_code == 204
            rest = reconnect(base, end)
            assert rest.status_code == 204 or sent(rest) == [(end + 1, "message_saved")]
            # one before it: the real terminal event (from the record, where no log holds
            # it any more), under its own seq
            assert sent(reconnect(base, end - 1))[0] == (end, "turn_completed")
