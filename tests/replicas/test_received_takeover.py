"""The OTLP receiver's credential cannot take a thread across replicas either: alice
starts a thread on A; the collector sends B (the real OTLP exporter) a run on her thread
naming bob, a day in the future, and one naming nobody. The thread's owner is in the
records both share (PostgreSQL), so on A and on B she keeps it and nobody else reaches
it; B counts what it kept apart."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.auth.issuer import Issuer, bearer
from tests.auth.ownership import listed
from tests.auth.received import COLLECTOR, DAY_NS, send_run, settled


def test_a_received_run_takes_no_thread_across_replicas(
    make_instance, redis_url: str, postgres_url: str, tmp_path: Path
) -> None:
    issuer = Issuer()
    shared = {
        "RELAY_BUS": redis_url,
        "RELAY_STORE": postgres_url,
        "RELAY_API_TOKEN": COLLECTOR,
        "RELAY_OTLP_HTTP": "true",
        **issuer.env(issuer.write_jwks(tmp_path / "jwks.json")),
    }
    a = make_instance("a", **shared)
    b = make_instance("b", **shared)
    alice = bearer(issuer.token("alice"))
    bob = bearer(issuer.token("bob"))
    with httpx.Client(timeout=60) as client:
        first = client.post(
            f"{a.url}/chat", headers=alice, json={"message": "How do refunds work?"}
        )
        assert first.status_code == 200, first.text
        thread, own = first.json()["thread_id"], first.json()["turn_id"]
        future = time.time_ns() + DAY_NS
        as_bob = send_run(b, thread, "bob", future)
        as_nobody = send_run(b, thread, None, future + DAY_NS)
        assert settled(client, b, as_bob, bob)["thread_id"] != thread
        assert settled(client, a, as_nobody, alice)["thread_id"] != thread
        for server in (a, b):
            assert listed(client, server.url, alice, thread_id=thread) == {own}
            assert listed(client, server.url, bob, thread_id=thread) == set()
            assert client.get(f"{server.url}/turns/{as_nobody}", headers=bob).status_code == 404
            taken = client.post(
                f"{server.url}/chat", headers=bob, json={"message": "hi", "thread_id": thread}
            )
            assert taken.status_code == 404, taken.text
        again = client.post(
            f"{b.url}/chat", headers=alice, json={"message": "And shipping?", "thread_id": thread}
        )
        assert again.status_code == 200 and again.json()["thread_id"] == thread, again.text
    assert b.relay.receiver.stats["kept_apart"] == 2
