"""The stream writer: a turn's log on the bus -> SSE or NDJSON bytes on the socket.

:class:`EventStream` is a small ASGI app (a response) that reads one turn's log from a
cursor and writes frames as events arrive. It owns three timers and nothing else:

- heartbeats: a comment every ``heartbeat_s`` from a clock independent of events, so a
  proxy that cuts idle connections never sees an idle one, even through a long tool call
  or a human's wait;
- the send timeout: a client that stops reading (its socket buffer full) is cut after
  ``send_timeout_s`` instead of holding memory (a slow reader is bounded: it holds at
  most one batch, and the log is shared); it can resume with ``Last-Event-ID``;
- the disconnect watch: ``http.disconnect`` ends the stream at once.

An owner whose frames need I/O (LangGraph's run stream reads the thread's checkpoints at
step boundaries: relay/agent_server/stream.py) gives a ``frames`` hook: each batch is
written as what it awaits instead of the encoder's frames, inside the same loop (the same
timers, disconnect handling and bus-loss notes).

It stops after the first event in ``stop_at`` (a run's stream stops at its run's terminal
event; a turn's stream waits through a pause), or when its reader is ``exhausted`` (a
fixed list, such as a replay, sent whole). When the server shuts down (``closing``)
or the stream reaches ``max_duration_s``, it ends with a ``reconnect`` frame that tells
the client where to resume. ``on_close`` tells the owner whether the stream ended at its
terminal event, which is how a turn learns its last reader left.

Fan-out (a thousand readers of one turn) costs each reader one wake per burst of events,
one ``take`` and one write, of frames built once for all of them (see
:class:`EventStream`; docs/performance.md, "Fan-out").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from functools import partial
from typing import Any, Protocol, cast

from starlette.responses import Response

from relay.bus.base import BusLost, BusUnavailable, CursorExpired, LogReader, PushReader
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


def _sse_frame(event: Event) -> bytes:
    return f"id: {event.seq}\nevent: {event.type}\ndata: {event.to_json()}\n\n".encode()


def _ndjson_frame(event: Event) -> bytes:
    return (event.to_json() + "\n").encode()


class SSEEncoder:
    media_type = SSE

    def __init__(self, retry_ms: int) -> None:
        self.retry_ms = retry_ms

    def preamble(self) -> bytes:
        return f"retry: {self.retry_ms}\n\n".encode()

    def event(self, event: Event) -> bytes:
        return event.frame("sse", _sse_frame)  # built once, shared by every SSE reader

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
        return event.frame("ndjson", _ndjson_frame)

    def heartbeat(self) -> bytes:
        return b"\n"

    def problem(self, type_: str, fields: dict[str, Any]) -> bytes:
        return (dumps({"v": 1, "type": type_, **fields}) + "\n").encode()

    def epilogue(self) -> bytes:
        return b""


CloseCallback = Callable[[bool], Awaitable[None] | None]
#: a batch's bytes, when making them needs I/O (see the module docstring); b"": nothing
Frames = Callable[[list[Event]], Awaitable[bytes]]


class EventStream(Response):
    """An ASGI response that streams one turn's log from a cursor.

    A :class:`starlette.responses.Response` only so that frameworks pass it through;
    it writes its own messages and keeps no body.

    The stream's task waits on one future of its own (``_wake``), which whatever has
    something to say resolves: the log (a :class:`relay.bus.base.PushReader` calls back;
    another reader's ``wait`` runs in a task beside it), the disconnect watch, the
    shutdown, and one timer for the next heartbeat or the time limit that is armed again
    only when that moment moves. A woken stream takes everything published since (up to
    ``MAX_BATCH``) and writes it as one body chunk; frames are built once per event and
    framing and shared by every reader (:meth:`relay.events.Event.frame`). The send
    timeout is a watchdog armed at most once per ``send_timeout_s``, not a timer per
    write: a send still pending when it fires cancels the task out of that send.
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
        frames: Frames | None = None,
    ) -> None:
        self.status_code = 200
        self.frames = frames
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
        #: body chunks written (a batch of frames is one), for tests and metrics
        self.writes = 0
        #: how the stream ended: "done" (its terminal event), "handoff" (told to
        #: reconnect) or "gone" (the client left, or stalled past the send timeout)
        self.outcome = "open"
        self._wake: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._disconnected = False
        self._task: asyncio.Task[Any] | None = None
        self._sending: float | None = None  # when the pending send started
        self._guard: asyncio.TimerHandle | None = None  # the send-timeout watchdog
        self._stalled = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        outcome = "gone"
        self._task = asyncio.current_task()
        watcher = asyncio.create_task(self._watch_disconnect(receive))
        shutdown: asyncio.Future[Any] | None = None
        if self.closing is not None and not self.closing.is_set():
            shutdown = asyncio.ensure_future(self.closing.wait())
            shutdown.add_done_callback(self._poke)
        try:
            headers = [
                (b"content-type", f"{self.encoder.media_type}; charset=utf-8".encode()),
                *STREAM_HEADERS,
                *self.extra_headers,
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            outcome = await self._pump(send)
            if outcome != "gone":
                # an encoder that brackets events (AG-UI) closes what is still open
                await self._send(send, self.encoder.epilogue(), more=False)
        except (OSError, TimeoutError, _Gone):
            outcome = "gone"
        finally:
            self.outcome = outcome
            watcher.cancel()
            if shutdown is not None:
                shutdown.cancel()
            for handle in (self._timer, self._guard):
                if handle is not None:
                    handle.cancel()
            self._timer = self._guard = None
            self.reader.close()
            if self.on_close is not None:
                result = self.on_close(outcome == "done")
                if asyncio.iscoroutine(result):
                    await result

    async def _pump(self, send: Any) -> str:
        """Write frames until a stop event ("done"), until the server asks the client to
        reconnect ("handoff": shutdown or the stream's time limit), or until the client is
        gone ("gone")."""
        preamble = self.encoder.preamble()
        if preamble:
            await self._send(send, preamble)
        reader = self.reader
        encode = self.encoder.event
        stop_at = self.stop_at
        # not isinstance(reader, PushReader): a runtime protocol check walks the MRO
        push = cast(PushReader, reader) if hasattr(reader, "watch") else None
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        next_beat = now + self.heartbeat_s
        deadline = now + self.max_duration_s if self.max_duration_s else None
        timer_at: float | None = None
        try:
            while True:
                try:
                    batch = reader.take(MAX_BATCH)
                except CursorExpired as exc:
                    await self._send(
                        send,
                        self.encoder.problem(
                            "reset",
                            {
                                "code": "cursor_expired",
                                "message": str(exc),
                                "oldest_seq": exc.oldest,
                            },
                        ),
                    )
                    return "done"
                except BusLost as exc:  # a note: the stream goes on from its cursor
                    await self._send(
                        send,
                        self.encoder.problem(
                            "reset",
                            {"code": "bus_lost", "message": str(exc), "last_seq": exc.last_seq},
                        ),
                    )
                    continue
                except BusUnavailable as exc:  # the shared bus went away
                    await self._send(
                        send,
                        self.encoder.problem(
                            "error",
                            {
                                "code": "bus_unavailable",
                                "message": str(exc),
                                "node": None,
                                "retryable": True,
                                "last_seq": reader.cursor,
                            },
                        ),
                    )
                    return "done"
                if batch:
                    stop = None
                    for i, event in enumerate(batch):
                        if event.type in stop_at:
                            stop = i
                            break
                    after = batch[stop + 1 :] if stop is not None else []
                    if stop is not None:
                        batch = batch[: stop + 1]
                    # one write for the batch; a lone frame is the shared bytes object
                    if self.frames is not None:
                        body = await self.frames(batch)
                    elif len(batch) == 1:
                        body = encode(batch[0])
                    else:
                        body = b"".join([encode(e) for e in batch])
                    if body:
                        await self._send(send, body)
                    self.frames_sent += len(batch)
                    if stop is not None:
                        if batch[-1].type == TURN_COMPLETED:
                            await self._trailer(send, after)
                        return "done"
                if reader.exhausted:
                    return "done"  # a fixed list (a replay) that has been sent whole
                if self._disconnected:
                    return "gone"
                now = time.monotonic()
                closing = self.closing is not None and self.closing.is_set()
                if closing or (deadline is not None and now >= deadline):
                    await self._send(
                        send,
                        self.encoder.problem(
                            "reconnect",
                            {
                                "reason": "server_shutdown" if closing else "stream_time_limit",
                                "last_seq": reader.cursor,
                                "message": "Reconnect with Last-Event-ID to continue this turn.",
                            },
                        ),
                    )
                    return "handoff"
                if now >= next_beat:
                    await self._send(send, self.encoder.heartbeat())
                    self.heartbeats_sent += 1
                    next_beat = now + self.heartbeat_s
                    continue
                wake_at = next_beat if deadline is None else min(next_beat, deadline)
                if push is not None:
                    if self._timer is None or timer_at != wake_at:  # moves only at a beat
                        if self._timer is not None:
                            self._timer.cancel()
                        self._timer = loop.call_later(wake_at - now, self._on_timer)
                        timer_at = wake_at
                    if not push.watch(self._poke):
                        continue  # events came in the meantime
                    self._wake = loop.create_future()
                    await self._wake
                    self._wake = None
                else:
                    # a reader that waits (I/O: Redis; a paced replay), in a task beside
                    # this one, with its own timeout: only what ends the stream (the
                    # disconnect, the shutdown) cuts it short, never a heartbeat (an
                    # XREAD is not cancelled mid-command for a beat)
                    self._wake = wake = loop.create_future()
                    waiting = asyncio.ensure_future(reader.wait(wake_at - now))
                    waiting.add_done_callback(partial(_resolve, wake))
                    try:
                        await wake
                    finally:
                        self._wake = None
                        if not waiting.done():
                            waiting.cancel()
        finally:
            self._wake = None
            if push is not None:
                push.unwatch()

    def _poke(self, *_: Any) -> None:
        """Wake the stream's task, if it waits (whoever calls: the log, a finished wait,
        the disconnect, the shutdown, the timer); what woke it is read from the state."""
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _on_timer(self) -> None:
        self._timer = None
        self._poke()

    async def _watch_disconnect(self, receive: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self._disconnected = True
                self._poke()
                return

    async def _trailer(self, send: Any, taken: list[Event]) -> None:
        """After ``turn_completed``, the answer's ``message_saved`` if it comes within
        ``TRAILER_WAIT_S`` (or was already ``taken`` with it): the save runs after the
        answer is out, never before it."""
        deadline = time.monotonic() + TRAILER_WAIT_S
        while (left := deadline - time.monotonic()) > 0:
            for event in taken or self.reader.take(MAX_BATCH):
                if event.type == MESSAGE_SAVED:
                    trailer = self.encoder.event(event)
                    if trailer:  # an encoder may have no frame for it (LangGraph's stream)
                        await self._send(send, trailer)
                        self.frames_sent += 1
                    return
            taken = []
            if self.reader.exhausted or not await self.reader.wait(left):
                return

    async def _send(self, send: Any, body: bytes, more: bool = True) -> None:
        """One body chunk. A send that uvicorn's flow control holds longer than
        ``send_timeout_s`` (the client stopped reading) raises :class:`_Gone`: the
        watchdog cancels the task out of it (``Task.uncancel``, as ``asyncio.timeout``
        does) instead of a timer per write."""
        message = {"type": "http.response.body", "body": body, "more_body": more}
        self._sending = time.monotonic()
        if self._guard is None:
            self._guard = asyncio.get_running_loop().call_later(
                self.send_timeout_s, self._check_send
            )
        try:
            await send(message)
        except asyncio.CancelledError:
            task = self._task
            if self._stalled and task is not None and task.uncancel() == 0:
                raise _Gone("client stopped reading") from None
            raise
        finally:
            self._sending = None
        self.writes += 1

    def _check_send(self) -> None:
        """The watchdog: cut a send pending for ``send_timeout_s``; else look again when
        the pending one would be that old (nothing pending: disarm until the next send)."""
        self._guard = None
        started = self._sending
        if started is None:
            return
        now = time.monotonic()
        if now - started >= self.send_timeout_s:
            self._stalled = True
            if self._task is not None:
                self._task.cancel()
            return
        self._guard = asyncio.get_running_loop().call_later(
            started + self.send_timeout_s - now, self._check_send
        )


def _resolve(wake: asyncio.Future[None], _: object) -> None:
    if not wake.done():
        wake.set_result(None)


class _Gone(Exception):
    """The client cannot be written to any more."""
