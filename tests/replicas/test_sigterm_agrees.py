"""A replica that stops while it runs a turn: the stream and the record say the same.

Two replicas share Redis (the bus) and PostgreSQL (the records). A turn runs on A, held in
its model call (a fault of the demo: generate waits far longer than the test); a reader
follows it on B. A stops (its lifespan's shutdown: the grace, then the run is cut). The
reader on B gets exactly one terminal event, ``error`` ``interrupted`` with the words the
record's end has, and ``GET /turns/{id}`` says ``interrupted``: before, the stream said
``cancelled`` (nobody asked for a cancel) while the record said ``interrupted``."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from relay.events import INTERRUPTED_MESSAGE
from tests.conftest import SSE_HEADERS, events_of, iter_frames
from tests.interop.conftest import wait_until

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite


def test_a_stopped_replicas_turn_ends_interrupted_on_its_stream_and_record(
    make_instance, redis_url: str, postgres_url: str
) -> None:
    shared = {"RELAY_BUS": redis_url, "RELAY_STORE": postgres_url}
    a = make_instance("a", RELAY_SHUTDOWN_GRACE_S="0.2", **shared)
    b = make_instance("b", **shared)
    with httpx.Client(timeout=30) as client:
        started = client.post(
            f"{a.url}/chat",
            json={"message": "How do refunds work?"},
            headers={"Prefer": "respond-async", "X-Relay-Fault": "generate=delay:600"},
        )
        assert started.status_code == 202, started.text
        turn_id = started.json()["turn_id"]
        frames: list[Any] = []
        in_generate = threading.Event()
        done = threading.Event()

        def read() -> None:
            with client.stream(
                "GET", f"{b.url}/turns/{turn_id}/events", headers=SSE_HEADERS
            ) as response:
                for frame in iter_frames(response):
                    frames.append(frame)
                    if frame.event == "node_started" and frame.json["node"] == "generate":
                        in_generate.set()
                    if frame.event in ("error", "turn_completed", "paused"):
                        break
            done.set()

        threading.Thread(target=read, daemon=True).start()
        assert in_generate.wait(30), [f.raw for f in frames]
        a.stop()  # A's lifespan ends: the grace, then its run is cut
        assert done.wait(30), [f.raw for f in frames]
        events = events_of(frames)
        terminal = [e for e in events if e["type"] in ("error", "turn_completed", "paused")]
        assert len(terminal) == 1, events
        end = terminal[0]
        assert (end["type"], end["code"], end["retryable"]) == ("error", "interrupted", True)
        assert end["message"] == INTERRUPTED_MESSAGE
        record = wait_until(
            lambda: (
                (r := client.get(f"{b.url}/turns/{turn_id}").json())["status"] != "running" and r
            ),
            what="the record's end",
        )
        assert record["status"] == "interrupted"
