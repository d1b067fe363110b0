"""Leases with real processes (relay/turns/leases.py): a turn outlives its process only as
long as the process lives.

Two replicas (``span-relay serve --graph``, each a process of its own) share Redis (the bus)
and a fresh PostgreSQL database (turn records, checkpoints), with distinct instance ids and
``RELAY_LEASE_S=2``. The graph's one node waits on a file (tests/replicas/processes.py):
the test knows the turn is inside it, and holds it there.

- ``kill -9`` of the replica running a turn, recovery off (``RELAY_RECOVERY=off``;
  tests/replicas/test_recovery.py has it on): a reader on the other replica gets one
  ``error`` event, code ``interrupted``; the record says ``interrupted``; the thread takes
  a new message;
- a replica that hangs (SIGSTOP): its thread is freed once its lease is gone; woken
  (SIGCONT), it neither publishes a second end nor flips the record back;
- a node that runs for several lease periods keeps its turn and answers on its replica;
- a SQLite instance killed and started again under another instance id ends the turn
  (the in-process bus's log of the cut run died with it: ``safe`` cannot judge it).

Order is made with files and the database's own state (a lease seen renewed), never with
a clock; the waits are generous bounds on a hang.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import redis

from tests.interop.conftest import TurnReader, wait_until
from tests.replicas.processes import Gates, Replica, replicas_of, write_gated_graph

pytestmark = pytest.mark.slow

LEASE_S = "2"
#: a bound on a hang: a lease, a few sweeps and two process starts on a loaded machine
TAKEOVER_BOUND_S = 90


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Callable[..., Replica], Gates]]:
    with replicas_of(tmp_path, *write_gated_graph(tmp_path)) as made:
        yield made


def chat(base: str, message: str, thread_id: str | None = None) -> httpx.Response:
    body = {"message": message, **({"thread_id": thread_id} if thread_id else {})}
    return httpx.post(f"{base}/chat", json=body, headers={"Prefer": "respond-async"}, timeout=30)


def status(base: str, turn_id: str, headers: dict[str, str] | None = None) -> str:
    return httpx.get(f"{base}/turns/{turn_id}", headers=headers, timeout=30).json()["status"]


def terminal_events(redis_url: str, turn_id: str) -> list[dict]:
    """The turn-terminal events of the turn's shared log, as Redis holds it."""
    client = redis.Redis.from_url(redis_url)
    entries = client.xrange(f"relay:turn:{turn_id}")
    events = [json.loads(fields[b"e"]) for _, fields in entries]
    return [e for e in events if e["type"] in ("turn_completed", "paused", "error")]


def recovered(base: str, outcome: str = "ended", headers: dict[str, str] | None = None) -> float:
    """relay_turns_recovered_total{outcome=...} on that replica (0 when absent)."""
    metrics = httpx.get(f"{base}/metrics", headers=headers, timeout=30).text
    for line in metrics.splitlines():
        if line.startswith("relay_turns_recovered_total") and f'outcome="{outcome}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def shared(
    redis_url: str, postgres_url: str, lease_s: str = LEASE_S, **more: str
) -> dict[str, str]:
    return {
        "RELAY_BUS": redis_url,
        "RELAY_STORE": postgres_url,
        "RELAY_LEASE_S": lease_s,
        **more,
    }


#: these tests see the takeover end a turn (tests/replicas/test_recovery.py: recovered)
ENDS = {"RELAY_RECOVERY": "off"}


#: the lease of the test where a live peer could claim: a loaded machine may stall a
#: process's loop for a moment, which must not cost it its turn (a third of it is left)
LONG_LEASE_S = "4"


def test_kill_9_of_the_owner_ends_the_turn_for_a_reader_on_the_other_replica(
    cluster, redis_url: str, postgres_url: str
) -> None:
    start, gates = cluster
    a = start("a", **shared(redis_url, postgres_url, **ENDS))
    b = start("b", **shared(redis_url, postgres_url, **ENDS))
    started = chat(a.url, "k1")
    assert started.status_code == 202, started.text
    turn_id, thread_id = started.json()["turn_id"], started.json()["thread_id"]
    reader = TurnReader(b.url, turn_id, timeout=120).start()
    wait_until(lambda: gates.started("k1"), what="the node running on A")
    assert reader.wait_for("node_started", "hold")

    a.kill()

    events = reader.join(TAKEOVER_BOUND_S)
    end = events[-1]
    assert end["type"] == "error" and end["code"] == "interrupted", events
    assert "send" in end["message"].lower()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # no gap
    assert [e["type"] for e in events].count("error") == 1
    assert status(b.url, turn_id) == "interrupted"
    assert httpx.get(f"{b.url}/turns/{turn_id}", timeout=30).json()["attempt"] == 2
    assert recovered(b.url) == 1
    # a reader that comes now (any cursor) gets the same end, and one at it gets 204
    again = TurnReader(b.url, turn_id, timeout=60).start().join(60)
    assert again[-1] == end
    with httpx.Client(timeout=30) as client:
        done = client.get(
            f"{b.url}/turns/{turn_id}/events", headers={"Last-Event-ID": str(end["seq"])}
        )
        assert done.status_code == 204
        # the thread takes a new message, on the replica that is left
        following = chat(b.url, "k2", thread_id)
        assert following.status_code == 202, following.text
        gates.release("k2")
        wait_until(
            lambda: status(b.url, following.json()["turn_id"]) == "answered",
            timeout=TAKEOVER_BOUND_S,
            what="the thread's next turn answered",
        )
    assert gates.runs("k1") == ["a"]  # ended, not run again


