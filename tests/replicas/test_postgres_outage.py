"""PostgreSQL going away does not break the replicas for good (a private cluster, so the
machine's stays up): shut down immediately mid-turn, the running turn's streams end with
one terminal event; while it is down every request that needs it gets a 503 JSON
``store_unavailable`` with ``Retry-After`` and /readyz is red, naming what is missing;
once it is back, /readyz turns green and new turns run on both replicas, the killed
turn's thread included, with no restart (every PostgreSQL user is a checked pool)."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest

from relay.errors import StoreUnavailable
from relay.events import RUN_TERMINAL
from relay.turns.postgres import PostgresTurnStore
from tests.interop.conftest import TurnReader, wait_until

#: generate sleeps this long: the database is stopped well inside it, however loaded
#: the machine (a wider window than the test needs, never a measured duration)
SLOW = {"X-Relay-Fault": "generate=delay:10"}
MESSAGE = {"message": "How do refunds work?"}
AGUI_RUN = {
    "threadId": "agui-thread",
    "runId": "run-1",
    "state": {},
    "tools": [],
    "context": [],
    "forwardedProps": {},
    "messages": [{"id": "m1", "role": "user", "content": "How do refunds work?"}],
}


def ready(base: str) -> bool:
    return httpx.get(f"{base}/readyz", timeout=15).status_code == 200


def assert_store_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "store_unavailable", response.text
    assert int(response.headers["retry-after"]) > 0


def assert_ends_once(events: list[dict]) -> None:
    """One terminal event, the last (but for the answer's message_saved)."""
    types = [e["type"] for e in events]
    assert sum(t in RUN_TERMINAL for t in types) == 1, types
    assert types[-1] in RUN_TERMINAL or (
        types[-1] == "message_saved" and types[-2] in RUN_TERMINAL
    ), types
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


@pytest.mark.slow
def test_postgres_shut_down_mid_turn_and_back(private_postgres, redis_url, make_instance) -> None:
    # private_postgres first: it is set up before the instances and torn down after them
    shared = {"RELAY_BUS": redis_url, "RELAY_STORE": private_postgres.url}
    a = make_instance("a", **shared)
    b = make_instance("b", **shared)
    assert ready(a.url) and ready(b.url)
    with httpx.Client(timeout=60) as client:
        started = client.post(
            f"{a.url}/chat", json=MESSAGE, headers={"Prefer": "respond-async", **SLOW}
        )
        assert started.status_code == 202, started.text
        turn_id = started.json()["turn_id"]
        thread_id = started.json()["thread_id"]
        readers = [TurnReader(x.url, turn_id, timeout=90).start() for x in (a, b)]
        wait_until(
            lambda: all(
                any(e["type"] == "node_started" and e.get("node") == "generate" for e in r.events())
                for r in readers
            ),
            timeout=20,
            what="both replicas streaming the turn's generate step",
        )

        private_postgres.stop("immediate")  # every session cut, no goodbye

        # the running turn ends, on the instance that runs it and on the other one
        for reader in readers:
            assert_ends_once(reader.join(90))
        assert [e["type"] for e in readers[0].events()] == [e["type"] for e in readers[1].events()]

        # while it is down: a clean 503 JSON from what needs it, on both replicas
        for base in (a.url, b.url):
            assert_store_unavailable(client.post(f"{base}/chat", json=MESSAGE))
        assert_store_unavailable(
            client.post(
                f"{a.url}/chat/resume",
                json={"thread_id": thread_id, "turn_id": turn_id, "resume": {"approved": True}},
            )
        )
        assert_store_unavailable(
            client.post(f"{b.url}/agui", json=AGUI_RUN, headers={"Accept": "text/event-stream"})
        )
        assert_store_unavailable(client.get(f"{b.url}/turns/{turn_id}"))
        assert_store_unavailable(client.get(f"{b.url}/turns/{uuid.uuid4().hex}/events"))
        # a turn the shared bus holds still streams: nothing already accepted is lost
        streamed = TurnReader(b.url, turn_id, timeout=30).start().join(30)
        assert streamed == readers[1].events()
        assert_store_unavailable(client.get(f"{b.url}/turns", params={"thread_id": thread_id}))
        wait_until(
            lambda: not ready(a.url) and not ready(b.url), timeout=30, what="readiness red on both"
        )
        problems = httpx.get(f"{a.url}/readyz", timeout=15).json()["problems"]
        for part in ("turn records", "span store", "checkpoints"):
            assert any(p.startswith(part) for p in problems), problems

        private_postgres.start()  # the same cluster, recovering from its WAL

        # an "eventually": the pools find the server again on their next checkout
        wait_until(
            lambda: ready(a.url) and ready(b.url),
            timeout=90,
            what="readiness green on both after the restart",
        )
        for base in (a.url, b.url):
            again = client.post(f"{base}/chat", json=MESSAGE)
            assert again.status_code == 200, again.text
            assert again.json()["status"] == "answered"
        # the killed turn's end, which its store refused, is recorded once it is back
        wait_until(
            lambda: client.get(f"{b.url}/turns/{turn_id}").json()["status"] != "running",
            timeout=60,
            what="the killed turn's end recorded",
        )
        # the killed turn's record is readable again, and its thread takes a new turn
        # (its lock went with its connection) once its run has let go of it on A
        assert client.get(f"{b.url}/turns/{turn_id}").status_code == 200
        wait_until(
            lambda: not a.call(lambda: a.relay.runs.running(turn_id)),
            timeout=60,
            what="the killed turn's run to finish its cleanup",
        )
        follow_up = client.post(f"{b.url}/chat", json={**MESSAGE, "thread_id": thread_id})
        assert follow_up.status_code == 200, follow_up.text
        assert follow_up.json()["status"] == "answered"


@pytest.mark.slow
async def test_thread_locks_across_an_outage(private_postgres) -> None:
    """The store alone: a lock whose connection died is released without a word to the
    run (PostgreSQL freed it with the session), calls while the database is away raise
    StoreUnavailable, and the pools work again once it is back; a released lock's pooled
    connection holds nothing (another replica can take the thread)."""
    a = PostgresTurnStore(private_postgres.url, instance_id="a")
    b = PostgresTurnStore(private_postgres.url, instance_id="b")
    try:
        held = await a.lock_thread("t1")
        assert held is not None
        assert await b.lock_thread("t1") is None  # one run per thread across replicas

        await asyncio.to_thread(private_postgres.stop, "immediate")
        with pytest.raises(StoreUnavailable, match="turn records"):
            await a.get("nothing")
        with pytest.raises(StoreUnavailable, match="thread locks"):
            await a.lock_thread("t2")
        await held.release()  # its session is gone: quietly
        await held.release()  # and only once

        await asyncio.to_thread(private_postgres.start)
        deadline = time.monotonic() + 60
        while True:  # an "eventually": the next checkout after the pools' backoff
            try:
                await a.ping()
                await b.ping()
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the pools did not recover"
        again = await b.lock_thread("t1")  # the lock died with its session
        assert again is not None
        await again.release()
        taken = await a.lock_thread("t1")  # B's connection went back to its pool unlocked
        assert taken is not None
        await taken.release()
        assert await a.get("nothing") is None
    finally:
        a.close()
        b.close()
