"""relay.turns.sqlite.SQLiteTurnStore: the turn records that outlive the process."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from relay.turns import sqlite as turns_module
from relay.turns.records import LIVE, PAUSED, RUNNING, TurnExists, TurnRecord
from relay.turns.sqlite import SQLiteTurnStore


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteTurnStore(tmp_path / "deep" / "dir" / "turns.db")
    yield s
    s.close()


def rec(
    turn_id: str, thread_id: str = "th", started_at: float = 1000.0, status: str = RUNNING, **kw
) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id, thread_id=thread_id, status=status, started_at=started_at, **kw
    )


async def test_create_and_get_round_trip(store: SQLiteTurnStore) -> None:
    record = rec(
        "t1",
        message="How do refunds work?",
        request_hash="h",
        last_seq=3,
        root_trace_id="a" * 32,
        root_span_id="b" * 16,
        paused_at=5.0,
        client_tool_round=2,
    )
    await store.create(record)
    assert await store.get("t1") == record
    assert await store.get("missing") is None


async def test_create_twice_raises_turn_exists(store: SQLiteTurnStore) -> None:
    await store.create(rec("t1"))
    with pytest.raises(TurnExists):
        await store.create(rec("t1", thread_id="other"))
    assert (await store.get("t1")).thread_id == "th"


async def test_update(store: SQLiteTurnStore) -> None:
    await store.create(rec("t1"))
    response = json.dumps({"status": "answered", "answer": "yes"})
    await store.update("t1", status="answered", ended_at=2000.0, response=response, last_seq=9)
    got = await store.get("t1")
    assert (got.status, got.ended_at, got.response, got.last_seq) == (
        "answered",
        2000.0,
        response,
        9,
    )
    await store.update("t1", ended_at=None)
    assert (await store.get("t1")).ended_at is None


async def test_update_unknown_field_is_refused(store: SQLiteTurnStore) -> None:
    await store.create(rec("t1"))
    with pytest.raises(ValueError, match="unknown turn fields"):
        await store.update("t1", status="x", **{"status = 'x'; --": 1})
    assert (await store.get("t1")).status == RUNNING


async def test_list_newest_first_filter_limit_before(store: SQLiteTurnStore) -> None:
    for i, (thread, started) in enumerate([("a", 1.0), ("a", 3.0), ("b", 2.0), ("a", 2.0)]):
        await store.create(rec(f"t{i}", thread_id=thread, started_at=started))
    assert [r.turn_id for r in await store.list("a")] == ["t1", "t3", "t0"]
    assert [r.turn_id for r in await store.list()] == ["t1", "t2", "t3", "t0"] or [
        r.turn_id for r in await store.list()
    ] == ["t1", "t3", "t2", "t0"]
    assert [r.started_at for r in await store.list()] == [3.0, 2.0, 2.0, 1.0]
    assert [r.turn_id for r in await store.list("a", limit=2)] == ["t1", "t3"]
    assert [r.turn_id for r in await store.list("a", before=3.0)] == ["t3", "t0"]
    assert await store.list("nobody") == []


async def test_mark_interrupted_only_touches_running(store: SQLiteTurnStore) -> None:
    await store.create(rec("running"))
    await store.create(rec("paused", status=PAUSED))
    await store.create(rec("done", status="answered", ended_at=5.0))
    assert await store.mark_interrupted() == 1
    running = await store.get("running")
    assert running.status == "interrupted" and running.ended_at is not None
    assert (await store.get("paused")).status == PAUSED
    assert (await store.get("done")).ended_at == 5.0
    assert await store.mark_interrupted() == 0


def test_schema_version_row(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    SQLiteTurnStore(path).close()
    SQLiteTurnStore(path).close()  # reopening does not migrate again
    versions = list(range(1, len(turns_module._MIGRATIONS) + 1))
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        columns = [row[1] for row in db.execute("PRAGMA table_info(turns)")]
    assert rows == [(v,) for v in versions]  # one row per migration, none applied twice
    # every field of the record has its column
    assert columns == [f for f in TurnRecord.__dataclass_fields__]


async def test_a_store_of_version_5_gains_the_client_tool_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turns file written before version 6 (no client-tool rounds) opens: its turns
    read with 0 rounds, and the rounds can be recorded."""
    path = tmp_path / "turns.db"
    with monkeypatch.context() as patch:  # the store as it was at version 5
        patch.setattr(turns_module, "_MIGRATIONS", turns_module._MIGRATIONS[:5])
        SQLiteTurnStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO turns (turn_id, thread_id, status, started_at, turn_key, "
            "thread_key) VALUES ('t-old', 'th', 'paused', 1000.0, 't-old', 'th')"
        )
    db.close()
    store = SQLiteTurnStore(path)
    try:
        old = await store.get("t-old")
        assert old is not None and old.status == PAUSED and old.client_tool_round == 0
        await store.update("t-old", client_tool_round=1)
        again = await store.get("t-old")
        assert again is not None and again.client_tool_round == 1
    finally:
        store.close()


async def test_reopening_the_same_file_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    first = SQLiteTurnStore(path)
    await first.create(rec("t1", message="hello"))
    await first.update("t1", status=PAUSED, last_seq=4)
    first.close()
    second = SQLiteTurnStore(path)
    try:
        got = await second.get("t1")
        assert (got.message, got.status, got.last_seq) == ("hello", PAUSED, 4)
        with pytest.raises(TurnExists):
            await second.create(rec("t1"))
    finally:
        second.close()


def test_public_view() -> None:
    r = rec("t1", message="m", response=json.dumps({"status": "answered"}), ended_at=1009.5)
    view = r.public()
    assert {
        k: view[k]
        for k in ("turn_id", "thread_id", "status", "message", "started_at", "ended_at", "response")
    } == {
        "turn_id": "t1",
        "thread_id": "th",
        "status": RUNNING,
        "message": "m",
        "started_at": 1000.0,
        "ended_at": 1009.5,
        "response": {"status": "answered"},
    }
    json.dumps(view)  # the view is JSON as it is
    assert rec("t2").public()["response"] is None
    assert LIVE == (RUNNING, PAUSED)


async def test_concurrent_creates_from_threads(store: SQLiteTurnStore) -> None:
    import asyncio

    await asyncio.gather(*(store.create(rec(f"t{i}", started_at=float(i))) for i in range(40)))
    listed = await store.list(limit=100)
    assert len(listed) == 40
    assert [r.started_at for r in listed] == sorted((float(i) for i in range(40)), reverse=True)
