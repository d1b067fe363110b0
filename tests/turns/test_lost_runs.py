"""A run whose turn another instance took over (relay/turns/run_leases.py), on the real
PostgreSQL: found by a renewal, it is cancelled and ends without a terminal event or a
record of its own; one that finishes past its lease asks first, and says nothing either.
The claim is made by a second store (another instance's) once the run's lease ran out:
the run here is held on an event meanwhile, so nothing renews it."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from relay.bus import MemoryBus
from relay.turns.leases import Leases
from relay.turns.postgres import PostgresTurnStore
from relay.turns.records import RUNNING, TurnRecord
from relay.turns.response import ChatResponse
from relay.turns.runs import RunManager

LEASE_S = 0.3


@pytest.fixture
def stores(postgres_url: str) -> Any:
    owner = PostgresTurnStore(postgres_url, instance_id="owner")
    claimer = PostgresTurnStore(postgres_url, instance_id="claimer")
    yield owner, claimer
    owner.close()
    claimer.close()


async def claimed_elsewhere(claimer: Any, turn_id: str) -> TurnRecord:
    """Claim the turn from the other instance once its lease has run out."""
    for _ in range(600):
        now = time.time() * 1000
        for record in await claimer.claim_expired(now, now + 60_000, [], False):
            if record.turn_id == turn_id:
                return record
        await asyncio.sleep(0.05)
    raise AssertionError("the run's lease never ran out")


async def start(owner: Any, bus: MemoryBus, go: asyncio.Event) -> tuple[RunManager, TurnRecord]:
    runs = RunManager(bus, owner, lambda: None, disconnect_grace_s=1.0, lease_s=LEASE_S)
    record = TurnRecord(str(uuid.uuid4()), str(uuid.uuid4()), RUNNING, started_at=time.time())

    async def run() -> ChatResponse:
        await go.wait()
        return ChatResponse(record.thread_id, record.turn_id, "", "answered", answer="late")

    await runs.start(record, "chat", run, create=True)
    return runs, record


async def test_a_renewal_that_finds_the_turn_taken_cancels_the_run_quietly(stores) -> None:
    owner, claimer = stores
    bus = MemoryBus()
    runs, record = await start(owner, bus, asyncio.Event())
    claim = await claimed_elsewhere(claimer, record.turn_id)

    await Leases(owner, runs, bus, lease_s=LEASE_S, shared=True).renew()
    assert await asyncio.wait_for(runs.wait(record.turn_id), 30) is None
    assert not runs.running(record.turn_id)
    assert bus.last_seq(record.turn_id) == 0  # no terminal event of its own
    after = await owner.get(record.turn_id)
    assert (after.status, after.attempt, after.lease_until) == (RUNNING, 2, claim.lease_until)


async def test_a_run_that_ends_past_its_lease_asks_before_it_ends_the_turn(stores) -> None:
    owner, claimer = stores
    bus = MemoryBus()
    go = asyncio.Event()
    runs, record = await start(owner, bus, go)
    await claimed_elsewhere(claimer, record.turn_id)

    go.set()  # the run answers, but the turn is the claimer's now
    await asyncio.wait_for(runs.wait(record.turn_id), 30)
    assert bus.last_seq(record.turn_id) == 0  # neither its terminal event
    after = await owner.get(record.turn_id)
    assert (after.status, after.response, after.attempt) == (RUNNING, None, 2)  # nor its record
