"""Check-and-start per turn and per thread (relay/turns/starting.py), and the durability
settings of the SQLite files a turn writes while it runs (issue 18, first byte under load)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

from relay.langgraph.checkpoints import open_checkpointer
from relay.settings import RelaySettings
from relay.turns.messages import SQLiteMessageStore
from relay.turns.sqlite import SQLiteTurnStore
from relay.turns.starting import StartLocks

NORMAL = 1  # PRAGMA synchronous: 0 OFF, 1 NORMAL, 2 FULL


async def _let_others_run() -> None:
    """Tasks just created run up to where they wait (a lock, here)."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_other_keys_do_not_wait() -> None:
    locks = StartLocks()
    released = asyncio.Event()

    async def holder(entered: asyncio.Event) -> None:
        async with locks.hold(StartLocks.keys(turn="a", thread="x")):
            entered.set()
            await released.wait()

    entered = asyncio.Event()
    held = asyncio.create_task(holder(entered))
    await entered.wait()
    # neither the same turn nor the same thread: in and out while the other is held
    async with locks.hold(StartLocks.keys(turn="b", thread="y")):
        pass
    async with locks.hold([]):  # names nothing: waits for nothing
        pass
    released.set()
    await held
    assert locks.held() == 0  # a key's lock is forgotten once nobody holds or waits


async def test_same_turn_or_thread_waits_its_turn() -> None:
    locks = StartLocks()
    order: list[str] = []
    released = asyncio.Event()
    entered = asyncio.Event()
    turn = str(uuid.uuid4())

    async def first() -> None:
        async with locks.hold(StartLocks.keys(turn=turn)):
            entered.set()
            await released.wait()
            order.append("first")

    async def second(keys: list[str], name: str) -> None:
        async with locks.hold(keys):
            order.append(name)

    a = asyncio.create_task(first())
    await entered.wait()
    # the same turn in another spelling of its id, and with a thread besides
    b = asyncio.create_task(
        second(StartLocks.keys(turn=turn.replace("-", "").upper(), thread="t"), "second")
    )
    c = asyncio.create_task(second(StartLocks.keys(thread="t"), "third"))
    await _let_others_run()
    assert locks.held() == 2 and order == []  # both queued: turn key and thread key in use
    released.set()
    await asyncio.gather(a, b, c)
    assert order[0] == "first" and sorted(order[1:]) == ["second", "third"]
    assert locks.held() == 0


async def test_keys_in_opposite_orders_never_deadlock() -> None:
    locks = StartLocks()

    async def start(turn: str, thread: str) -> None:
        async with locks.hold(StartLocks.keys(turn=turn, thread=thread)):
            await asyncio.sleep(0)

    # every pair shares a key with others, named in both orders
    await asyncio.wait_for(
        asyncio.gather(*(start(f"k{i % 3}", f"k{(i + 1) % 3}") for i in range(30))), timeout=30
    )
    assert locks.held() == 0


async def test_a_cancelled_waiter_gives_its_keys_back() -> None:
    locks = StartLocks()
    released = asyncio.Event()
    entered = asyncio.Event()

    async def holder() -> None:
        async with locks.hold(["k"]):
            entered.set()
            await released.wait()

    async def waiter() -> None:
        async with locks.hold(["k", "j"]):
            pass

    held = asyncio.create_task(holder())
    await entered.wait()
    waiting = asyncio.create_task(waiter())
    await _let_others_run()
    assert locks.held() == 2  # "k" held, "j" taken by the waiter while it waits for "k"
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    async with locks.hold(["j"]):  # the waiter held "j" while it waited for "k": released
        pass
    released.set()
    await held
    assert locks.held() == 0


async def test_sqlite_files_commit_without_waiting_for_the_disk(tmp_path: Path) -> None:
    """WAL + synchronous=NORMAL on every SQLite file a running turn writes: durable across
    a crash of the process (README, "Durability"); a commit does not wait for an fsync."""
    settings = RelaySettings.from_env({"RELAY_DATA_DIR": str(tmp_path)})
    async with open_checkpointer(settings, {}) as saver:
        mode = await (await saver.conn.execute("PRAGMA journal_mode")).fetchone()
        sync = await (await saver.conn.execute("PRAGMA synchronous")).fetchone()
        assert (mode[0], sync[0]) == ("wal", NORMAL)
    turns = SQLiteTurnStore(tmp_path / "turns.db")
    messages = SQLiteMessageStore(tmp_path / "messages.db")
    try:
        for db in (turns._db, messages._db):
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("PRAGMA synchronous").fetchone()[0] == NORMAL
    finally:
        turns.close()
        messages.close()
    with sqlite3.connect(tmp_path / "checkpoints.db") as db:  # WAL is the file's own
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
