"""Each turn store runs its calls on worker threads of its own: a store whose database
hangs (every thread waiting) holds up none of another store's calls, as with two relays in
one process; closing a store lets go of its threads without waiting for a stuck call."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from relay.turns.records import TURN_THREADS, TurnRecord
from relay.turns.sqlite import SQLiteTurnStore


def _record(turn_id: str) -> TurnRecord:
    return TurnRecord(turn_id=turn_id, thread_id="th", status="running", started_at=1.0)


async def test_a_stuck_store_holds_up_no_other_store(tmp_path: Path) -> None:
    stuck = SQLiteTurnStore(tmp_path / "a.db")
    free = SQLiteTurnStore(tmp_path / "b.db")
    release = threading.Event()
    entered = threading.Semaphore(0)

    def hang(turn_id: str) -> Any:  # the database that is away: every call waits
        entered.release()
        release.wait(30)
        return None

    stuck._get = hang  # type: ignore[method-assign]
    waiting = [asyncio.ensure_future(stuck.get(f"t{i}")) for i in range(TURN_THREADS + 2)]
    for _ in range(TURN_THREADS):  # every thread of the stuck store is taken
        await asyncio.to_thread(entered.acquire)
    await free.create(_record("x"))
    got = await free.get("x")
    assert got is not None and got.turn_id == "x"
    assert not any(w.done() for w in waiting)
    release.set()
    assert await asyncio.gather(*waiting) == [None] * (TURN_THREADS + 2)
    stuck.close()
    free.close()
