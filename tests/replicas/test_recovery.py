"""Recovery from the checkpoint with real processes (relay/turns/recovering.py): a turn
whose replica is killed goes on on the other one, from the thread's last checkpoint,
when nothing with a side effect was running in the step that was cut.

Two replicas (``span-relay serve --graph``) share Redis (the bus) and a fresh PostgreSQL
database (turn records, checkpoints), with ``RELAY_LEASE_S=2``. The graph
(tests/replicas/processes.py, ``RECOVERY_GRAPH``) runs ``prepare``, ``hold``, which
waits on a file, and ``finish``; its ledger says what ran where, so "ran once" is
counted, never timed.

- ``kill -9`` mid-step: a reader on the other replica gets ``turn_recovered`` at the next
  seq, the re-run step's events and the answer; ``prepare`` ran once, ``hold`` twice;
- ``kill -9`` while a side-effecting tool runs: the turn ends ``interrupted``, code
  ``reason`` ``tool_running``, naming the tool, which ran once;
- the same with a tool that declares itself idempotent: recovered, the tool run again;
- SIGSTOP of the owner: recovered on the other replica; the owner, woken, saves no
  checkpoint of its stale step (relay/turns/fencing.py) and runs nothing further;
- SIGTERM while ``hold`` runs: the run stops at the step boundary after it, its turn
  handed over at once, and the other replica runs only ``finish``;
- a SQLite instance killed and started again with ``RELAY_RECOVERY=always``: recovered
  at its start; killed again past ``RELAY_RECOVERY_MAX_ATTEMPTS``: ``recovery_exhausted``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.interop.conftest import TurnReader, wait_until
from tests.replicas.processes import Gates, Replica, replicas_of, write_recovery_graph
from tests.replicas.test_leases import (
    LEASE_S,
    TAKEOVER_BOUND_S,
    chat,
    recovered,
    shared,
    status,
    terminal_events,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Callable[..., Replica], Gates]]:
    with replicas_of(tmp_path, *write_recovery_graph(tmp_path)) as made:
        yield made


def seqs_follow(events: list[dict]) -> bool:
    return [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_kill_9_mid_step_is_recovered_on_the_other_replica(
    cluster, redis_url: str, postgres_url: str
) -> None:
    start, gates = cluster
    a = start("a", **shared(redis_url, postgres_url))
    b = start("b", **shared(redis_url, postgres_url))
    started = chat(a.url, "r1")
    assert started.status_code == 202, started.text
    turn_id = started.json()["turn_id"]
    reader = TurnReader(b.url, turn_id, timeout=120).start()
    wait_until(lambda: gates.started("r1"), what="hold running on A")
    assert reader.wait_for("node_started", "hold")

    a.kill()

    wait_until(lambda: ("hold", "b") in gates.ran("r1"), timeout=TAKEOVER_BOUND_S, what="B")
    gates.release("r1")
    events = [e for e in reader.join(TAKEOVER_BOUND_S) if e["type"] != "message_saved"]
    types = [e["type"] for e in events]
    assert seqs_follow(events), events  # one turn, one sequence: no gap, no repeat
    recovered_at = types.index("turn_recovered")
    assert events[recovered_at]["attempt"] == 1
    assert events[recovered_at]["reason"] == "owner_lost"
    assert events[recovered_at]["resumed_from"]  # the checkpoint after prepare
    topology = events[recovered_at + 1]
    assert topology["type"] == "graph_topology" and topology["run_kind"] == "recover"
    assert topology["trace_id"] != events[0]["trace_id"]  # a run of its own
    rerun = [e.get("node") for e in events[recovered_at:] if e["type"] == "node_started"]
    assert rerun == ["hold", "finish"]  # prepare completed before the cut: not run again
    assert types[-1] == "turn_completed" and events[-1]["response"]["answer"] == "done r1"
    assert gates.ran("r1") == [("prepare", "a"), ("hold", "a"), ("hold", "b"), ("finish", "b")]
    record = httpx.get(f"{b.url}/turns/{turn_id}", timeout=30).json()
    assert record["status"] == "answered" and record["attempt"] == 2
    assert recovered(b.url, "recovered") == 1
    # a reader that comes now replays the same turn, cut run and recovery included
    again = [e for e in TurnReader(b.url, turn_id).start().join(60) if e["type"] != "message_saved"]
    assert again == events


def test_kill_9_while_a_tool_runs_ends_the_turn_and_the_tool_ran_once(
    cluster, redis_url: str, postgres_url: str
) -> None:
    start, gates = cluster
    a = start("a", **shared(redis_url, postgres_url))
    b = start("b", **shared(redis_url, postgres_url))
    started = chat(a.url, "tool-1")
    assert started.status_code == 202, started.text
    turn_id, thread_id = started.json()["turn_id"], started.json()["thread_id"]
    reader = TurnReader(b.url, turn_id, timeout=120).start()
    wait_until(lambda: gates.started("tool-1"), what="the tool running on A")
    assert reader.wait_for("tool_started")

    a.kill()

    events = reader.join(TAKEOVER_BOUND_S)
    end = events[-1]
    assert end["type"] == "error" and end["code"] == "interrupted", events
    assert end["reason"] == "tool_running" and end["tools"] == ["charge"]
    assert "charge" in end["message"] and end["retryable"] is True
    assert "turn_recovered" not in [e["type"] for e in events]
    assert seqs_follow(events)
    assert status(b.url, turn_id) == "interrupted"
    assert recovered(b.url, "unsafe") == 1
    # a reader that comes after the log: the same end, from the record
    assert TurnReader(b.url, turn_id).start().join(60)[-1] == end
    gates.release("tool-1")  # nothing runs it again: the ledger keeps one charge
    following = chat(b.url, "after", thread_id)
    assert following.status_code == 202, following.text
    gates.release("after")
    wait_until(
        lambda: status(b.url, following.json()["turn_id"]) == "answered",
        timeout=TAKEOVER_BOUND_S,
        what="the thread's next turn answered",
    )
    assert gates.ran("tool-1") == [("prepare", "a"), ("hold", "a"), ("charge", "a")]
    ends = terminal_events(redis_url, turn_id)
    assert [(e["type"], e["code"]) for e in ends] == [("error", "interrupted")]


def test_an_idempotent_tool_does_not_keep_its_turn_from_recovery(
    cluster, redis_url: str, postgres_url: str
) -> None:
    start, gates = cluster
    a = start("a", **shared(redis_url, postgres_url))
    b = start("b", **shared(redis_url, postgres_url))
    started = chat(a.url, "idem-1")
    turn_id = started.json()["turn_id"]
    reader = TurnReader(b.url, turn_id, timeout=120).start()
    wait_until(lambda: gates.started("idem-1"), what="the tool running on A")
    assert reader.wait_for("tool_started")
    assert next(e for e in reader.events() if e["type"] == "tool_started")["idempotent"] is True

    a.kill()

    wait_until(lambda: ("lookup", "b") in gates.ran("idem-1"), timeout=TAKEOVER_BOUND_S, what="B")
    gates.release("idem-1")
    events = reader.join(TAKEOVER_BOUND_S)
    assert [e["type"] for e in events if e["type"] != "message_saved"][-1] == "turn_completed"
    assert gates.ran("idem-1") == [
        ("prepare", "a"),
        ("hold", "a"),
        ("lookup", "a"),
        ("hold", "b"),
        ("lookup", "b"),
        ("finish", "b"),
    ]


def test_a_hung_owner_woken_after_its_turn_was_recovered_writes_nothing(
    cluster, redis_url: str, postgres_url: str
) -> None:
    """SIGSTOP of the owner mid-step: the other replica recovers the turn and answers;
    the owner, woken (SIGCONT) with its node's gate open, finds at its checkpoint write
    (or its renewal) that the turn is not its own: it saves nothing of the step, runs no
    further node, publishes no second end."""
    start, gates = cluster
    a = start("a", **shared(redis_url, postgres_url))
    b = start("b", **shared(redis_url, postgres_url))
    started = chat(a.url, "w1")
    turn_id, thread_id = started.json()["turn_id"], started.json()["thread_id"]
    reader = TurnReader(b.url, turn_id, timeout=120).start()
    wait_until(lambda: gates.started("w1"), what="hold running on A")
    assert reader.wait_for("node_started", "hold")

    a.pause()
    wait_until(lambda: ("hold", "b") in gates.ran("w1"), timeout=TAKEOVER_BOUND_S, what="B")
    gates.release("w1")  # B's hold returns; A's too, the moment A wakes
    events = [e for e in reader.join(TAKEOVER_BOUND_S) if e["type"] != "message_saved"]
    assert events[-1]["type"] == "turn_completed", events
    a.resume()
    wait_until(
        lambda: a.logged(f"turn {turn_id} was taken over by another instance"),
        timeout=TAKEOVER_BOUND_S,
        what="A seeing its turn taken over",
    )
    wait_until(lambda: httpx.get(f"{a.url}/readyz", timeout=5).status_code == 200, what="A")
    assert ("finish", "a") not in gates.ran("w1")  # A's run went no further
    ends = terminal_events(redis_url, turn_id)
    assert [e["type"] for e in ends] == ["turn_completed"]
    # the thread is whole: its next turn, on A, answers on top of B's answer
    following = chat(a.url, "w2", thread_id)
    assert following.status_code == 202, following.text
    gates.release("w2")
    wait_until(
        lambda: status(a.url, following.json()["turn_id"]) == "answered",
        timeout=TAKEOVER_BOUND_S,
        what="the thread's next turn answered",
    )
    history = httpx.get(f"{a.url}/turns", params={"thread_id": thread_id}, timeout=30).json()
    assert sorted(t["status"] for t in history["turns"]) == ["answered", "answered"]


def test_sigterm_hands_the_turn_over_at_the_next_step_boundary(
    cluster, redis_url: str, postgres_url: str
) -> None:
    start, gates = cluster
    # the leases are long: the turn moves at once because it is handed over, not lost
    a = start("a", **shared(redis_url, postgres_url, "60", RELAY_SHUTDOWN_GRACE_S="120"))
    b = start("b", **shared(redis_url, postgres_url, "60"))
    started = chat(a.url, "d1")
    turn_id = started.json()["turn_id"]
    reader = TurnReader(b.url, turn_id, timeout=120).start()
    wait_until(lambda: gates.started("d1"), what="hold running on A")

    a.proc.send_signal(signal.SIGTERM)  # A stops: the run is asked to drain
    wait_until(lambda: a.logged("asked to stop at their next step boundary"), what="drain")
    gates.release("d1")  # hold ends; LangGraph stops before finish, its checkpoint saved

    events = [e for e in reader.join(TAKEOVER_BOUND_S) if e["type"] != "message_saved"]
    assert a.proc.wait(60) in (0, -signal.SIGTERM)  # uvicorn exits with the signal it got
    types = [e["type"] for e in events]
    assert seqs_follow(events), events
    recovered_at = types.index("turn_recovered")
    assert events[recovered_at]["reason"] == "handed_over"
    rerun = [e.get("node") for e in events[recovered_at:] if e["type"] == "node_started"]
    assert rerun == ["finish"]  # the step that completed on A is not run again
    assert [t for t in types if t in ("turn_completed", "error", "paused")] == ["turn_completed"]
    assert gates.ran("d1") == [("prepare", "a"), ("hold", "a"), ("finish", "b")]
    record = httpx.get(f"{b.url}/turns/{turn_id}", timeout=30).json()
    assert record["status"] == "answered" and record["attempt"] == 2


def test_a_sqlite_instance_started_again_recovers_its_turn_when_told_to(cluster) -> None:
    """One instance, the in-process bus: the cut run's log died with its process, so
    ``safe`` cannot judge it; ``always`` (the app's word) takes it up at the next start,
    and the attempts are capped."""
    start, gates = cluster
    secret = "proxy-secret-of-the-test"
    policy = {
        "RELAY_LEASE_S": LEASE_S,
        "RELAY_RECOVERY": "always",
        "RELAY_AUTH": "proxy",
        "RELAY_PROXY_SECRET": secret,
    }
    alice = {"X-Forwarded-User": "alice", "X-Relay-Proxy-Secret": secret}
    first = start("s1", **policy)
    started = httpx.post(
        f"{first.url}/chat",
        json={"message": "s"},
        headers={"Prefer": "respond-async", **alice},
        timeout=30,
    )
    assert started.status_code == 202, started.text
    turn_id = started.json()["turn_id"]
    wait_until(lambda: gates.started("s"), what="hold running")

    first.kill()
    second = start("s2", **policy)  # another instance id, the same files

    wait_until(lambda: ("hold", "s2") in gates.ran("s"), timeout=TAKEOVER_BOUND_S, what="s2")
    assert ("user=alice", "s2") in gates.ran("s")  # the recovered run acts for the turn's user
    assert recovered(second.url, "recovered", alice) == 1
    second.kill()  # cut again, mid-step; the next start may not take it up a second time
    third = start("s3", **policy, RELAY_RECOVERY_MAX_ATTEMPTS="1")

    assert status(third.url, turn_id, alice) == "interrupted"
    events = TurnReader(third.url, turn_id, headers=alice, timeout=60).start().join(60)
    assert events[-1]["type"] == "error" and events[-1]["code"] == "recovery_exhausted"
    assert events[-1]["retryable"] is False
    assert recovered(third.url, "exhausted", alice) == 1
    assert [what for what, _ in gates.ran("s")] == [
        "prepare",
        "hold",
        "user=alice",
        "hold",
        "user=alice",
    ]
