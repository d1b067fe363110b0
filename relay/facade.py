"""The ``Relay``: the few objects a user wires into an app (DESIGN.md §2).

```python
relay = Relay.from_env()
provider.add_span_processor(relay.span_processor)
app.include_router(relay.router)
```

plus ``await relay.start()`` / ``await relay.stop()`` in the app's lifespan (binds the
processor to the running loop, marks turns that died with the last process).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from relay import readiness
from relay.bus import MemoryBus, open_bus
from relay.bus.static import StaticReader
from relay.events import RUN_TERMINAL, Event
from relay.export import add_otlp_export
from relay.limits import RateLimit, no_limit
from relay.messages import SQLiteMessageStore
from relay.metrics import CountingExporter, RelayMetrics, prometheus_provider
from relay.negotiation import NDJSON
from relay.processor import RelaySpanProcessor
from relay.recovery import terminal_event
from relay.response import ChatResponse
from relay.runs import RunManager
from relay.settings import RelaySettings
from relay.store import SpanStore, open_store
from relay.store.exporter import add_span_store
from relay.streaming import MAX_BATCH, Encoder, EventStream, NDJSONEncoder, SSEEncoder
from relay.turns import SQLiteTurnStore, TurnRecord
from relay.turns_postgres import open_turn_store

if TYPE_CHECKING:
    from relay.agui import AGUIEncoder
    from relay.receiver import OTLPReceiver
    from relay.receiver.grpc import GrpcReceiver

log = logging.getLogger("relay")


class Relay:
    def __init__(self, settings: RelaySettings) -> None:
        self.settings = settings
        self.bus: MemoryBus = open_bus(settings)  # memory, or Redis Streams
        self.span_processor = RelaySpanProcessor(self._publish)
        self.metrics = RelayMetrics(
            prometheus_provider() if settings.metrics == "prometheus" else None,
            dropped=lambda: self.span_processor.dropped, bus=self.bus)
        self.turns: SQLiteTurnStore = open_turn_store(settings)  # SQLite or Postgres
        self.messages = SQLiteMessageStore(settings.data_dir / "messages.db")
        #: finished spans, for replay (RELAY_STORE); written by add_span_store's processor
        self.store: SpanStore = open_store(settings)
        self.store_processor: BatchSpanProcessor | None = None
        self.runs = RunManager(self.bus, self.turns, self.span_processor,
                               disconnect_grace_s=settings.disconnect_grace_s,
                               thread_policy=settings.thread_policy,
                               turn_timeout_s=settings.turn_timeout_s)
        #: set when the server begins to shut down: open streams tell clients to reconnect
        self.closing = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        #: the compiled graph's topology, served at GET /graph (set by the app)
        self.topology: dict[str, Any] | None = None
        self._router: APIRouter | None = None
        self.require_token = _token_dependency(settings.api_token)
        #: a dependency for the run endpoints: RELAY_RATE_LIMIT per client, or nothing
        self.rate_limit = RateLimit.parse(settings.rate_limit) if settings.rate_limit \
            else no_limit
        # -- the OTLP receivers ------------------------------------------------------------
        #: the OTLP receiver (RELAY_OTLP_HTTP / RELAY_OTLP_GRPC), or None when both are off
        self.receiver: OTLPReceiver | None = None
        if settings.otlp_http or settings.otlp_grpc:
            from relay.receiver import OTLPReceiver

            self.receiver = OTLPReceiver(
                self, pending_spans=settings.otlp_pending_spans,
                pending_s=settings.otlp_pending_s, dedup_spans=settings.otlp_dedup_spans,
                store_backlog=settings.otlp_store_backlog)
        self.grpc_receiver: GrpcReceiver | None = None
        self.require_bus = _bus_dependency(self)
        #: what GET /readyz checks besides the relay's own stores (add_readiness_check)
        self._readiness_checks: list[tuple[str, readiness.Check]] = []

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Relay:
        return cls(RelaySettings.from_env(environ))

    @property
    def router(self) -> APIRouter:
        if self._router is None:
            from relay.http import build_router

            self._router = build_router(self)
        return self._router

    def install(self, app: Any) -> None:
        """Middleware the relay's routes rely on: CORS when RELAY_CORS_ORIGINS lists
        origins (off by default), ``X-Content-Type-Options: nosniff`` on every answer, and
        ``503 store_unavailable`` (JSON, ``Retry-After``) for every route, the app's own
        included, that needs a database while it is away (relay/pg_pool.py)."""
        from starlette.middleware.cors import CORSMiddleware

        from relay.errors import StoreUnavailable, store_unavailable_handler

        app.add_exception_handler(StoreUnavailable, store_unavailable_handler)
        try:  # a driver error that no store translated is still a 503, not a bare 500
            import psycopg

            app.add_exception_handler(psycopg.OperationalError, store_unavailable_handler)
        except ImportError:  # pragma: no cover - psycopg is only needed for PostgreSQL
            pass
        app.add_middleware(NoSniff)
        if self.settings.cors_origins:
            app.add_middleware(CORSMiddleware, allow_origins=list(self.settings.cors_origins),
                               allow_methods=["GET", "POST"],
                               allow_headers=["Authorization", "Content-Type", "Accept",
                                              "Last-Event-ID", "Prefer"],
                               expose_headers=["Location"])

    def add_otlp_export(self, provider: TracerProvider,
                        environ: Mapping[str, str] | None = None) -> object | None:
        return add_otlp_export(provider, self.settings.capture_content, environ,
                               wrap=lambda e: CountingExporter(e, self.metrics))

    def _publish(self, event: Event) -> Event:
        stamped = self.bus.publish(event)
        self.metrics.published(stamped)
        return stamped

    def add_span_store(self, provider: TracerProvider) -> BatchSpanProcessor:
        """Persist ``provider``'s finished spans to :attr:`store` (a BatchSpanProcessor:
        its own thread, 100 ms schedule delay), so that turns can be replayed."""
        if self.store_processor is None:
            self.store_processor = add_span_store(provider, self.store)
        return self.store_processor

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.span_processor.bind(self._loop)
        await self._start_receivers()
        died = await self.turns.mark_interrupted()
        if died:
            log.warning("relay: %d turn(s) were running when the last process stopped; "
                        "marked interrupted", died)

    def begin_shutdown(self) -> None:
        """The server is going down (SIGTERM): every open stream ends with a ``reconnect``
        frame. Safe to call from a signal handler or any thread."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.closing.set)

    async def stop(self) -> None:
        self.closing.set()
        await self.runs.shutdown(self.settings.shutdown_grace_s)
        self.span_processor.unbind()
        self.turns.close()
        self.messages.close()
        if self.store_processor is not None:  # flush what is pending, then close the store
            await asyncio.to_thread(self.store_processor.shutdown)
        await self._stop_receivers()  # the receiver's queue reaches the store before it closes
        await asyncio.to_thread(self.store.close)

    def add_readiness_check(self, name: str, check: readiness.Check) -> None:
        """Make GET /readyz depend on ``check`` too: an async callable that raises when
        something the app owns (its LangGraph checkpointer) cannot serve a request. It is
        a problem while it raises or takes over READINESS_TIMEOUT_S (relay/readiness.py)."""
        self._readiness_checks.append((name, check))

    async def readiness_problems(self) -> list[str]:
        problems = []
        if self.span_processor._loop is None:
            problems.append("the span processor is not bound to the event loop")
        problems += await readiness.problems([*readiness.store_checks(self.turns, self.store),
                                              *self._readiness_checks])
        bus_problems = getattr(self.bus, "problems", None)
        if bus_problems is not None:
            problems += await bus_problems()
        return problems

    # -- receivers and the shared bus -----------------------------------------------------

    async def _start_receivers(self) -> None:
        start = getattr(self.bus, "start", None)
        if start is not None:
            await start()
        if self.receiver is not None:
            await self.receiver.start()
        if self.settings.otlp_grpc:
            from relay.receiver.grpc import GrpcReceiver

            self.grpc_receiver = GrpcReceiver(self, self.settings.otlp_grpc)
            await self.grpc_receiver.start()

    async def _stop_receivers(self) -> None:
        if self.grpc_receiver is not None:
            await self.grpc_receiver.stop()
            self.grpc_receiver = None
        if self.receiver is not None:
            await self.receiver.stop()
        stop = getattr(self.bus, "stop", None)
        if stop is not None:
            await stop()

    def bus_problem(self) -> str | None:
        """Why the (shared) bus cannot take a new turn now, or None."""
        unavailable = getattr(self.bus, "unavailable", None)
        return unavailable() if unavailable is not None else None

    # -- streams ------------------------------------------------------------------------

    def stream(self, turn_id: str, after: int, media: str, *,
               stop_at: frozenset[str] = RUN_TERMINAL,
               on_disconnect: str = "cancel",
               encoder: Encoder | AGUIEncoder | None = None) -> EventStream:
        """A response that streams ``turn_id``'s log after ``after`` until ``stop_at``
        (``encoder``: another frame format, e.g. :class:`relay.agui.AGUIEncoder`)."""
        reader = self.bus.reader(turn_id, after)
        if encoder is None:
            encoder = NDJSONEncoder() if media == NDJSON else SSEEncoder(self.settings.retry_ms)
        self.runs.reader_attached(turn_id)
        self.metrics.stream_opened()
        stream = EventStream(reader, encoder, stop_at=stop_at,
                             heartbeat_s=self.settings.heartbeat_s,
                             send_timeout_s=self.settings.send_timeout_s,
                             max_duration_s=self.settings.server_timeout_s,
                             closing=self.closing)

        def closed(completed: bool) -> None:
            self.metrics.stream_closed(stream.outcome)
            self.runs.reader_left(turn_id, completed, on_disconnect)

        stream.on_close = closed
        return stream

    def tail_stream(self, turn_id: str, after: int, media: str, *,
                    encoder: Encoder | AGUIEncoder | None = None) -> EventStream:
        """The rest of a finished turn's log after ``after`` (a reader that has the
        terminal event but not the ``message_saved`` after it), then the end."""
        reader = self.bus.reader(turn_id, after)
        try:
            rest = reader.take(MAX_BATCH)
        finally:
            reader.close()
        if encoder is None:
            encoder = NDJSONEncoder() if media == NDJSON else SSEEncoder(self.settings.retry_ms)
        return EventStream(StaticReader(rest, after), encoder, stop_at=frozenset(),
                           heartbeat_s=self.settings.heartbeat_s,
                           send_timeout_s=self.settings.send_timeout_s)

    async def settle_outcome(self, record: TurnRecord, after: int) -> TurnRecord:
        """A turn that died with its process has no terminal event in its log: a reader
        gets one made from its record, under the next seq after both the record's and
        the reader's cursor, and that seq is recorded. A reader at that seq has it (204);
        one before it gets the same event; one past it (it had read further while the
        process lived) gets a new one under its next seq, which is then recorded."""
        if record.status != "interrupted" or (record.response and after <= record.last_seq):
            return record
        event = terminal_event(dataclasses.replace(record, response=None), after)
        response = ChatResponse(record.thread_id, record.turn_id,
                                record.root_trace_id or "", "interrupted",
                                answer=str(event.fields["message"]))
        record.last_seq, record.response = event.seq, response.to_json()
        await self.turns.update(record.turn_id, last_seq=record.last_seq,
                                response=record.response)
        return record

    @staticmethod
    def outcome_delivered(record: TurnRecord, after: int) -> bool:
        """Has a reader at ``after`` already got the terminal event of ``record``'s ended
        turn (:meth:`settle_outcome` first)? Then the answer is 204, not the end again."""
        return record.last_seq > 0 and after >= record.last_seq

    def outcome_stream(self, record: TurnRecord, after: int, media: str, *,
                       encoder: Encoder | AGUIEncoder | None = None) -> EventStream:
        """A stream of just the turn's terminal event, rebuilt from its record (the log is
        gone: a restart, or retention)."""
        reader = StaticReader([terminal_event(record, after)])
        if encoder is None:
            encoder = NDJSONEncoder() if media == NDJSON else SSEEncoder(self.settings.retry_ms)
        return EventStream(reader, encoder, stop_at=RUN_TERMINAL,
                           heartbeat_s=self.settings.heartbeat_s,
                           send_timeout_s=self.settings.send_timeout_s)


def _bus_dependency(relay: Relay):
    """A dependency for endpoints that need the bus: 503 while the shared bus is down
    (a turn started then could not be streamed by the other instances)."""
    from relay.errors import ApiError

    async def require_bus() -> None:
        problem = relay.bus_problem()
        if problem is not None:
            raise ApiError(503, "bus_unavailable",
                           f"The relay's shared event bus is unavailable ({problem}); "
                           "retry shortly.", headers={"Retry-After": "2"})

    return require_bus


def _token_dependency(token: str | None):
    from relay.http import token_checker

    return token_checker(token)


class NoSniff:
    """ASGI middleware: ``X-Content-Type-Options: nosniff`` on every response, so no
    answer (an error that quotes input, say) is ever sniffed into HTML."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", [])
                           if h[0].lower() != b"x-content-type-options"]
                headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)
