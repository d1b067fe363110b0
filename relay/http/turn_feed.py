"""``GET /turns`` as a stream: the turns as they are now, then every change, live.

The first frame, ``event: turns``, carries the list ``GET /turns`` would answer (the same
filters); each later ``event: turn`` frame one turn's record as it changed (a turn began,
paused, resumed or ended). No ids: a reconnecting client gets a fresh list, which is the
whole state, so nothing is missed. Heartbeats (``: hb``) keep proxies from cutting the
idle socket; a watcher that fell behind its bounded queue gets ``event: reset`` (read the
list again). The stream ends when the client leaves or the server shuts down.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.responses import StreamingResponse

from relay.delivery.negotiation import SSE
from relay.delivery.streaming import STREAM_HEADERS
from relay.events import dumps
from relay.turns.feed import TurnFeed
from relay.turns.records import TurnRecord


def _frame(type_: str, data: Any) -> bytes:
    return f"event: {type_}\ndata: {dumps(data)}\n\n".encode()


def feed_response(
    feed: TurnFeed,
    snapshot: Callable[[], Awaitable[list[TurnRecord]]],
    accepts: Callable[[TurnRecord], bool],
    *,
    heartbeat_s: float,
    retry_ms: int,
    closing: asyncio.Event,
) -> StreamingResponse:
    watcher = feed.watch(accepts)  # before the snapshot: a change in between is not lost

    async def frames() -> AsyncIterator[bytes]:
        with watcher:
            yield f"retry: {retry_ms}\n\n".encode()
            records = await snapshot()
            yield _frame("turns", {"turns": [r.public() for r in records]})
            while not closing.is_set():
                changed = await watcher.next(heartbeat_s)
                if watcher.overflowed:
                    watcher.overflowed = False
                    yield _frame(
                        "reset", {"reason": "this reader fell behind; read GET /turns again"}
                    )
                    continue
                if not changed:
                    yield b": hb\n\n"
                for record in changed:
                    yield _frame("turn", record.public())

    headers = {k.decode(): v.decode() for k, v in STREAM_HEADERS}
    return StreamingResponse(frames(), media_type=SSE, headers=headers)
