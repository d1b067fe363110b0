"""Who a thread belongs to (relay/turns/threads.py), on both turn stores (SQLite and the
real PostgreSQL): the user of its first turn, for good, whatever later turns say or
whenever they claim to have started; the records written before the thread table get
their owners from their first turn the relay ran; and a received run cannot change a
turn of another user (relay/turns/foreign.py)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from relay import events as ev
from relay.events import Event
from relay.turns import sqlite as turns_module
from relay.turns.foreign import record_received_events
from relay.turns.records import TurnRecord
from relay.turns.sqlite import SQLiteTurnStore
from relay.turns.threads import apart_thread


def _open(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "postgres":
        from relay.turns.postgres import PostgresTurnStore

        return PostgresTurnStore(request.getfixturevalue("postgres_url"), instance_id="test")
    return SQLiteTurnStore(tmp_path / "turns.db")


@pytest.fixture
def turns(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    store = _open(backend, tmp_path, request)
    yield store
    store.close()


def rec(
    turn_id: str, thread_id: str, user_id: str, started_at: float, graph: str = ""
) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id,
        thread_id=thread_id,
        status="answered",
        started_at=started_at,
        user_id=user_id,
        graph=graph,
    )


async def test_the_first_turn_owns_the_thread_for_good(turns: Any) -> None:
    thread = str(uuid.uuid4())
    assert await turns.thread_owner(thread) is None
    await turns.create(rec("t1", thread, "alice", 1000.0, graph="support_agent"))
    # a later turn of bob's, claiming to have started long after (or before): no change
    await turns.create(rec("t2", thread.upper(), "bob", 9e15))
    await turns.create(rec("t3", thread.replace("-", ""), "", 1.0))
    assert await turns.thread_owner(thread) == "alice"
    assert await turns.claim_thread(thread.replace("-", "").upper(), "bob") == "alice"
    assert await turns.thread_owner(thread) == "alice"
    # a new thread is the claimer's; a thread of no user stays no user's
    assert await turns.claim_thread("th-new", "bob") == "bob"
    assert await turns.claim_thread("th-new", "alice") == "bob"
    await turns.create(rec("t4", "th-open", "", 1000.0))
    await turns.create(rec("t5", "th-open", "alice", 2000.0))
    assert await turns.thread_owner("th-open") == ""


async def test_concurrent_claims_have_one_winner(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two stores on the same records (two replicas on PostgreSQL; two handles of one
    file on SQLite) claim one new thread at once: both read the same owner."""
    a = _open(backend, tmp_path, request)
    b = _open(backend, tmp_path, request)
    try:
        for i in range(20):
            thread = f"th-{i}"
            owners = await asyncio.gather(
                a.claim_thread(thread, "alice"), b.claim_thread(thread, "bob")
            )
            assert owners[0] == owners[1] in ("alice", "bob"), owners
    finally:
        a.close()
        b.close()


async def test_threads_recorded_before_the_table_get_their_first_turns_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQLite file of version 6: alice's turn the relay ran, and an earlier-dated turn
    received for bob on her thread (a sender's timestamps): the thread is hers."""
    path = tmp_path / "turns.db"
    with monkeypatch.context() as patch:
        patch.setattr(turns_module, "_MIGRATIONS", turns_module._MIGRATIONS[:6])
        SQLiteTurnStore(path).close()
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO turns (turn_id, thread_id, status, started_at, turn_key, thread_key, "
            "graph, user_id) VALUES (?, ?, 'answered', ?, ?, ?, ?, ?)",
            [
                ("t-hers", "th", 1000.0, "t-hers", "th", "support_agent", "alice"),
                ("t-sent", "th", 1.0, "t-sent", "th", "", "bob"),
                ("t-open", "th-open", 5.0, "t-open", "th-open", "", ""),
            ],
        )
    db.close()
    store = SQLiteTurnStore(path)
    try:
        assert await store.thread_owner("th") == "alice"
        assert await store.thread_owner("th-open") == ""
    finally:
        store.close()


async def test_postgres_threads_recorded_before_the_table_get_their_first_turns_owner(
    postgres_url: str,
) -> None:
    import psycopg

    from relay.turns.postgres import PostgresTurnStore

    PostgresTurnStore(postgres_url, instance_id="x").close()
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("DROP TABLE relay_threads")  # the records as they were before it
        for turn, thread, started, graph, user in [
            ("t-hers", "th", 1000.0, "support_agent", "alice"),
            ("t-sent", "th", 1.0, "", "bob"),
            ("t-open", "th-open", 5.0, "", ""),
        ]:
            db.execute(
                "INSERT INTO relay_turns (turn_id, thread_id, status, started_at, turn_key, "
                "thread_key, graph, user_id) VALUES (%s, %s, 'answered', %s, %s, %s, %s, %s)",
                (turn, thread, started, turn, thread, graph, user),
            )
    store = PostgresTurnStore(postgres_url, instance_id="x")
    try:
        assert await store.thread_owner("th") == "alice"
        assert await store.thread_owner("th-open") == ""
    finally:
        store.close()


def _run(turn_id: str, thread_id: str, ts: float) -> list[Event]:
    return [
        Event(ev.GRAPH_TOPOLOGY, thread_id, turn_id, "trace-" + turn_id, ts, {}),
        Event(
            ev.TURN_COMPLETED,
            thread_id,
            turn_id,
            "trace-" + turn_id,
            ts + 1,
            {"response": {"status": "answered", "answer": "sent"}},
            seq=2,
        ),
    ]


async def test_a_received_run_changes_no_turn_of_another_user(turns: Any) -> None:
    """Runs received for turns the store knows: one of the relay's own (never changed), a
    received turn of alice's (changed only by a run naming her), and a new one on her
    thread naming bob (kept apart, his)."""
    await turns.create(rec("t-hers", "th", "alice", 1000.0, graph="support_agent"))
    await turns.create(rec("t-got", "th", "alice", 2000.0))
    stats: dict[str, int] = {}
    for turn_id, user in [("t-hers", "bob"), ("t-hers", "alice"), ("t-got", "bob"), ("t-got", "")]:
        await record_received_events(
            turns,
            _run(turn_id, "th", 9e12),
            users={"trace-" + turn_id: user} if user else {},
            stats=stats,
        )
    assert stats == {"kept_apart": 4}
    for turn_id in ("t-hers", "t-got"):
        record = await turns.get(turn_id)
        assert record.status == "answered" and record.response is None, record
    await record_received_events(turns, _run("t-got", "th", 9e12), users={"trace-t-got": "alice"})
    assert (await turns.get("t-got")).response is not None  # her own sender's run
    await record_received_events(
        turns, _run("t-new", "th", 9e12), users={"trace-t-new": "bob"}, stats=stats
    )
    new = await turns.get("t-new")
    assert new.thread_id == apart_thread("t-new") and new.user_id == "bob"
    assert stats == {"kept_apart": 5}
    assert [r.turn_id for r in await turns.list("th")] == ["t-got", "t-hers"]
    assert await turns.thread_owner("th") == "alice"
