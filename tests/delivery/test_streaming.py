"""relay.delivery.streaming.EventStream driven as a raw ASGI app with hand-written receive/send."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from relay.bus import MemoryBus
from relay.delivery.streaming import EventStream, NDJSONEncoder, SSEEncoder
from relay.events import RUN_TERMINAL, TURN_TERMINAL, Event

TRACE = "ab" * 16


def ev(type_: str, **fields: Any) -> Event:
    return Event(type_, "th", "t", TRACE, 1.5, fields)


class Client:
    """An ASGI peer: records what the app sends, feeds it what we put in the inbox."""

    def __init__(self, send_delay: Callable[[dict], float | None] | None = None) -> None:
        self.messages: list[dict[str, Any]] = []
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.send_delay = send_delay
        self.closed: list[bool] = []

    async def receive(self) -> dict[str, Any]:
        return await self.inbox.get()

    async def send(self, message: dict[str, Any]) -> None:
        if self.send_delay is not None:
            delay = self.send_delay(message)
            if delay is not None:
                await asyncio.sleep(delay)
        self.messages.append(message)

    def on_close(self, completed: bool) -> None:
        self.closed.append(completed)

    def disconnect(self) -> None:
        self.inbox.put_nowait({"type": "http.disconnect"})

    @property
    def body(self) -> bytes:
        return b"".join(m["body"] for m in self.messages if m["type"] == "http.response.body")

    @property
    def start(self) -> dict[str, Any]:
        assert self.messages[0]["type"] == "http.response.start"
        return self.messages[0]


def make_stream(
    bus: MemoryBus,
    client: Client,
    *,
    after: int = 0,
    ndjson: bool = False,
    stop_at=RUN_TERMINAL,
    heartbeat_s: float = 30.0,
    send_timeout_s: float = 5.0,
    **kwargs: Any,
) -> EventStream:
    encoder = NDJSONEncoder() if ndjson else SSEEncoder(2000)
    return EventStream(
        bus.reader("t", after),
        encoder,
        stop_at=stop_at,
        heartbeat_s=heartbeat_s,
        send_timeout_s=send_timeout_s,
        on_close=client.on_close,
        **kwargs,
    )


async def serve(stream: EventStream, client: Client, timeout: float = 5.0) -> None:
    await asyncio.wait_for(stream({"type": "http"}, client.receive, client.send), timeout)


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached within the timeout"
        await asyncio.sleep(0.005)


@pytest.fixture
def bus() -> MemoryBus:
    b = MemoryBus()
    b.open_turn("t")
    return b


# -- SSE framing ---------------------------------------------------------------------------


async def test_sse_exact_bytes(bus: MemoryBus) -> None:
    bus.publish(ev("graph_topology", graph_id="g", nodes=[], edges=[]))
    bus.publish(ev("node_started", node="generate", answer="Grüße\nzwei\r\n"))
    bus.publish(ev("turn_completed", response={"status": "answered"}))
    client = Client()
    await serve(make_stream(bus, client), client)
    prefix = f'"thread_id":"th","turn_id":"t","trace_id":"{TRACE}","ts":1.5'
    expected = (
        "retry: 2000\n\n"
        "id: 1\nevent: graph_topology\n"
        f'data: {{"v":1,"type":"graph_topology","seq":1,{prefix},'
        '"graph_id":"g","nodes":[],"edges":[]}\n\n'
        "id: 2\nevent: node_started\n"
        f'data: {{"v":1,"type":"node_started","seq":2,{prefix},'
        '"node":"generate","answer":"Grüße\\nzwei\\r\\n"}\n\n'
        "id: 3\nevent: turn_completed\n"
        f'data: {{"v":1,"type":"turn_completed","seq":3,{prefix},'
        '"response":{"status":"answered"}}\n\n'
    ).encode()
    assert client.body == expected
    assert not client.body.startswith(b"\xef\xbb\xbf")
    assert b"\r" not in client.body
    assert client.closed == [True]


async def test_sse_data_is_one_line_and_parses_back(bus: MemoryBus) -> None:
    bus.publish(ev("node_completed", summary={"text": "a\nb\u2028c"}, node="n"))
    bus.publish(ev("error", code="x", message="line1\nline2", node=None, retryable=True))
    client = Client()
    await serve(make_stream(bus, client), client)
    frames = client.body.decode("utf-8").split("\n\n")
    assert frames[0] == "retry: 2000" and frames[-1] == ""
    for seq, frame in enumerate(frames[1:-1], start=1):
        lines = frame.split("\n")
        assert len(lines) == 3
        assert lines[0] == f"id: {seq}"
        data = json.loads(lines[2].removeprefix("data: "))
        assert lines[1] == f"event: {data['type']}"
        assert data["seq"] == seq and data["v"] == 1


async def test_headers_and_final_message(bus: MemoryBus) -> None:
    bus.publish(ev("turn_completed"))
    client = Client()
    await serve(make_stream(bus, client, extra_headers=[(b"x-turn-id", b"t")]), client)
    start = client.start
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert headers[b"cache-control"] == b"no-cache, no-transform"
    assert headers[b"x-accel-buffering"] == b"no"
    assert headers[b"x-turn-id"] == b"t"
    assert client.messages[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert all(m["more_body"] for m in client.messages[1:-1])
    assert bus.reader_count("t") == 0  # the reader is closed


async def test_stream_from_a_cursor(bus: MemoryBus) -> None:
    for i in range(3):
        bus.publish(ev("node_started", i=i))
    bus.publish(ev("turn_completed"))
    client = Client()
    await serve(make_stream(bus, client, after=2), client)
    ids = [line for line in client.body.decode().split("\n") if line.startswith("id: ")]
    assert ids == ["id: 3", "id: 4"]


# -- NDJSON framing ------------------------------------------------------------------------


async def test_ndjson_framing(bus: MemoryBus) -> None:
    bus.publish(ev("graph_topology", graph_id="g"))
    bus.publish(ev("paused", interrupts=[{"id": "i", "value": "x\ny"}]))
    client = Client()
    await serve(make_stream(bus, client, ndjson=True), client)
    body = client.body.decode("utf-8")
    assert body.endswith("\n") and "retry" not in body
    lines = body.split("\n")[:-1]
    assert [json.loads(line)["type"] for line in lines] == ["graph_topology", "paused"]
    assert [json.loads(line)["seq"] for line in lines] == [1, 2]
    assert lines[0] == bus.reader("t").take()[0].to_json()
    assert dict(client.start["headers"])[b"content-type"] == b"application/x-ndjson; charset=utf-8"
    assert client.closed == [True]


async def test_ndjson_heartbeat_is_an_empty_line(bus: MemoryBus) -> None:
    client = Client()
    task = asyncio.ensure_future(
        serve(make_stream(bus, client, ndjson=True, heartbeat_s=0.05), client)
    )
    await until(lambda: client.body.count(b"\n") >= 2)
    bus.publish(ev("turn_completed"))
    await task
    body = client.body
    assert body.startswith(b"\n\n")
    assert body.rstrip(b"\n").lstrip(b"\n").count(b"\n") == 0  # one JSON line after the beats
    assert json.loads(body.strip())["type"] == "turn_completed"


# -- heartbeats ----------------------------------------------------------------------------


async def test_heartbeats_from_the_timer_while_idle(bus: MemoryBus) -> None:
    client = Client()
    stream = make_stream(bus, client, heartbeat_s=0.05)
    task = asyncio.ensure_future(serve(stream, client))
    await until(lambda: client.body.count(b": hb\n\n") >= 3)
    assert not task.done()
    bus.publish(ev("turn_completed"))
    await task
    body = client.body
    assert body.startswith(b"retry: 2000\n\n: hb\n\n: hb\n\n: hb\n\n")
    frame = rb"id: 1\nevent: turn_completed\ndata: [^\n]+\n\n"
    assert re.fullmatch(rb"retry: 2000\n\n(: hb\n\n){3,}" + frame, body)
    assert stream.heartbeats_sent == body.count(b": hb\n\n") >= 3
    assert stream.frames_sent == 1
    assert client.closed == [True]


async def test_heartbeats_keep_coming_while_events_flow(bus: MemoryBus) -> None:
    client = Client()
    stream = make_stream(bus, client, heartbeat_s=0.05)
    task = asyncio.ensure_future(serve(stream, client))
    deadline = time.monotonic() + 0.4
    while time.monotonic() < deadline:  # an event every 10 ms: never idle for 50 ms
        bus.publish(ev("node_started"))
        await asyncio.sleep(0.01)
    bus.publish(ev("turn_completed"))
    await task
    assert stream.heartbeats_sent >= 1
    assert client.body.count(b": hb\n\n") == stream.heartbeats_sent


async def test_no_heartbeat_before_its_time(bus: MemoryBus) -> None:
    bus.publish(ev("turn_completed"))
    client = Client()
    await serve(make_stream(bus, client, heartbeat_s=30), client)
    assert b": hb" not in client.body


# -- where a stream stops ---------------------------------------------------------------------


async def test_run_stream_stops_at_the_first_run_terminal_event(bus: MemoryBus) -> None:
    for t in ("graph_topology", "paused", "graph_topology", "turn_completed"):
        bus.publish(ev(t))
    client = Client()
    stream = make_stream(bus, client, stop_at=RUN_TERMINAL)
    await serve(stream, client)
    assert client.body.count(b"event: ") == 2
    assert re.search(rb"id: 2\nevent: paused\ndata: [^\n]+\n\n$", client.body)
    assert b"turn_completed" not in client.body
    assert stream.frames_sent == 2


async def test_turn_stream_waits_through_a_pause(bus: MemoryBus) -> None:
    bus.publish(ev("graph_topology"))
    bus.publish(ev("paused"))
    client = Client()
    task = asyncio.ensure_future(serve(make_stream(bus, client, stop_at=TURN_TERMINAL), client))
    await until(lambda: b"event: paused" in client.body)
    await asyncio.sleep(0.02)
    assert not task.done()
    bus.publish(ev("graph_topology"))
    bus.publish(ev("error", code="cancelled"))
    bus.publish(ev("node_started"))  # after the stop: never sent
    await task
    events = [line for line in client.body.decode().split("\n") if line.startswith("event: ")]
    assert events == [
        "event: graph_topology",
        "event: paused",
        "event: graph_topology",
        "event: error",
    ]


async def test_events_published_later_are_streamed(bus: MemoryBus) -> None:
    client = Client()
    task = asyncio.ensure_future(serve(make_stream(bus, client), client))
    await until(lambda: client.body == b"retry: 2000\n\n")
    bus.publish(ev("node_started"))
    await until(lambda: b"id: 1\n" in client.body)
    bus.publish(ev("turn_completed"))
    await task
    assert b"id: 2\nevent: turn_completed\n" in client.body


# -- clients that leave -----------------------------------------------------------------------


async def test_disconnect_ends_the_stream_not_completed(bus: MemoryBus) -> None:
    client = Client()
    stream = make_stream(bus, client, heartbeat_s=30)
    task = asyncio.ensure_future(serve(stream, client))
    await until(lambda: client.body == b"retry: 2000\n\n")
    client.disconnect()
    await asyncio.wait_for(task, 5)
    assert client.closed == [False]
    assert not any(m.get("more_body") is False for m in client.messages)
    assert bus.reader_count("t") == 0


async def test_async_on_close_is_awaited(bus: MemoryBus) -> None:
    seen: list[bool] = []

    async def on_close(completed: bool) -> None:
        await asyncio.sleep(0)
        seen.append(completed)

    bus.publish(ev("turn_completed"))
    client = Client()
    stream = EventStream(
        bus.reader("t"), SSEEncoder(2000), stop_at=RUN_TERMINAL, heartbeat_s=30, on_close=on_close
    )
    await serve(stream, client)
    assert seen == [True]


async def test_slow_reader_is_cut_after_send_timeout(bus: MemoryBus) -> None:
    # the client accepts the head and the preamble, then stops reading
    client = Client(send_delay=lambda m: 30 if m.get("body", b"").startswith(b"id:") else None)
    stream = make_stream(bus, client, send_timeout_s=0.1)
    task = asyncio.ensure_future(serve(stream, client, timeout=5))
    await until(lambda: client.body == b"retry: 2000\n\n")
    bus.publish(ev("node_started"))
    await asyncio.wait_for(task, 5)  # ends on its own, well before the 30 s send
    assert client.closed == [False]
    assert b"id: 1" not in client.body
    assert bus.reader_count("t") == 0


async def test_send_raising_oserror_is_a_cut(bus: MemoryBus) -> None:
    bus.publish(ev("turn_completed"))
    client = Client()

    async def broken_send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            raise ConnectionResetError("peer gone")
        client.messages.append(message)

    stream = make_stream(bus, client)
    await asyncio.wait_for(stream({"type": "http"}, client.receive, broken_send), 5)
    assert client.closed == [False]


# -- expired cursors ----------------------------------------------------------------------------


async def test_cursor_expired_sends_a_reset_frame() -> None:
    bus = MemoryBus(max_events_per_turn=2)
    bus.open_turn("t")
    client = Client()
    stream = make_stream(bus, client)  # the reader's cursor is 0
    for i in range(5):
        bus.publish(ev("node_started", i=i))  # only seq 4 and 5 are kept
    await serve(stream, client)
    body = client.body.decode()
    assert body.startswith("retry: 2000\n\nevent: reset\ndata: ")
    assert body.endswith("\n\n") and "id: " not in body
    data = json.loads(body.split("data: ", 1)[1].split("\n", 1)[0])
    assert data["v"] == 1 and data["type"] == "reset"
    assert data["code"] == "cursor_expired" and data["oldest_seq"] == 4
    assert "no longer retained" in data["message"]


async def test_cursor_expired_ndjson_reset_line() -> None:
    bus = MemoryBus(max_events_per_turn=1)
    bus.open_turn("t")
    client = Client()
    stream = make_stream(bus, client, ndjson=True)
    bus.publish(ev("node_started"))
    bus.publish(ev("node_started"))
    await serve(stream, client)
    [line] = client.body.decode().splitlines()
    assert json.loads(line)["type"] == "reset" and json.loads(line)["oldest_seq"] == 2


def test_encoders_standalone() -> None:
    e = ev("node_started").with_seq(7)
    assert SSEEncoder(1500).preamble() == b"retry: 1500\n\n"
    assert (
        SSEEncoder(1500).event(e) == f"id: 7\nevent: node_started\ndata: {e.to_json()}\n\n".encode()
    )
    assert SSEEncoder(1).heartbeat() == b": hb\n\n"
    assert NDJSONEncoder().preamble() == b""
    assert NDJSONEncoder().event(e) == (e.to_json() + "\n").encode()
    assert NDJSONEncoder().heartbeat() == b"\n"
    assert (
        SSEEncoder(1).problem("reset", {"code": "x"})
        == b'event: reset\ndata: {"v":1,"type":"reset","code":"x"}\n\n'
    )


# -- hand-offs: server shutdown and the stream's time limit -------------------------------------


async def test_closing_ends_with_a_reconnect_frame(bus: MemoryBus) -> None:
    bus.publish(ev("graph_topology"))
    closing = asyncio.Event()
    client = Client()
    stream = make_stream(bus, client, closing=closing)
    task = asyncio.ensure_future(serve(stream, client))
    await until(lambda: b"id: 1\n" in client.body)
    closing.set()
    await task
    body = client.body.decode()
    frame = body.split("\n\n")[-2]
    assert frame.startswith("event: reconnect\ndata: ") and "id: " not in frame
    data = json.loads(frame.split("data: ", 1)[1])
    assert data == {
        "v": 1,
        "type": "reconnect",
        "reason": "server_shutdown",
        "last_seq": 1,
        "message": data["message"],
    }
    assert "Last-Event-ID" in data["message"]
    assert client.messages[-1]["more_body"] is False  # a clean end of the body
    assert client.closed == [False]  # not at its terminal event: the reader left


async def test_closing_already_set_hands_off_after_pending_events(bus: MemoryBus) -> None:
    bus.publish(ev("graph_topology"))
    bus.publish(ev("node_started"))
    closing = asyncio.Event()
    closing.set()
    client = Client()
    await serve(make_stream(bus, client, closing=closing), client)
    body = client.body.decode()
    assert body.index("id: 2\n") < body.index("event: reconnect")
    assert '"last_seq":2' in body


async def test_terminal_event_wins_over_closing(bus: MemoryBus) -> None:
    bus.publish(ev("turn_completed"))
    closing = asyncio.Event()
    closing.set()
    client = Client()
    await serve(make_stream(bus, client, closing=closing), client)
    assert b"reconnect" not in client.body
    assert client.closed == [True]


async def test_stream_time_limit_hands_off(bus: MemoryBus) -> None:
    client = Client()
    stream = make_stream(bus, client, heartbeat_s=30, max_duration_s=0.1)
    await serve(stream, client)  # ends on its own, long before the 30 s heartbeat
    body = client.body.decode()
    data = json.loads(body.split("event: reconnect\ndata: ", 1)[1].split("\n", 1)[0])
    assert data["reason"] == "stream_time_limit" and data["last_seq"] == 0
    assert client.closed == [False]


async def test_ndjson_reconnect_line(bus: MemoryBus) -> None:
    client = Client()
    await serve(make_stream(bus, client, ndjson=True, max_duration_s=0.05), client)
    [line] = client.body.decode().splitlines()
    assert json.loads(line)["type"] == "reconnect"


# -- bounded batches ------------------------------------------------------------------------------


async def test_a_long_backlog_goes_out_in_bounded_batches(bus: MemoryBus) -> None:
    from relay.delivery.streaming import MAX_BATCH

    total = MAX_BATCH * 3 + 5
    for i in range(total - 1):
        bus.publish(ev("node_started", i=i))
    bus.publish(ev("turn_completed"))
    client = Client()
    stream = make_stream(bus, client)
    await serve(stream, client)
    bodies = [m["body"] for m in client.messages[2:-1]]  # after the head and the preamble
    assert all(body.count(b"\nevent: ") <= MAX_BATCH for body in bodies)
    assert len(bodies) >= 4
    ids = [int(line[4:]) for line in client.body.decode().split("\n") if line.startswith("id: ")]
    assert ids == list(range(1, total + 1))
    assert stream.frames_sent == total


# -- fan-out: wakes per burst, frames shared, the send watchdog ----------------------------------


async def test_a_burst_published_in_one_iteration_goes_out_as_one_write(bus: MemoryBus) -> None:
    client = Client()
    stream = make_stream(bus, client)
    task = asyncio.ensure_future(serve(stream, client))
    await until(lambda: client.body == b"retry: 2000\n\n")  # the stream waits on the log
    writes = stream.writes
    for i in range(5):  # no await in between: one loop iteration
        bus.publish(ev("node_started", i=i))
    await until(lambda: stream.frames_sent == 5)
    assert stream.writes == writes + 1
    burst = client.messages[-1]["body"]
    assert [line for line in burst.decode().split("\n") if line.startswith("id: ")] == [
        f"id: {i}" for i in range(1, 6)
    ]
    bus.publish(ev("turn_completed"))
    await task
    assert stream.writes == writes + 3  # then the terminal event, then the end


async def test_a_thousand_readers_of_one_turn_get_every_frame_once_and_share_it(
    bus: MemoryBus,
) -> None:
    clients = [Client() for _ in range(1000)]
    streams = [make_stream(bus, c, stop_at=TURN_TERMINAL) for c in clients]
    tasks = [
        asyncio.ensure_future(serve(s, c, timeout=60))
        for s, c in zip(streams, clients, strict=True)
    ]
    await until(lambda: all(c.body == b"retry: 2000\n\n" for c in clients), timeout=60)
    types = [
        "graph_topology",
        "node_started",
        "paused",
        "node_started",
        "node_completed",
        "turn_completed",
    ]
    for n, type_ in enumerate(types, start=1):
        bus.publish(ev(type_, n=n))  # one at a time: each reader writes it alone
        if n < len(types):
            await until(lambda n=n: all(s.frames_sent == n for s in streams), timeout=60)
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    reference = clients[0]
    ids = [line for line in reference.body.decode().split("\n") if line.startswith("id: ")]
    assert ids == [f"id: {n}" for n in range(1, len(types) + 1)]
    for client, stream in zip(clients, streams, strict=True):
        assert client.body == reference.body
        assert client.closed == [True] and stream.frames_sent == len(types)
        frames = [m["body"] for m in client.messages[2:-1]]  # after the head and preamble
        assert len(frames) == len(types)
        # not just equal: the very bytes object every other reader wrote
        assert all(
            a is b
            for a, b in zip(frames, [m["body"] for m in reference.messages[2:-1]], strict=True)
        )
    assert bus.reader_count("t") == 0 and bus._logs["t"].watchers == {}


async def test_sends_each_within_the_timeout_are_never_cut(bus: MemoryBus) -> None:
    # every send is slow but well within the timeout; together they take longer than it:
    # the timeout bounds one send (a reader that stopped), not the stream's lifetime
    client = Client(send_delay=lambda m: 0.02 if m["type"] == "http.response.body" else None)
    stream = make_stream(bus, client, send_timeout_s=0.5)
    task = asyncio.ensure_future(serve(stream, client, timeout=30))
    for i in range(40):
        bus.publish(ev("node_started", i=i))
        await until(lambda i=i: stream.frames_sent == i + 1)
    bus.publish(ev("turn_completed"))
    await task
    assert client.closed == [True] and stream.frames_sent == 41


async def test_a_stream_cancelled_in_a_send_is_cancelled_not_cut(bus: MemoryBus) -> None:
    sending = asyncio.Event()

    def delay(message: dict) -> float | None:
        if message.get("body", b"").startswith(b"id:"):
            sending.set()
            return 30
        return None

    client = Client(send_delay=delay)
    stream = make_stream(bus, client, send_timeout_s=30)
    task = asyncio.ensure_future(stream({"type": "http"}, client.receive, client.send))
    await until(lambda: client.body == b"retry: 2000\n\n")
    bus.publish(ev("node_started"))
    await asyncio.wait_for(sending.wait(), 5)
    task.cancel()  # the server going down, say: not the watchdog
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.closed == [False] and bus.reader_count("t") == 0


async def test_a_stalled_send_is_cut_by_the_watchdog_once_per_stream(bus: MemoryBus) -> None:
    # two streams of one turn; one client stalls: only that one is cut, the other ends
    stalled = Client(send_delay=lambda m: 30 if m.get("body", b"").startswith(b"id: 2") else None)
    healthy = Client()
    s1 = make_stream(bus, stalled, send_timeout_s=0.1)
    s2 = make_stream(bus, healthy, send_timeout_s=0.1)
    t1 = asyncio.ensure_future(serve(s1, stalled))
    t2 = asyncio.ensure_future(serve(s2, healthy))
    bus.publish(ev("node_started"))
    await until(lambda: s1.frames_sent == 1 and s2.frames_sent == 1)
    bus.publish(ev("node_started"))
    await asyncio.wait_for(t1, 5)
    assert s1.outcome == "gone" and stalled.closed == [False]
    bus.publish(ev("turn_completed"))
    await asyncio.wait_for(t2, 5)
    assert s2.outcome == "done" and healthy.closed == [True]
    assert b"id: 3" in healthy.body and b"id: 2" not in stalled.body
