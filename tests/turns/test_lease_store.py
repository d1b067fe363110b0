"""The leases in the turn stores (relay/turns/lease_store.py), on SQLite and the real
PostgreSQL: a claim goes to exactly one claimer and counts the attempt, a renewal keeps
only the turns still ours, a live lease and a turn without one are left alone, existing
tables upgrade in place, and freeing a hung owner's thread ends that session only."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from relay.turns import sqlite as turns_module
from relay.turns.records import RUNNING, TurnRecord
from relay.turns.sqlite import SQLiteTurnStore


def _now() -> float:
    return time.time() * 1000


def running(lease_until: float, turn_id: str | None = None) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id or str(uuid.uuid4()),
        thread_id=str(uuid.uuid4()),
        status=RUNNING,
        started_at=_now(),
        graph="g",
        lease_until=lease_until,
    )


def pg(url: str, instance: str) -> Any:
    from relay.turns.postgres import PostgresTurnStore

    return PostgresTurnStore(url, instance_id=instance)


async def test_an_expired_turn_is_claimed_by_exactly_one_instance(postgres_url: str) -> None:
    a, b, c = pg(postgres_url, "a"), pg(postgres_url, "b"), pg(postgres_url, "c")
    try:
        dead = running(_now() - 1)
        await a.create(dead)
        later = _now() + 60_000
        claims = await asyncio.gather(
            b.claim_expired(_now(), later, [], False), c.claim_expired(_now(), later, [], False)
        )
        claimed = [r for claim in claims for r in claim]
        assert [r.turn_id for r in claimed] == [dead.turn_id]
        assert claimed[0].attempt == 2 and claimed[0].lease_until == later
        claimer = b if claims[0] else c
        # the owner's renewal (attempt 1) finds it gone; the claimer's (attempt 2) holds
        assert await a.renew_leases({dead.turn_id: 1}, later) == set()
        assert await claimer.renew_leases({dead.turn_id: 2}, later + 1) == {dead.turn_id}
        assert (await a.get(dead.turn_id)).lease_until == later + 1
        # claimed and leased now: nobody claims it again
        assert await a.claim_expired(_now(), later, [], False) == []
    finally:
        for store in (a, b, c):
            store.close()


async def test_live_leases_and_turns_without_one_are_left_alone(postgres_url: str) -> None:
    a, b = pg(postgres_url, "a"), pg(postgres_url, "b")
    try:
        live = running(_now() + 60_000)
        received = running(0.0)  # a turn received over OTLP: no lease
        mine = running(_now() - 1)  # expired, but b runs it (b's own: excluded)
        for record in (live, received):
            await a.create(record)
        await b.create(mine)
        assert await b.claim_expired(_now(), _now() + 1000, [mine.turn_id], False) == []
        assert await a.claim_expired(_now(), _now() + 1000, [], False) == [
            await a.get(mine.turn_id)
        ]  # b's, to anyone but b: its lease ran out
        # a's next start ends what a left running (and claimed), whatever their leases say
        started = await a.claim_expired(_now(), _now() + 1000, [], True)
        assert {r.turn_id for r in started} == {live.turn_id, received.turn_id, mine.turn_id}
    finally:
        a.close()
        b.close()


async def test_a_postgres_table_from_before_leases_upgrades_in_place(postgres_url: str) -> None:
    store = pg(postgres_url, "a")
    old = running(0.0)
    await store.create(old)
    store.close()
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(
            "ALTER TABLE relay_turns DROP COLUMN lease_until, DROP COLUMN attempt, "
            "DROP COLUMN lock_holder"
        )
    store = pg(postgres_url, "a")
    try:
        record = await store.get(old.turn_id)
        assert (record.lease_until, record.attempt, record.lock_holder) == (0.0, 1, 0)
        claimed = await store.claim_expired(_now(), _now() + 1000, [], True)
        assert [(r.turn_id, r.attempt) for r in claimed] == [(old.turn_id, 2)]
    finally:
        store.close()


async def test_a_sqlite_file_from_before_leases_upgrades_and_its_start_claims_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "turns.db"
    with monkeypatch.context() as patch:
        patch.setattr(turns_module, "_MIGRATIONS", turns_module._MIGRATIONS[:7])
        SQLiteTurnStore(path).close()
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO turns (turn_id, thread_id, status, started_at, turn_key, thread_key) "
        "VALUES ('t1', 'h1', 'running', 1, 't1', 'h1')"
    )
    db.commit()
    db.close()
    store = SQLiteTurnStore(path)
    try:
        record = await store.get("t1")
        assert (record.lease_until, record.attempt, record.lock_holder) == (0.0, 1, 0)
        # one instance uses the file: only its start claims, and every running turn
        assert await store.claim_expired(_now(), _now() + 1000, [], False) == []
        claimed = await store.claim_expired(_now(), _now() + 1000, [], True)
        assert [(r.turn_id, r.attempt) for r in claimed] == [("t1", 2)]
        assert await store.renew_leases({"t1": 1}, _now()) == set()
        assert await store.renew_leases({"t1": 2}, _now()) == {"t1"}
    finally:
        store.close()


async def test_freeing_a_thread_ends_only_the_session_that_holds_its_lock(
    postgres_url: str,
) -> None:
    owner, claimer = pg(postgres_url, "a"), pg(postgres_url, "b")
    try:
        thread = str(uuid.uuid4())
        held = await owner.lock_thread(thread)
        assert held is not None and held.holder
        assert await claimer.lock_thread(thread) is None  # busy
        record = running(_now() - 1)
        record.thread_id, record.lock_holder = thread, held.holder
        assert await claimer.free_thread(record) is True

        for _ in range(600):  # the ended session's lock goes a moment after
            if (again := await claimer.lock_thread(thread)) is not None:
                break
            await asyncio.sleep(0.05)
        assert again is not None
        await held.release()  # the ended session: logged, never raised
        # the thread's new holder is another session: the old record frees nothing
        assert await owner.free_thread(record) is False
        assert await owner.lock_thread(thread) is None
        await again.release()
    finally:
        owner.close()
        claimer.close()


async def test_an_owner_frozen_inside_a_transaction_does_not_keep_its_turn(
    postgres_url: str,
) -> None:
    """A process frozen between a statement and its commit (SIGSTOP) holds the rows it
    changed; the claim skips locked rows. The records' pool bounds such a transaction
    (``idle_in_transaction_session_timeout``): the server ends that session, and the
    next claim gets the turn."""
    owner, claimer = pg(postgres_url, "owner"), pg(postgres_url, "claimer")
    try:
        dead = running(_now() - 1)
        await owner.create(dead)
        frozen = owner._pool.getconn()  # a session of the owner's own records pool
        frozen.execute("BEGIN")
        frozen.execute(
            "UPDATE relay_turns SET lease_until = lease_until WHERE turn_id = %s",
            (dead.turn_id,),
        )  # the row is locked, and the session sits in its transaction from here

        got: list[TurnRecord] = []
        for _ in range(1200):  # 120 s: a bound on a hang
            got = await claimer.claim_expired(_now(), _now() + 60_000, [], False)
            if got:
                break
            await asyncio.sleep(0.1)
        assert [r.turn_id for r in got] == [dead.turn_id]
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):  # ended by the server
            frozen.execute("COMMIT")
        owner._pool.putconn(frozen)
    finally:
        owner.close()
        claimer.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_renewal_that_comes_after_the_hand_over_does_not_take_the_turn_back(
    kind: str, tmp_path: Path, postgres_url: str
) -> None:
    """A stopping instance hands its turn over (relay/turns/draining.py) while its renewal
    round, which read the turn as its own a moment before, is still on its way: the
    renewal must leave the handed-over lease as it is, so that a peer claims the turn at
    its next sweep, not a lease later."""
    store = SQLiteTurnStore(tmp_path / "turns.db") if kind == "sqlite" else pg(postgres_url, "a")
    try:
        turn = running(_now() + 60_000)
        await store.create(turn)
        await store.update(turn.turn_id, lease_until=1.0, handover="drained", lock_holder=0)
        assert await store.renew_leases({turn.turn_id: 1}, _now() + 60_000) == set()
        handed = await store.get(turn.turn_id)
        assert (handed.lease_until, handed.handover) == (1.0, "drained")
        if kind == "postgres":  # the next sweep of any peer claims it
            peer = pg(postgres_url, "b")
            try:
                claimed = await peer.claim_expired(_now(), _now() + 60_000, [], False)
                assert [r.turn_id for r in claimed] == [turn.turn_id]
                assert claimed[0].handover == "drained" and claimed[0].attempt == 2
            finally:
                peer.close()
    finally:
        store.close()
