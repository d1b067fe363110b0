"""A replica that stops while it runs a turn hands it over: the stream and the record say
the same, and the turn goes on on the other replica.

Two replicas share Redis (the bus) and PostgreSQL (the records). A turn runs on A, held in
its model call (a fault of the demo: generate waits far longer than the test); a reader
follows it on B. A stops (its lifespan's shutdown: the run is asked to drain, the grace
runs out, and the run is cut mid-step and handed over). B takes the turn up at once from
its last checkpoint (no tool was running in the cut step: safe), without the fault (it
was the request's, which died with A): the reader on B gets ``turn_recovered`` and
exactly one terminal event, ``turn_completed``, and ``GET /turns/{id}`` says
``answered``. Before leases, the stream said ``cancelled`` while the record said
``interrupted``; before the handover, both said ``interrupted`` and the work was lost."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from tests.conftest import SSE_HEADERS, events_of, iter_frames

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite


def test_a_stopped_replicas_turn_is_handed_over_and_its_stream_and_record_agree(
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
        a.stop()  # A's lifespan ends: the grace, then its run is cut and handed over
        assert done.wait(120), [f.raw for f in frames]
        events = events_of(frames)
        terminal = [e for e in events if e["type"] in ("error", "turn_completed", "paused")]
        assert [e["type"] for e in terminal] == ["turn_completed"], events
        recovered = next(e for e in events if e["type"] == "turn_recovered")
        assert (recovered["attempt"], recovered["reason"]) == (1, "handed_over")
        record = client.get(f"{b.url}/turns/{turn_id}").json()
        assert (record["status"], record["attempt"]) == ("answered", 2)