def test_a_hung_replica_loses_its_turn_and_its_thread_and_stays_quiet_when_woken(
    cluster, redis_url: str, postgres_url: str
) -> None:
    start, gates = cluster
    a = start("a", **shared(redis_url, postgres_url, **ENDS))
    b = start("b", **shared(redis_url, postgres_url, **ENDS))
    started = chat(a.url, "h1")
    assert started.status_code == 202, started.text
    turn_id, thread_id = started.json()["turn_id"], started.json()["thread_id"]
    reader = TurnReader(b.url, turn_id, timeout=120).start()
    wait_until(lambda: gates.started("h1"), what="the node running on A")
    assert reader.wait_for("node_started", "hold")
    refused = chat(b.url, "h0", thread_id)  # A holds the thread
    assert refused.status_code == 409, refused.text

    a.pause()  # SIGSTOP: its process, its sockets and its thread lock's session all live

    events = reader.join(TAKEOVER_BOUND_S)
    assert events[-1]["type"] == "error" and events[-1]["code"] == "interrupted", events
    assert status(b.url, turn_id) == "interrupted"
    # the thread is free: the hung session that held its lock was ended
    following = wait_until(
        lambda: (r := chat(b.url, "h2", thread_id)).status_code == 202 and r,
        timeout=TAKEOVER_BOUND_S,
        what="the thread taking a new message",
    )
    gates.release("h2")
    wait_until(
        lambda: status(b.url, following.json()["turn_id"]) == "answered",
        timeout=TAKEOVER_BOUND_S,
        what="the thread's next turn answered",
    )

    a.resume()  # SIGCONT: its renewal finds the turn taken over and cancels its run
    wait_until(
        lambda: a.logged(f"turn {turn_id} was taken over by another instance"),
        timeout=TAKEOVER_BOUND_S,
        what="A seeing its turn taken over",
    )
    wait_until(lambda: httpx.get(f"{a.url}/readyz", timeout=5).status_code == 200, what="A back")
    assert status(a.url, turn_id) == "interrupted"  # not flipped back
    ends = terminal_events(redis_url, turn_id)
    assert [(e["type"], e["code"]) for e in ends] == [("error", "interrupted")]
    assert gates.runs("h1") == ["a"]


def test_a_node_longer_than_the_lease_keeps_its_turn(
    cluster, redis_url: str, postgres_url: str
) -> None:
    start, gates = cluster
    a = start("a", **shared(redis_url, postgres_url, LONG_LEASE_S))
    b = start("b", **shared(redis_url, postgres_url, LONG_LEASE_S))
    started = chat(a.url, "long")
    assert started.status_code == 202, started.text
    turn_id = started.json()["turn_id"]
    reader = TurnReader(b.url, turn_id, timeout=120).start()
    wait_until(lambda: gates.started("long"), what="the node running on A")

    # several lease periods pass while the node waits (seen as the lease renewed, in
    # the shared table, three whole leases past the first one seen), B sweeping all along
    with psycopg.connect(postgres_url, autocommit=True) as db:

        def lease() -> float:
            row = db.execute(
                "SELECT lease_until FROM relay_turns WHERE turn_id = %s", (turn_id,)
            ).fetchone()
            return float(row[0] or 0)

        first = wait_until(lease, what="the turn's lease")
        wait_until(
            lambda: lease() > first + 3 * float(LONG_LEASE_S) * 1000,
            timeout=TAKEOVER_BOUND_S,
            what="three lease periods of renewals",
        )
    assert status(b.url, turn_id) == "running"

    gates.release("long")
    events = [e for e in reader.join(TAKEOVER_BOUND_S) if e["type"] != "message_saved"]
    assert events[-1]["type"] == "turn_completed", events
    assert events[-1]["response"]["answer"] == "done long"
    assert status(b.url, turn_id) == "answered"
    assert gates.runs("long") == ["a"]  # run once, by its own replica
    assert recovered(b.url) == 0 and recovered(a.url) == 0


def test_a_sqlite_instance_killed_and_started_under_another_id_ends_the_turn(cluster) -> None:
    start, gates = cluster
    first = start("s1", RELAY_LEASE_S=LEASE_S)  # SQLite, the memory bus: one instance
    started = chat(first.url, "s")
    assert started.status_code == 202, started.text
    turn_id, thread_id = started.json()["turn_id"], started.json()["thread_id"]
    wait_until(lambda: gates.started("s"), what="the node running")
    assert status(first.url, turn_id) == "running"

    first.kill()
    second = start("s2", RELAY_LEASE_S=LEASE_S)  # another instance id, the same files

    assert status(second.url, turn_id) == "interrupted"
    # its cut run's log died with it (the in-process bus): not judged safe, so ended
    assert recovered(second.url, "unsafe") == 1
    events = TurnReader(second.url, turn_id, timeout=60).start().join(60)
    assert events[-1]["type"] == "error" and events[-1]["code"] == "interrupted", events
    following = chat(second.url, "s-next", thread_id)
    assert following.status_code == 202, following.text
    gates.release("s-next")
    wait_until(
        lambda: status(second.url, following.json()["turn_id"]) == "answered",
        timeout=TAKEOVER_BOUND_S,
        what="the thread's next turn answered",
    )
    assert gates.runs("s") == ["s1"]
