"""Reconnecting with Last-Event-ID: no gap, no duplicate, wherever the cut falls."""

from __future__ import annotations

import os
import socket
import time

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SSE_HEADERS, LiveServer, events_of, iter_frames

REFUNDS = "How do refunds work?"
EXAMPLES = int(os.environ.get("SPAN_RELAY_PROPERTY_EXAMPLES", "200"))


def test_reconnect_at_any_point_yields_exactly_the_rest(server: LiveServer) -> None:
    """For a disconnect after k events, Last-Event-ID: k gives exactly events k+1..n,
    whether the turn is still running when the client comes back or not."""
    client = httpx.Client(timeout=30)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        k=st.integers(min_value=1, max_value=9),
        delay=st.sampled_from([0, 0.02]),
        pause=st.sampled_from([0, 0.01]),
    )
    def reconnect(k: int, delay: float, pause: float) -> None:
        fault = {"X-Relay-Fault": f"retrieve_context=delay:{delay}"} if delay else {}
        with client.stream(
            "POST",
            f"{server.url}/chat?on_disconnect=continue",
            json={"message": REFUNDS},
            headers={**SSE_HEADERS, **fault},
        ) as r:
            frames = iter_frames(r)
            seen = []
            for frame in frames:
                if frame.event:
                    seen.append(frame.json)
                if len(seen) == k:
                    break
        time.sleep(pause)  # the turn runs on while the client is away
        turn_id = seen[0]["turn_id"]
        with client.stream(
            "GET",
            f"{server.url}/turns/{turn_id}/events",
            headers={"Last-Event-ID": str(seen[-1]["seq"])},
        ) as r:
            rest = events_of(list(iter_frames(r)))
        with client.stream("GET", f"{server.url}/turns/{turn_id}/events") as r:
            whole = events_of(list(iter_frames(r)))
        assert [e["seq"] for e in seen] == list(range(1, k + 1))
        assert seen + rest == whole, (k, [e["seq"] for e in rest])
        assert whole[-1]["type"] == "turn_completed"

    try:
        reconnect()
    finally:
        client.close()


def test_reader_that_never_reads_is_cut(make_server) -> None:
    """A client that stops reading costs bounded memory and is cut after the send timeout;
    the turn's log is untouched, so the client can come back with Last-Event-ID."""
    import tracemalloc

    from relay.events import Event

    server = make_server(RELAY_SEND_TIMEOUT_S="1", RELAY_DISCONNECT_GRACE_S="30")
    paused = httpx.post(
        f"{server.url}/chat", timeout=30, json={"message": "Please refund order 1234 ($20)."}
    ).json()
    turn_id = paused["turn_id"]
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(
        f"GET /turns/{turn_id}/events HTTP/1.1\r\nHost: x\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    readers = lambda: server.call(lambda: server.relay.bus.reader_count(turn_id))  # noqa: E731
    deadline = time.monotonic() + 30
    while not readers() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert readers() == 1
    # a fast emitter: 3,000 events of 8 KiB (24 MiB) into the turn's log, never read
    blob = "x" * 8192

    def emit() -> None:
        tracemalloc.start()
        for i in range(3000):
            server.relay.bus.publish(
                Event("note", paused["thread_id"], turn_id, "0" * 32, 0.0, {"i": i, "blob": blob})
            )

    server.call(emit)
    started = time.monotonic()
    deadline = started + 60  # only turns "never cut" into a failure, not a timing
    peaks = []
    while readers() and time.monotonic() < deadline:
        peaks.append(server.call(lambda: tracemalloc.get_traced_memory()[1]))
        time.sleep(0.1)
    cut_after = time.monotonic() - started
    server.call(tracemalloc.stop)
    sock.close()
    assert readers() == 0, "the stuck reader was never cut"
    print(
        f"stuck reader: cut after {cut_after:.2f} s (send timeout 1 s); peak traced "
        f"{max(peaks) / 2**20:.1f} MiB with a {3000 * 8192 / 2**20:.1f} MiB log"
    )
    # what the server allocated beyond the log itself stays within a few batches
    log_bytes = 3000 * (8192 + 200)
    assert max(peaks) < log_bytes + 8 * 64 * 8400, max(peaks)
    # the turn is fine, and a reader that comes back resumes from its cursor
    assert httpx.get(f"{server.url}/turns/{turn_id}").json()["status"] == "paused"
    with (
        httpx.Client(timeout=10) as c,
        c.stream(
            "GET",
            f"{server.url}/turns/{turn_id}/events",
            headers={"Last-Event-ID": str(paused_seq(server, turn_id) + 2990)},
        ) as r,
    ):
        frames = iter_frames(r)
        got = [next(f for f in frames if f.event).json["i"] for _ in range(1)]
    assert got == [2990]


def paused_seq(server: LiveServer, turn_id: str) -> int:
    def find() -> int:
        reader = server.relay.bus.reader(turn_id, 0)
        try:
            return next(e.seq for e in reader.take(10_000) if e.type == "paused")
        finally:
            reader.close()

    return server.call(find)
