"""A browser's own ``EventSource`` (no code of ours on the client) reading a turn's stream.

``GET /turns/{id}/events`` is read with a plain ``new EventSource(url)`` in Chromium. Its
connections are cut three times mid-stream (Playwright serves the first frames of the real
response, then ends it): each time it reconnects with ``Last-Event-ID`` and the events go on
with no gap and no duplicate. Once it has the turn's end (the terminal event and the
``message_saved`` after it), its next reconnect gets ``204 No Content``, which the WHATWG
spec defines as "stop reconnecting": ``readyState`` becomes ``CLOSED`` and it never asks
again (DESIGN.md §4). And our ``event: error`` (a ``MessageEvent`` with ``data``) is told
apart from the browser's own connection ``error`` event (a plain ``Event``, no ``data``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid

import httpx
import pytest

from tests.browser.conftest import running_server

pytestmark = pytest.mark.browser

EVENT_TYPES = [
    "graph_topology",
    "node_started",
    "node_completed",
    "tool_started",
    "tool_completed",
    "text_delta",
    "paused",
    "error",
    "turn_completed",
    "message_saved",
    "reconnect",
    "reset",
]

# Opens a native EventSource and records everything it is told, per connection.
OPEN_JS = """
([url, types]) => {
  const log = window.__es = {events: [], errors: [], opens: 0, closed: false};
  const es = new EventSource(url);
  window.__source = es;
  es.addEventListener('open', () => { log.opens += 1; });
  for (const type of types) {
    es.addEventListener(type, (e) => {
      if (type === 'error') return;  // recorded below, with the browser's own
      log.events.push({type, id: e.lastEventId, data: e.data});
    });
  }
  es.addEventListener('error', (e) => {
    // ours is a MessageEvent that carries data; the browser's is a plain Event
    const ours = e instanceof MessageEvent && typeof e.data === 'string';
    log.errors.push({ours, data: ours ? e.data : null, id: ours ? e.lastEventId : null,
                     readyState: es.readyState});
    if (ours) log.events.push({type: 'error', id: e.lastEventId, data: e.data});
    if (es.readyState === EventSource.CLOSED) log.closed = true;
  });
}
"""


@pytest.fixture(scope="module")
def fast_retry_server(tmp_path_factory, chromium_path):
    """A server whose streams tell the client to reconnect after 150 ms."""
    with running_server(
        tmp_path_factory,
        {"RELAY_RETRY_MS": "150", "RELAY_OFFLINE_WORD_DELAY_S": "0"},
        log_name="server-eventsource.log",
    ) as base:
        yield base


def start_turn(base: str, message: str, headers: dict[str, str] | None = None) -> str:
    turn_id = str(uuid.uuid4())  # as crypto.randomUUID() spells it
    r = httpx.post(
        f"{base}/chat",
        json={"message": message, "turn_id": turn_id},
        headers={"Prefer": "respond-async", **(headers or {})},
        timeout=30,
    )
    assert r.status_code == 202, r.text
    return turn_id


def wait_closed(page, timeout_s: float = 30.0) -> dict:
    """Poll (through page.evaluate: the SPA's CSP forbids string evaluation) until the
    EventSource is CLOSED: an upper bound that only turns a hang into a failure."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        log = page.evaluate("() => window.__es")
        if log["closed"]:
            return log
        page.wait_for_timeout(50)
    raise AssertionError(f"the EventSource never closed: {page.evaluate('() => window.__es')}")


class CuttingProxy:
    """A TCP proxy in front of the server that cuts the first ``cuts`` connections to a
    turn's events after ``keep`` events have passed (the socket closes mid-stream, as a
    flaky network does), and passes the rest whole. It records each request's
    ``Last-Event-ID`` as the browser sent it."""

    def __init__(self, upstream: str, cuts: int, keep: int) -> None:
        self.upstream_port = int(upstream.rsplit(":", 1)[1])
        self.cuts_left = cuts
        self.keep = keep
        self.last_event_ids: list[str | None] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self.server: asyncio.Server | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CuttingProxy:
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def shut() -> None:  # the connections still open (keep-alive) end first
            if self.server is not None:
                self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        events_path = "/events" in lines[0]
        cut = events_path and self.cuts_left > 0
        if events_path:
            self.last_event_ids.append(
                next(
                    (
                        ln.split(":", 1)[1].strip()
                        for ln in lines[1:]
                        if ln.lower().startswith("last-event-id:")
                    ),
                    None,
                )
            )
        if cut:
            self.cuts_left -= 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        # one request per connection: the proxy reads one request head and then only
        # passes the answer on, so the server is asked to close after it (a kept-alive
        # connection would hold the browser's next request until the server's keep-alive
        # timeout closed it)
        kept = [ln for ln in lines if ln and not ln.lower().startswith("connection:")]
        up_writer.write(("\r\n".join([*kept, "Connection: close"]) + "\r\n\r\n").encode("latin-1"))
        await up_writer.drain()
        try:
            if not cut:
                while chunk := await up_reader.read(65536):
                    writer.write(chunk)
                    await writer.drain()
                return
            await self._cut_after_events(up_reader, writer)
        finally:
            up_writer.close()
            writer.close()

    async def _cut_after_events(
        self, up: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Pass the response on as a close-delimited body (its chunked framing undone, so
        the cut falls between two whole SSE frames whatever the server's chunks held),
        then close after the keep-th event."""
        head = (await up.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        chunked = any(h.lower() == "transfer-encoding: chunked" for h in head)
        kept = [
            h
            for h in head
            if h
            and not h.lower().startswith(("transfer-encoding:", "connection:", "content-length:"))
        ]
        writer.write(("\r\n".join([*kept, "Connection: close"]) + "\r\n\r\n").encode())
        seen = 0
        buffer = b""
        while True:
            if chunked:
                size = int((await up.readuntil(b"\r\n")).strip(), 16)
                data = await up.readexactly(size) if size else b""
                await up.readexactly(2)
            else:
                data = await up.read(65536)
            if not data:
                writer.write(buffer)
                return
            buffer += data
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                writer.write(frame + b"\n\n")
                if frame.startswith(b"id: ") or b"\nid: " in frame:
                    seen += 1
                    if seen == self.keep:
                        await writer.drain()
                        return  # the cut: the socket closes between two events
            await writer.drain()


def test_native_eventsource_resumes_across_cuts_and_stops_after_the_end(
    make_page, fast_retry_server
) -> None:
    turn_id = start_turn(fast_retry_server, "How do refunds work?")
    with CuttingProxy(fast_retry_server, cuts=3, keep=3) as proxy:
        page = make_page(base_url=proxy.url)
        page.goto("/healthz")  # any page of the (proxied) server's origin
        page.evaluate(OPEN_JS, [f"/turns/{turn_id}/events", EVENT_TYPES])
        log = wait_closed(page)
        requests = list(proxy.last_event_ids)

    seqs = [int(e["id"]) for e in log["events"]]
    assert seqs == list(range(1, len(seqs) + 1)), seqs  # no gap, no duplicate
    types = [e["type"] for e in log["events"]]
    assert types[0] == "graph_topology"
    assert types.count("turn_completed") == 1 and types[-2:] == ["turn_completed", "message_saved"]
    response = json.loads(log["events"][-2]["data"])["response"]
    assert response["turn_id"] == turn_id and response["status"] == "answered"
    # three cut connections resumed where they stopped, then the rest, then the 204
    assert requests[:4] == [None, "3", "6", "9"], requests
    assert requests[4:] == [str(seqs[-1])], requests
    assert log["opens"] == 4
    # the 204: CLOSED, which per spec never reconnects; no error of ours on the way
    assert log["errors"][-1] == {"ours": False, "data": None, "id": None, "readyState": 2}
    assert not any(e["ours"] for e in log["errors"])
    assert page.evaluate("() => window.__source.readyState") == 2


def test_our_error_event_is_told_from_the_browsers_connection_error(
    make_page, fast_retry_server
) -> None:
    turn_id = start_turn(
        fast_retry_server, "How do refunds work?", headers={"X-Relay-Fault": "generate=error"}
    )
    page = make_page(base_url=fast_retry_server)
    page.goto("/healthz")
    page.evaluate(OPEN_JS, [f"/turns/{turn_id}/events", EVENT_TYPES])
    log = wait_closed(page)

    ours = [e for e in log["errors"] if e["ours"]]
    assert len(ours) == 1  # the turn's terminal event, once
    fields = json.loads(ours[0]["data"])
    assert fields["type"] == "error" and fields["code"] == "node_failed"
    assert fields["turn_id"] == turn_id and fields["node"] == "generate"
    assert int(ours[0]["id"]) == fields["seq"]
    browsers = [e for e in log["errors"] if not e["ours"]]
    # the stream closing after our error, then the 204 that closes the EventSource
    assert browsers and browsers[-1]["readyState"] == 2
    assert all(e["data"] is None for e in browsers)
    assert log["errors"].index(ours[0]) < log["errors"].index(browsers[-1])
    assert [e["type"] for e in log["events"]][-1] == "error"
