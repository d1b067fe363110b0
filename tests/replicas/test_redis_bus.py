"""relay.bus.redis.RedisBus against the real Redis: what its writer leaves in Redis Streams
(entry ids, one TTL per stream), and a reader on another instance that reads it back."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from relay.bus.base import CursorExpired
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
    redis_url: str, prefix: str
) -> None:
    bus = RedisBus(redis_url, prefix=prefix, retention_s=120)
    other = RedisBus(redis_url, prefix=prefix, retention_s=120)
    await bus.start()
    await other.start()
    client = aioredis.from_url(redis_url)
    try:
        live = uuid.uuid4().hex
        done = uuid.uuid4().hex
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


async def test_a_burst_larger_than_any_queue_reaches_redis_whole(
    redis_url: str, prefix: str
) -> None:
    """Published without a pause (no loop iteration for the writer): the writer copies
    from the local logs afterwards, so nothing is dropped whatever the burst."""
    bus = RedisBus(redis_url, prefix=prefix, retention_s=60)
    await bus.start()
    client = aioredis.from_url(redis_url)
    try:
        turns = [uuid.uuid4().hex for _ in range(3)]
        for turn in turns:
            bus.open_turn(turn)
        for _ in range(6_000):
            for turn in turns:
                bus.publish(event(turn))
        assert bus.unwritten() == 18_000
        await written(bus, 18_000)
        for turn in turns:
            assert await client.xlen(bus.key(turn)) == 6_000
        assert bus.lost == 0 and bus.unwritten() == 0
    finally:
        await client.aclose()
        await bus.stop()


async def test_events_published_while_redis_is_down_are_written_when_it_is_back(
    private_redis,
) -> None:
    bus = RedisBus(private_redis.url, retention_s=60)
    await bus.start()
    try:
        turn = uuid.uuid4().hex
        bus.open_turn(turn)
        bus.publish(event(turn))
        await written(bus, 1)
        private_redis.kill()
        for _ in range(9):
            bus.publish(event(turn))
        bus.publish(event(turn, TURN_COMPLETED))
        await asyncio.sleep(0.3)
        assert bus.unavailable() is not None and bus.unwritten() == 10
        private_redis.start()  # empty: the first event went down with it
        # the bus finds Redis without its data and writes its local log again: the
        # first event too, no gap for the readers elsewhere
        await written(bus, 12)
        client = aioredis.from_url(private_redis.url)
        ids = [entry_id for entry_id, _ in await client.xrange(bus.key(turn))]
        await client.aclose()
        assert ids == [f"{seq}-0".encode() for seq in range(1, 12)]
        assert bus.losses == 1 and bus.lost == 0
        assert bus.lost == 0 and bus.unwritten() == 0
    finally:
        await bus.stop()


async def test_events_trimmed_before_redis_had_them_are_a_counted_gap(private_redis) -> None:
    bus = RedisBus(private_redis.url, max_events_per_turn=5, retention_s=60)
    other = RedisBus(private_redis.url, max_events_per_turn=5, retention_s=60)
    await bus.start()
    turn = uuid.uuid4().hex
    try:
        private_redis.kill()
        await asyncio.sleep(0.1)
        bus.open_turn(turn)
        for _ in range(7):
            bus.publish(event(turn))
        bus.publish(event(turn, TURN_COMPLETED))  # seq 8; the local log keeps 4..8
        private_redis.start()
        await written(bus, 5)
        assert bus.lost == 3
        await other.start()
        reader = other.reader(turn, 0)
        assert await reader.wait(2.0)
        with pytest.raises(CursorExpired):  # seq 1..3 never reached Redis: said, not hidden
            reader.take()
        reader.close()
    finally:
        await bus.stop()
        await other.stop()


def test_the_writer_backlog_and_losses_are_metrics(make_instance, redis_url: str) -> None:
    server = make_instance("a", RELAY_BUS=redis_url, RELAY_METRICS="prometheus")

    def scrape(client: httpx.Client) -> dict[str, float]:
        text = client.get(f"{server.url}/metrics").text
        return {
            line.split("{")[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("relay_bus_") and not line.startswith("relay_bus_lag")
        }

    with httpx.Client(timeout=30) as client:
        answer = client.post(f"{server.url}/chat", json={"message": "How do refunds work?"})
        assert answer.status_code == 200
        assert set(scrape(client)) == {"relay_bus_unwritten", "relay_bus_lost_total"}
        deadline = time.monotonic() + 10
        while (values := scrape(client))["relay_bus_unwritten"] > 0:  # the writer drains
            assert time.monotonic() < deadline, values
            time.sleep(0.05)
    assert values == {"relay_bus_unwritten": 0.0, "relay_bus_lost_total": 0.0}


def test_a_batch_in_flight_when_another_instance_takes_the_turn() -> None:
    """While a batch is being written, a resume elsewhere replaces the turn's log here
    (``open_turn`` with a higher seq): the old events are counted lost once, the batch's
    completion does not count them again, and the new log's events are still written."""
    bus = RedisBus("redis://127.0.0.1:1/0")  # never started: only the bookkeeping runs
    turn = uuid.uuid4().hex
    bus.open_turn(turn)
    for _ in range(3):
        bus.publish(event(turn))
    in_flight = bus._next_batch()
    assert [e.seq for e in in_flight] == [1, 2, 3]
    bus.open_turn(turn, last_seq=10)  # another instance ran seq 4..10
    assert bus.lost == 3 and bus.unwritten() == 0
    bus.publish(event(turn))
    bus._mark_written(in_flight)
    assert bus.lost == 3 and bus.unwritten() == 1
    assert [e.seq for e in bus._next_batch()] == [11]


