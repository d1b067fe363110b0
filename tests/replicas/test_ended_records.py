"""A reader of a turn whose record is ended while the shared log holds no end (a process
that died before leases, a record ended at a start without the bus): it gets the
record's terminal event, never a wait on a log nothing will ever write again
(relay/http/turn_logs.py, ``ended_off_the_bus``)."""

from __future__ import annotations

import time
import uuid

import httpx
import redis

from relay import events as ev
from relay.events import Event
from relay.turns.postgres import PostgresTurnStore
from relay.turns.records import TurnRecord
from tests.interop.conftest import TurnReader


def test_a_reader_of_an_ended_record_gets_its_end_not_a_hang(
    make_instance, redis_url: str, postgres_url: str
) -> None:
    b = make_instance("b", RELAY_BUS=redis_url, RELAY_STORE=postgres_url)
    turn_id, thread_id = str(uuid.uuid4()), str(uuid.uuid4())
    now = time.time() * 1000
    # the shared log of a run that died after two events (no terminal event in it)
    log = redis.Redis.from_url(redis_url)
    for seq, node in ((1, "first"), (2, "second")):
        event = Event(ev.NODE_STARTED, thread_id, turn_id, "0" * 32, now, {"node": node})
        log.xadd(
            f"relay:turn:{turn_id}", {"seq": seq, "e": event.with_seq(seq).to_json()}, id=f"{seq}-0"
        )
    # its record, ended interrupted by a start that had no bus to write to
    store = PostgresTurnStore(postgres_url, instance_id="gone")
    try:
        store._create(
            TurnRecord(
                turn_id,
                thread_id,
                "interrupted",
                started_at=now,
                ended_at=now,
                last_seq=0,
                graph="support_agent",
            )
        )
    finally:
        store.close()

    events = TurnReader(b.url, turn_id, timeout=60).start().join(60)
    assert events[-1]["type"] == "error" and events[-1]["code"] == "interrupted", events
    assert events[-1]["seq"] == 3  # after what the log holds: no seq used twice
    # a reconnect past some events gets the same end; one at it is told to stop (204)
    again = TurnReader(b.url, turn_id, headers={"Last-Event-ID": "1"}, timeout=60).start()
    assert again.join(60)[-1] == events[-1]
    done = httpx.get(f"{b.url}/turns/{turn_id}/events", headers={"Last-Event-ID": "3"}, timeout=30)
    assert done.status_code == 204
    assert httpx.get(f"{b.url}/turns/{turn_id}", timeout=30).json()["status"] == "interrupted"
