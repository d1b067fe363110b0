"""The stream writer: a turn's log on the bus -> SSE or NDJSON bytes on the socket.

:class:`EventStream` is a small ASGI app (a response) that reads one turn's log from a
cursor and writes frames as events arrive. It owns three timers and nothing else:

- heartbeats: a comment every ``heartbeat_s`` from a clock independent of events, so a
  proxy that cuts idle connections never sees an idle one, even through a long tool call
  or a human's wait;
- the send timeout: a client that stops reading (its socket buffer full) is cut after
  ``send_timeout_s`` instead of holding memory; it can resume with ``Last-Event-ID``;
- the disconnect watch: ``http.disconnect`` ends the stream at once.

It stops after the first event in ``stop_at`` (a run's stream stops at its run's terminal
event; a turn's stream waits through a pause), or when its reader is ``exhausted`` (a
fixed list, such as a replay, sent whole). When the server shuts down (``closing``)
or the stream reaches ``max_duration_s``, it ends with a ``reconnect`` frame that tells
the client where to resume. ``on_close`` tells the owner whether the stream ended at its
terminal event, which is how a turn learns its last reader left.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from starlette.responses import Response

from relay.bus.base import BusUnavailable, CursorExpired, LogReader
from relay.delivery.negotiation import NDJSON, SSE
from relay.events import MESSAGE_SAVED, TURN_COMPLETED, Event, dumps

#: events written to the socket at once: a reader holds at most one batch in memory
MAX_BATCH = 64
#: how long a stream that has sent turn_completed waits for the answer's message_saved
TRAILER_WAIT_S = 1.0

STREAM_HEADERS = [
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


class Encoder(Protocol):
    """Frames for one stream: its content type, what opens it, each event, a heartbeat,
    an out-of-log frame (``reconnect``, ``reset``, ``error``), and what closes what is
    still open when the stream ends (AG-UI's run brackets; nothing for SSE and NDJSON)."""

    media_type: str

    def preamble(self) -> bytes: ...

    def event(self, event: Event) -> bytes: ...

    def heartbeat(self) -> bytes: ...

    def problem(self, type_: str, fields: dict[str, Any]) -> bytes: ...

    def epilogue(self) -> bytes: ...


class SSEEncoder:
    media_type = SSE

    def __init__(self, retry_ms: int) -> None:
        self.retry_ms = retry_ms

    def preamble(self) -> bytes:
        return f"retry: {self.retry_ms}\n\n".encode()

    def event(self, event: Event) -> bytes:
        return f"id: {event.seq}\nevent: {event.type}\ndata: {event.to_json()}\n\n".encode()

    def heartbeat(self) -> bytes:
        return b": hb\n\n"

    def problem(self, type_: str, fields: dict[str, Any]) -> bytes:
        """An out-of-log frame (no id: it is not part of the turn's sequence)."""
        return f"event: {type_}\ndata: {dumps({'v': 1, 'type': type_, **fields})}\n\n".encode()

    def epilogue(self) -> bytes:
        return b""


class NDJSONEncoder:
    media_type = NDJSON

    def preamble(self) -> bytes:
        return b""

    def event(self, event: Event) -> bytes:
        return (event.to_json() + "\n").encode()

    def heartbeat(self) -> bytes:
        return b"\n"

    def problem(self, type_: str, fields: dict[str, Any]) -> bytes:
        return (dumps({"v": 1, "type": type_, **fields}) + "\n").encode()

    def epilogue(self) -> bytes:
        return b""


CloseCallback = Callable[[bool], Awaitable[None] | None]


class EventStream(Response):
    """An ASGI response that streams one turn's log from a cursor.

    A :class:`starlette.responses.Response` only so that frameworks pass it through;
    it writes its own messages and keeps no body.
    """

    def __init__(
        self,
        reader: LogReader,
        encoder: Encoder,
        *,
        stop_at: Collection[str],
        heartbeat_s: float,
        send_timeout_s: float = 30.0,
        max_duration_s: float | None = None,
        closing: asyncio.Event | None = None,
        on_close: CloseCallback | None = None,
        extra_headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.reader = reader
        self.encoder = encoder
        self.stop_at = stop_at
        self.heartbeat_s = heartbeat_s
        self.send_timeout_s = send_timeout_s
        self.max_duration_s = max_duration_s
        self.closing = closing
        self.on_close = on_close
        self.extra_headers = extra_headers or []
        self.frames_sent = 0
        self.heartbeats_sent = 0
        #: how the stream ended: "done" (its terminal event), "handoff" (told to
        #: reconnect) or "gone" (the client left, or stalled past the send timeout)
        self.outcome = "open"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        outcome = "gone"
        disconnected = asyncio.Event()
        watcher = asyncio.create_task(_watch_disconnect(receive, disconnected))
        try:
            headers = [
                (b"content-type", f"{self.encoder.media_type}; charset=utf-8".encode()),
                *STREAM_HEADERS,
                *self.extra_headers,
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            outcome = await self._pump(send, disconnected)
            if outcome != "gone":
                # an encoder that brackets events (AG-UI) closes what is still open
                await self._send(send, self.encoder.epilogue(), more=False)
        except (OSError, TimeoutError, _Gone):
            outcome = "gone"
        finally:
            self.outcome = outcome
            watcher.cancel()
            self.reader.close()
            if self.on_close is not None:
                result = self.on_close(outcome == "done")
                if asyncio.iscoroutine(result):
                    await result

    async def _pump(self, send: Any, disconnected: asyncio.Event) -> str:
        """Write frames until a stop event ("done"), until the server asks the client to
        reconnect ("handoff": shutdown or the stream's time limit), or until the client is
        gone ("gone")."""
        preamble = self.encoder.preamble()
        if preamble:
            await self._send(send, preamble)
        now = time.monotonic()
        next_beat = now + self.heartbeat_s
        deadline = now + self.max_duration_s if self.max_duration_s else None
        interrupts = {asyncio.ensure_future(disconnected.wait())}
        if self.closing is not None:
            interrupts.add(asyncio.ensure_future(self.closing.wait()))
        try:
            while True:
                try:
                    batch = self.reader.take(MAX_BATCH)
                except CursorExpired as exc:
                    await self._send(send, self.encoder.problem("reset", {
                        "code": "cursor_expired", "message": str(exc), "oldest_seq": exc.oldest,
                    }))
                    return "done"
                except BusUnavailable as exc:  # the shared bus went away
                    await self._send(send, self.encoder.problem("error", {
                        "code": "bus_unavailable", "message": str(exc), "node": None,
                        "retryable": True, "last_seq": self.reader.cursor,
                    }))
                    return "done"
                if batch:
                    stop = next((i for i, e in enumerate(batch) if e.type in self.stop_at), None)
                    after = batch[stop + 1:] if stop is not None else []
                    if stop is not None:
                        batch = batch[: stop + 1]
                    await self._send(send, b"".join(self.encoder.event(e) for e in batch))
                    self.frames_sent += len(batch)
                    if stop is not None:
                        if batch[-1].type == TURN_COMPLETED:
                            await self._trailer(send, after)
                        return "done"
                if self.reader.exhausted:
                    return "done"  # a fixed list (a replay) that has been sent whole
                if disconnected.is_set():
                    return "gone"
                now = time.monotonic()
                closing = self.closing is not None and self.closing.is_set()
                if closing or (deadline is not None and now >= deadline):
                    await self._send(send, self.encoder.problem("reconnect", {
                        "reason": "server_shutdown" if closing else "stream_time_limit",
                        "last_seq": self.reader.cursor,
                        "message": "Reconnect with Last-Event-ID to continue this turn.",
                    }))
                    return "handoff"
                if now >= next_beat:
                    await self._send(send, self.encoder.heartbeat())
                    self.heartbeats_sent += 1
                    next_beat = now + self.heartbeat_s
                    continue
                wake = next_beat if deadline is None else min(next_beat, deadline)
                waiting = asyncio.ensure_future(self.reader.wait(wake - now))
                await asyncio.wait({waiting, *interrupts}, return_when=asyncio.FIRST_COMPLETED)
                if not waiting.done():
                    waiting.cancel()
        finally:
            for future in interrupts:
                future.cancel()

    async def _trailer(self, send: Any, taken: list[Event]) -> None:
        """After ``turn_completed``, the answer's ``message_saved`` if it comes within
        ``TRAILER_WAIT_S`` (or was already ``taken`` with it): the save runs after the
        answer is out, never before it."""
        deadline = time.monotonic() + TRAILER_WAIT_S
        while (left := deadline - time.monotonic()) > 0:
            for event in taken or self.reader.take(MAX_BATCH):
                if event.type == MESSAGE_SAVED:
                    await self._send(send, self.encoder.event(event))
                    self.frames_sent += 1
                    return
            taken = []
            if self.reader.exhausted or not await self.reader.wait(left):
                return

    async def _send(self, send: Any, body: bytes, more: bool = True) -> None:
        message = {"type": "http.response.body", "body": body, "more_body": more}
        try:  # a timeout scope, not wait_for: no task per write
            async with asyncio.timeout(self.send_timeout_s):
                await send(message)
        except TimeoutError:
            raise _Gone("client stopped reading") from None


class _Gone(Exception):
    """The client cannot be written to any more."""


async def _watch_disconnect(receive: Any, disconnected: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            disconnected.set()
            return