async def test_a_cancel_as_the_health_ping_completes_is_not_swallowed() -> None:
    """The monitor's ping under a timeout: a cancel that lands in the same loop iteration
    as the ping's reply still cancels (Python 3.11's ``asyncio.wait_for`` would return the
    reply instead, and the monitor would outlive ``stop()``)."""
    loop = asyncio.get_running_loop()

    class Client:
        def __init__(self) -> None:
            self.reply: asyncio.Future[bool] = loop.create_future()
            self.pinged = asyncio.Event()

        async def ping(self) -> bool:
            self.pinged.set()
            return await self.reply

    bus = RedisBus("redis://127.0.0.1:1/0")
    client = Client()
    bus.client = client  # type: ignore[assignment]
    check = asyncio.create_task(bus._check())
    await client.pinged.wait()
    client.reply.set_result(True)
    check.cancel()
    with pytest.raises(asyncio.CancelledError):
        await check


def test_a_turn_whose_log_began_again_is_written_from_its_new_seqs() -> None:
    """A publish to a turn whose local log had expired starts a new log at seq 1: the
    writer follows the new log (and never spins on the old mark)."""
    bus = RedisBus("redis://127.0.0.1:1/0")  # never started: only the bookkeeping runs
    turn = uuid.uuid4().hex
    bus.open_turn(turn)
    for _ in range(3):
        bus.publish(event(turn))
    bus._mark_written(bus._next_batch())
    bus.publish(event(turn))  # seq 4, not written yet
    del bus._logs[turn]  # the log expired
    bus.publish(event(turn))  # a new log: seq 1 again
    assert bus.lost == 1 and bus.unwritten() == 1
    assert [e.seq for e in bus._next_batch()] == [1]
    bus._written[turn] = 5  # a mark past its log (the state the old writer spun on)
    assert bus._next_batch() == []
    assert turn not in bus._unwritten  # dropped, so the writer waits instead of spinning


async def test_cancel_requests_stay_in_their_redis_database(redis_url: str) -> None:
    """Redis's channels are the whole server's, not a database's: deployments (and test
    workers) on different databases of one Redis each have a cancel channel of their own,
    so neither hears, nor counts as a listener of, the other's requests. Messages reach a
    subscriber in the order they were published: b hears its own request after a's was
    published, so a's would have reached b first had b listened on a's channel."""
    from relay.bus.redis_cancels import CancelChannel

    base, _, db = redis_url.rpartition("/")
    other_url = f"{base}/{(int(db or 0) + 8) % 16}"
    heard: dict[str, list[str]] = {"a": [], "b": []}
    arrived = {"a": asyncio.Event(), "b": asyncio.Event()}
    mine = {"a": f"turn-a-{uuid.uuid4().hex}", "b": f"turn-b-{uuid.uuid4().hex}"}

    def listener(name: str) -> Any:
        def on_cancel(turn_id: str) -> None:
            heard[name].append(turn_id)
            if turn_id == mine[name]:
                arrived[name].set()

        return on_cancel

    a = CancelChannel(redis_url, listener("a"))
    b = CancelChannel(other_url, listener("b"))
    assert a.channel != b.channel
    await a.start()
    await b.start()
    try:
        async with asyncio.timeout(30):  # a bound on a failure (a request never heard)
            await a.listening.wait()
            await b.listening.wait()
            assert await a.request(mine["a"]) >= 1
            await arrived["a"].wait()
            assert await b.request(mine["b"]) >= 1
            await arrived["b"].wait()
        assert mine["a"] not in heard["b"] and mine["b"] not in heard["a"]
    finally:
        await a.stop()
        await b.stop()
