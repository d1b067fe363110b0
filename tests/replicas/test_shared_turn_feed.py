"""The live list of turns (``GET /turns`` as SSE) is the same on every replica (issue 32).

Two replicas share Redis (the bus) and PostgreSQL (the turn records). A watcher of
replica A's turn feed sees a turn that replica B runs begin and end, as it sees A's own;
before, each replica's feed carried only the turns that replica wrote. Both replicas run
in this process with the real Redis and PostgreSQL: what carries B's changes to A is the
``relay:turns:{db}`` channel and the shared records, as between two machines."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from tests.conftest import iter_frames
from tests.interop.conftest import wait_until

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite


def test_a_replicas_feed_shows_the_turns_another_replica_runs(
    make_instance, redis_url: str, postgres_url: str
) -> None:
    shared = {"RELAY_BUS": redis_url, "RELAY_STORE": postgres_url}
    a, b = make_instance("a", **shared), make_instance("b", **shared)
    frames: list[tuple[str, Any]] = []
    answered: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        with httpx.stream(
            "GET", f"{a.url}/turns", headers={"Accept": "text/event-stream"}, timeout=60
        ) as response:
            for frame in iter_frames(response):
                if frame.event:
                    frames.append((frame.event, json.loads(frame.data)))
                    if frame.event == "turn" and frames[-1][1]["status"] == "answered":
                        answered.add(frames[-1][1]["turn_id"])
                        if len(answered) == 2:
                            break
        done.set()

    threading.Thread(target=watch, daemon=True).start()
    wait_until(lambda: frames, what="the feed's first frame")
    assert frames[0] == ("turns", {"turns": []})
    # both replicas' listeners are subscribed before B's turn changes anything
    for replica in (a, b):
        turn_changes = replica.relay.turn_changes
        assert turn_changes is not None
        wait_until(turn_changes.listening.is_set, what="the turn-change listener")
    with httpx.Client(timeout=60) as client:
        on_b = client.post(f"{b.url}/chat", json={"message": "How do refunds work?"}).json()
        on_a = client.post(f"{a.url}/chat", json={"message": "And shipping?"}).json()
    assert done.wait(60), frames
    changes: dict[str, list[str]] = {}
    for event, data in frames[1:]:
        assert event == "turn"
        changes.setdefault(data["turn_id"], []).append(data["status"])
    for turn in (on_b, on_a):
        assert turn["status"] == "answered"
        statuses = changes[turn["turn_id"]]
        assert statuses[0] == "running" and statuses[-1] == "answered", changes
    # the record A's watcher got for B's turn is the shared one: B ran it
    last_of_b = [d for e, d in frames if e == "turn" and d["turn_id"] == on_b["turn_id"]][-1]
    assert last_of_b["thread_id"] == on_b["thread_id"]
    assert last_of_b["message"] == "How do refunds work?"
