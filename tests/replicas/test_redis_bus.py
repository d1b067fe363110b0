"""relay.bus.redis.RedisBus against the real Redis: what its writer leaves in Redis Streams
(entry ids, one TTL per stream), and a reader on another instance that reads it back."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from relay.bus.redis import LIVE_TTL_S, RedisBus
from relay.events import NODE_STARTED, TURN_COMPLETED, Event


@pytest.fixture
async def prefix(redis_url: str) -> AsyncIterator[str]:
    prefix = f"relay-test:{uuid.uuid4().hex[:8]}:"
    yield prefix
    client = aioredis.from_url(redis_url)
    keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def written(bus: RedisBus, count: int) -> None:
    for _ in range(500):
        if bus.written >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the writer wrote {bus.written} of {count} events")


def event(turn: str, kind: str = NODE_STARTED) -> Event:
    return Event(kind, "th", turn, "0" * 32, 1.0, {"node": "n"})


async def test_one_batch_of_many_turns_keeps_ids_and_one_ttl_per_stream(
        redis_url: str, prefix: str) -> None:
    bus = RedisBus(redis_url, prefix=prefix, retention_s=120)
    other = RedisBus(redis_url, prefix=prefix, retention_s=120)
    await bus.start()
    await other.start()
    client = aioredis.from_url(redis_url)
    try:
        live, done = uuid.uuid4().hex, uuid.uuid4().hex
        bus.open_turn(live)
        bus.open_turn(done)
        for _ in range(3):  # one loop iteration: the writer sees them as one batch
            bus.publish(event(live))
            bus.publish(event(done))
        bus.publish(event(done, TURN_COMPLETED))
        await written(bus, 7)
        ids = [entry_id for entry_id, _ in await client.xrange(bus.key(done))]
        assert ids == [b"1-0", b"2-0", b"3-0", b"4-0"]
        assert 0 < await client.ttl(bus.key(done)) <= 120  # finished: retention
        assert 120 < await client.ttl(bus.key(live)) <= LIVE_TTL_S  # still running
        reader = other.reader(done, 1)  # another instance: from Redis
        got: list[Event] = []
        while not got or not got[-1].is_turn_terminal:
            assert await reader.wait(2.0)
            got += reader.take()
        reader.close()
        assert [e.seq for e in got] == [2, 3, 4] and got[-1].type == TURN_COMPLETED
        assert bus.lost == 0
    finally:
        await client.aclose()
        await bus.stop()
        await other.stop()


async def test_a_retried_batch_is_idempotent(redis_url: str, prefix: str) -> None:
    bus = RedisBus(redis_url, prefix=prefix, retention_s=60)
    await bus.start()
    client = aioredis.from_url(redis_url)
    try:
        turn = uuid.uuid4().hex
        bus.open_turn(turn)
        batch = [bus.publish(event(turn)), bus.publish(event(turn, TURN_COMPLETED))]
        await written(bus, 2)
        await bus._write(batch)  # the same entries again, as after a lost reply
        assert await client.xlen(bus.key(turn)) == 2
        assert bus.lost == 0
    finally:
        await client.aclose()
        await bus.stop()
