"""The streams of a turn's log, as responses: the live one (:meth:`Streams.live`), the
rest of a finished log (:meth:`Streams.tail`), and the end of a turn whose log is gone,
rebuilt from its record (:meth:`Streams.outcome`). One place that knows the settings
every stream runs with (heartbeats, send timeout, time limit, shutdown) and that tells
its owner when a reader comes and goes (the run manager cancels an unwatched run)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from relay.bus.base import Bus, BusLost, BusUnavailable, CursorExpired
from relay.bus.static import StaticReader
from relay.delivery.negotiation import NDJSON
from relay.delivery.streaming import (
    MAX_BATCH,
    Encoder,
    EventStream,
    Frames,
    NDJSONEncoder,
    SSEEncoder,
)
from relay.events import RUN_TERMINAL, Event
from relay.settings import RelaySettings

#: a reader came (the turn id)
Attached = Callable[[str], None]
#: a reader left: (turn id, it ended at its terminal event, on_disconnect, stream outcome)
Detached = Callable[[str, bool, str, str], None]


class Streams:
    def __init__(
        self,
        bus: Bus,
        settings: RelaySettings,
        closing: asyncio.Event,
        *,
        attached: Attached,
        detached: Detached,
    ) -> None:
        self.bus = bus
        self.settings = settings
        self.closing = closing
        self._attached = attached
        self._detached = detached

    def encoder(self, media: str) -> Encoder:
        return NDJSONEncoder() if media == NDJSON else SSEEncoder(self.settings.retry_ms)

    def live(
        self,
        turn_id: str,
        after: int,
        media: str,
        *,
        stop_at: frozenset[str] = RUN_TERMINAL,
        on_disconnect: str = "cancel",
        encoder: Encoder | None = None,
        frames: Frames | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> EventStream:
        """``turn_id``'s log after ``after``, live, until an event in ``stop_at``
        (``encoder``: another frame format, e.g. :class:`relay.delivery.agui.AGUIEncoder`;
        ``frames``: a batch's frames made with I/O, see :class:`EventStream`; ``headers``:
        more response headers)."""
        reader = self.bus.reader(turn_id, after)
        self._attached(turn_id)
        stream = EventStream(
            reader,
            encoder or self.encoder(media),
            stop_at=stop_at,
            heartbeat_s=self.settings.heartbeat_s,
            send_timeout_s=self.settings.send_timeout_s,
            max_duration_s=self.settings.server_timeout_s,
            closing=self.closing,
            extra_headers=headers,
            frames=frames,
        )

        def closed(completed: bool) -> None:
            self._detached(turn_id, completed, on_disconnect, stream.outcome)

        stream.on_close = closed
        return stream

    async def tail(
        self, turn_id: str, after: int, media: str, *, encoder: Encoder | None = None
    ) -> EventStream | None:
        """The rest of a finished turn's log after ``after`` (a reader that has the
        terminal event but not the ``message_saved`` after it), then the end; None when
        nothing is left (the log holds no more: the answer is 204). A log read over I/O
        (another instance's turn on Redis) is read once, not followed."""
        reader = self.bus.reader(turn_id, after)
        try:
            rest = reader.take(MAX_BATCH)
            if not rest and await reader.wait(0):
                rest = reader.take(MAX_BATCH)
        except (BusLost, BusUnavailable, CursorExpired):
            rest = []
        finally:
            reader.close()
        return self.fixed(rest, after, media, encoder=encoder) if rest else None

    def outcome(
        self, terminal: Event, after: int, media: str, *, encoder: Encoder | None = None
    ) -> EventStream:
        """Just the turn's terminal event (rebuilt from its record: the log is gone)."""
        return self.fixed([terminal], after, media, encoder=encoder)

    def fixed(
        self,
        events: list[Event],
        after: int,
        media: str,
        *,
        encoder: Encoder | None = None,
        frames: Frames | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> EventStream:
        return EventStream(
            StaticReader(events, after),
            encoder or self.encoder(media),
            stop_at=frozenset(),
            heartbeat_s=self.settings.heartbeat_s,
            send_timeout_s=self.settings.send_timeout_s,
            extra_headers=headers,
            frames=frames,
        )
