"""What a claimer does with a turn whose owner is gone (relay/turns/leases.py), on the real
Redis bus and the real PostgreSQL: one ``error interrupted`` at the turn's next seq, the
same event the record gives later; no event of its own when the shared log already ends
the run (the record then says what that end says); and a ``recover`` hook that takes the
turn up is left to it."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from relay import events as ev
from relay.bus.redis import RedisBus
from relay.events import Event
from relay.turns.leases import Leases
from relay.turns.postgres import PostgresTurnStore
from relay.turns.records import RUNNING, TurnRecord
from relay.turns.recovery import terminal_event
from relay.turns.runs import RunManager


@pytest.fixture
async def parts(redis_url: str, postgres_url: str) -> AsyncIterator[tuple[Any, RedisBus]]:
    bus = RedisBus(redis_url)
    await bus.start()
    store = PostgresTurnStore(postgres_url, instance_id="claimer")
    yield store, bus
    await bus.stop()
    store.close()


@pytest.fixture
def redis_url() -> str:
    from tests.conftest import redis_test_url

    return redis_test_url()


def leases(store: Any, bus: RedisBus, **kwargs: Any) -> Leases:
    runs = RunManager(bus, store, lambda: None, disconnect_grace_s=1.0, lease_s=2.0)
    return Leases(store, runs, bus, lease_s=2.0, shared=True, **kwargs)


async def dead_turn(store: Any, redis_url: str, events: list[tuple[str, dict]]) -> TurnRecord:
    """A turn another instance ran (its events in the shared log), its lease run out."""
    now = time.time() * 1000
    record = TurnRecord(
        str(uuid.uuid4()), str(uuid.uuid4()), RUNNING, started_at=now, lease_until=now - 1
    )
    await store.create(record)
    log = redis.Redis.from_url(redis_url)
    for seq, (type_, fields) in enumerate(events, start=1):
        event = Event(type_, record.thread_id, record.turn_id, "0" * 32, now, fields)
        entry = {"seq": seq, "e": event.with_seq(seq).to_json()}
        log.xadd(f"relay:turn:{record.turn_id}", entry, id=f"{seq}-0")  # as the writer does
    return record


def shared_log(redis_url: str, turn_id: str) -> list[dict]:
    import json

    entries = redis.Redis.from_url(redis_url).xrange(f"relay:turn:{turn_id}")
    return [json.loads(fields[b"e"]) for _, fields in entries]


async def wait_written(bus: RedisBus) -> None:
    import asyncio

    for _ in range(500):
        if not bus.backlog:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the claimer's event never reached Redis")


async def test_the_claimer_ends_the_turn_once_at_its_next_seq(parts, redis_url: str) -> None:
    store, bus = parts
    ended: list[str] = []
    record = await dead_turn(store, redis_url, [(ev.NODE_STARTED, {"node": "a"})] * 2)
    assert await leases(store, bus, claimed=ended.append).sweep() == 1
    await wait_written(bus)

    log = shared_log(redis_url, record.turn_id)
    assert [(e["seq"], e["type"]) for e in log] == [
        (1, "node_started"),
        (2, "node_started"),
        (3, "error"),
    ]
    assert log[-1]["code"] == "interrupted"
    after = await store.get(record.turn_id)
    assert (after.status, after.last_seq, after.attempt, after.lease_until) == (
        "interrupted",
        3,
        2,
        0.0,
    )
    # a reader that comes once the log is gone gets the very same event from the record
    assert terminal_event(after, 0).to_dict() == log[-1]
    assert ended == ["ended"]
    assert await leases(store, bus).sweep() == 0  # ended: nothing left to claim


async def test_an_end_already_in_the_log_is_recorded_not_repeated(parts, redis_url: str) -> None:
    store, bus = parts
    response = {"status": "answered", "answer": "done", "turn_id": "x"}
    record = await dead_turn(
        store,
        redis_url,
        [(ev.NODE_STARTED, {"node": "a"}), (ev.TURN_COMPLETED, {"response": response})],
    )
    assert await leases(store, bus).sweep() == 1
    assert [e["type"] for e in shared_log(redis_url, record.turn_id)] == [
        "node_started",
        "turn_completed",
    ]
    after = await store.get(record.turn_id)
    assert (after.status, after.last_seq) == ("answered", 2)


async def test_a_recover_hook_that_takes_the_turn_up_is_left_to_it(parts, redis_url: str) -> None:
    store, bus = parts
    seen: list[TurnRecord] = []

    async def recover(claimed: TurnRecord) -> bool:
        seen.append(claimed)
        return True

    record = await dead_turn(store, redis_url, [(ev.NODE_STARTED, {"node": "a"})])
    assert await leases(store, bus, recover=recover).sweep() == 1
    assert [(r.turn_id, r.attempt) for r in seen] == [(record.turn_id, 2)]
    after = await store.get(record.turn_id)
    assert after.status == RUNNING and after.attempt == 2  # the hook's, under the lease
    assert len(shared_log(redis_url, record.turn_id)) == 1
