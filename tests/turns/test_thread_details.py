"""A thread row's details (relay/turns/threads.py), on both turn stores (SQLite and the
real PostgreSQL): its id as first spelled, metadata set at the claim and merged after,
``created_at`` / ``updated_at`` moved by its turns, the deleted mark (listed no more,
the owner kept, brought back by its owner's next turn), the listing by user and id; and
the rows recorded before the details get them from their turns."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from relay.turns import sqlite as turns_module
from relay.turns.records import TurnRecord
from relay.turns.sqlite import SQLiteTurnStore


@pytest.fixture
def turns(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "postgres":
        from relay.turns.postgres import PostgresTurnStore

        store: Any = PostgresTurnStore(request.getfixturevalue("postgres_url"), instance_id="t")
    else:
        store = SQLiteTurnStore(tmp_path / "turns.db")
    yield store
    store.close()


def rec(turn_id: str, thread_id: str, user_id: str = "", status: str = "running") -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id, thread_id=thread_id, status=status, started_at=1.0, user_id=user_id
    )


async def test_metadata_times_and_the_deleted_mark(turns: Any) -> None:
    thread = str(uuid.uuid4()).upper()  # kept as spelled, found in any spelling
    assert await turns.get_thread(thread) is None
    assert await turns.claim_thread(thread, "alice", {"a": 1, "b": {"c": 2}}) == "alice"
    made = await turns.get_thread(thread.lower())
    assert made.thread_id == thread and made.owner == "alice" and not made.deleted
    assert made.metadata == {"a": 1, "b": {"c": 2}} and made.created_at == made.updated_at
    assert made.last_status is None and made.last_graph is None

    merged = await turns.patch_thread(thread, {"b": 3, "d": None})
    assert merged.metadata == {"a": 1, "b": 3, "d": None}
    assert merged.updated_at >= made.updated_at and merged.created_at == made.created_at
    assert await turns.patch_thread("th-none", {"x": 1}) is None

    await turns.create(rec("t1", thread, "alice"))
    ran = await turns.get_thread(thread)
    assert ran.last_status == "running" and ran.updated_at >= merged.updated_at
    await turns.update("t1", status="answered", ended_at=2.0)
    ended = await turns.get_thread(thread)
    assert ended.last_status == "answered" and ended.updated_at >= ran.updated_at

    await turns.delete_thread(thread)
    gone = await turns.get_thread(thread)
    assert gone.deleted and gone.metadata == {} and gone.owner == "alice"
    assert thread not in [t.thread_id for t in await turns.threads()]
    assert await turns.claim_thread(thread, "bob") == "alice"  # its id stays hers
    # her next turn brings it back
    await turns.create(rec("t2", thread, "alice"))
    assert not (await turns.get_thread(thread)).deleted
    await turns.delete_thread(thread)
    revived = await turns.patch_thread(thread, {"new": True}, revive=True)
    assert not revived.deleted and revived.metadata == {"new": True}


async def test_threads_a_user_may_see(turns: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    alice, bob, anyone = f"a-{tag}", f"b-{tag}", f"o-{tag}"
    await turns.claim_thread(alice, "alice")
    await turns.claim_thread(bob, "bob")
    await turns.claim_thread(anyone, "")
    seen = {t.thread_id for t in await turns.threads("alice")}
    assert alice in seen and anyone in seen and bob not in seen
    picked = await turns.threads(None, [bob, anyone, "th-missing"])
    assert sorted(t.thread_id for t in picked) == sorted([bob, anyone])
    assert await turns.threads("alice", []) == []


async def test_threads_recorded_before_the_details_get_them_from_their_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "turns.db"
    with monkeypatch.context() as patch:  # the store as it was at version 9
        patch.setattr(turns_module, "_MIGRATIONS", turns_module._MIGRATIONS[:9])
        SQLiteTurnStore(path).close()
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO turns (turn_id, thread_id, status, started_at, ended_at, turn_key, "
            "thread_key, user_id) VALUES (?, ?, 'answered', ?, ?, ?, ?, 'alice')",
            [
                ("t-1", "TH-A", 1000.0, 1500.0, "t-1", "TH-A"),
                ("t-2", "TH-A", 2000.0, 2500.0, "t-2", "TH-A"),
            ],
        )
        db.execute("INSERT INTO threads (thread_key, owner) VALUES ('TH-A', 'alice')")
    db.close()
    store = SQLiteTurnStore(path)
    try:
        found = await store.get_thread("TH-A")
        assert found is not None and found.thread_id == "TH-A" and found.metadata == {}
        assert (found.created_at, found.updated_at) == (1000.0, 2500.0)
    finally:
        store.close()


async def test_postgres_threads_recorded_before_the_details_get_them(postgres_url: str) -> None:
    import psycopg

    from relay.turns.postgres import PostgresTurnStore

    PostgresTurnStore(postgres_url, instance_id="x").close()
    with psycopg.connect(postgres_url, autocommit=True) as db:
        for column in ("thread_id", "metadata", "created_at", "updated_at", "deleted_at"):
            db.execute(f"ALTER TABLE relay_threads DROP COLUMN {column}")
        for turn, started, ended in [("t-1", 1000.0, 1500.0), ("t-2", 2000.0, 2500.0)]:
            db.execute(
                "INSERT INTO relay_turns (turn_id, thread_id, status, started_at, ended_at, "
                "turn_key, thread_key, user_id) "
                "VALUES (%s, 'TH-A', 'answered', %s, %s, %s, 'TH-A', 'alice')",
                (turn, started, ended, turn),
            )
        db.execute("INSERT INTO relay_threads (thread_key, owner) VALUES ('TH-A', 'alice')")
    store = PostgresTurnStore(postgres_url, instance_id="x")
    try:
        found = await store.get_thread("TH-A")
        assert found is not None and found.thread_id == "TH-A" and found.metadata == {}
        assert (found.created_at, found.updated_at) == (1000.0, 2500.0)
    finally:
        store.close()
