"""The ``Relay``: the few objects a user wires into an app (DESIGN.md §2): settings, the
bus, the stores, the runs, the span processor and the tracer provider that feeds it. No
HTTP of its own: :meth:`mount`, :attr:`router`, :meth:`install` and the dependencies
hand the parts to :mod:`relay.http`.

```python
relay = Relay.from_env()
agent = GraphAgent(graph, name="research")
app = FastAPI(lifespan=relay.lifespan)
relay.mount(app, agent)        # /chat, /chat/resume, /agui, /graphs, /turns..., the SPA
```

:meth:`lifespan` opens the LangGraph checkpointer and store (SQLite, or PostgreSQL) for the
mounted agents, starts the relay (binds the processor to the running loop, marks turns that died
with the last process, starts the work of the mounted routes, :attr:`lifecycles`) and
stops it. An app that serves no graph of ours includes :attr:`router`, calls
:meth:`install`, and feeds its own spans to :attr:`span_processor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from relay import readiness
from relay.auth import open_authenticator, open_langgraph_auth
from relay.bus import Bus, open_bus, open_cancels, open_handoffs, open_turn_changes
from relay.delivery.streaming import Encoder, EventStream
from relay.delivery.streams import Streams
from relay.events import GRAPH_TOPOLOGY, RUN_TERMINAL, TURN_TERMINAL, Event
from relay.export.metrics import CountingExporter, RelayMetrics, prometheus_provider
from relay.export.otlp import add_otlp_export
from relay.ingest.processor import RelaySpanProcessor
from relay.langgraph.checkpointer_config import CheckpointerOptions, checkpointer_options
from relay.langgraph.checkpoints import check_checkpointer, open_checkpointer
from relay.langgraph.store import StoreOptions, check_store, store_options
from relay.langgraph.store import check_backend as check_store_backend
from relay.langgraph.store import open_store as open_graph_store
from relay.langgraph.thread_ttl import ThreadGate, ThreadSweeper
from relay.lifecycle import Lifecycles
from relay.settings import RelaySettings
from relay.startup import ServedGraph, log_served
from relay.store import SpanStore, open_store
from relay.store.exporter import add_span_store
from relay.turns.feed import TurnFeed, WatchedTurns
from relay.turns.foreign import NotedRuns, RecordWriter
from relay.turns.leases import Leases
from relay.turns.messages import MessageStore
from relay.turns.postgres import open_turn_store
from relay.turns.postgres_messages import open_message_store
from relay.turns.records import TurnStore
from relay.turns.recovering import Recoverable, TurnRecovery
from relay.turns.runs import RunManager
from relay.turns.starting import StartLocks

if TYPE_CHECKING:
    from relay.auth.langgraph_auth import LangGraphAuth
    from relay.bus.redis_cancels import CancelChannel
    from relay.bus.redis_handoffs import HandoffChannel
    from relay.bus.redis_turn_changes import TurnChanges
    from relay.ingest.grpc import GrpcReceiver
    from relay.ingest.receiver import OTLPReceiver
    from relay.langgraph.agent import GraphAgent

log = logging.getLogger("relay")


class Relay:
    """One relay: the parts that turn a graph's spans into turns a client can follow.

    It owns the bus (each turn's event log), the turn and message records, the span
    store (for replay), the runs (:class:`relay.turns.runs.RunManager`), the span
    processor that feeds the bus and, when RELAY_OTLP_HTTP / RELAY_OTLP_GRPC ask for
    them, the OTLP receivers. It serves no HTTP itself: :meth:`mount` puts the routes of
    :mod:`relay.http` on an app over these parts, and :meth:`lifespan` starts and stops
    them with the app. Make one per process, from the environment or from settings::

        relay = Relay.from_env()  # RELAY_* / OTEL_*; or Relay(RelaySettings(...))
        app = FastAPI(lifespan=relay.lifespan)
        relay.mount(app, GraphAgent(graph, name="research"))

        async for event in relay.subscribe(turn_id):  # a turn's events, in-process
            ...

    An app that drives its graph without a :class:`GraphAgent` uses the parts directly:
    it includes :attr:`router`, calls :meth:`install`, starts its runs with
    ``relay.runs.start(...)`` and opens their spans with a tracer of
    :attr:`tracer_provider` (or adds :attr:`span_processor` to a provider of its own).
    """

    def __init__(
        self,
        settings: RelaySettings,
        environ: Mapping[str, str] | None = None,
        auth: Any = None,
        *,
        store: Mapping[str, Any] | StoreOptions | None = None,
        checkpointer: Mapping[str, Any] | CheckpointerOptions | None = None,
    ) -> None:
        from relay.http.identity import identity_dependency, token_checker
        from relay.http.limits import RateLimit, no_limit
        from relay.http.middleware import bus_dependency

        self.settings = settings
        #: the environment it was made from (the checkpointer's and OTLP export's OTEL_*)
        self.environ = dict(os.environ if environ is None else environ)
        #: LangGraph's own ``Auth`` (``auth``: langgraph.json's, or the app's), else None;
        #: checked before anything is opened (a ConfigError when it cannot be honoured)
        self.langgraph_auth: LangGraphAuth | None = (
            None if auth is None else open_langgraph_auth(auth, settings, self.environ)
        )
        #: the LangGraph store's ``index`` and ``ttl`` and the checkpointer's ``serde``
        #: (langgraph.json's ``store`` and ``checkpointer`` sections; ConfigError if wrong)
        self.store_options = store if isinstance(store, StoreOptions) else store_options(store)
        check_store_backend(settings, self.store_options)
        self.checkpointer_options = (
            checkpointer
            if isinstance(checkpointer, CheckpointerOptions)
            else checkpointer_options(checkpointer)
        )
        #: the LangGraph store of the mounted graphs compiled without one (long-term
        #: memory; relay/langgraph/store.py): opened by :meth:`lifespan`, else None
        self.graph_store: Any = None
        #: a thread's runs and its deletion by the checkpointer's TTL, apart in this process
        self.threads = ThreadGate()
        #: checkpointer.ttl's sweeper (relay/langgraph/thread_ttl.py), while the app runs
        self.thread_sweeper: ThreadSweeper | None = None
        self.bus: Bus = open_bus(settings)  # memory, or Redis Streams
        self.span_processor = RelaySpanProcessor(self._publish)
        self.span_processor.state.resume_route = self.resume_route
        #: runs of other instrumentations in the app's provider (OpenInference in-process):
        #: the store's index and their turn records, as the receiver keeps them
        self.span_processor.state.notes = []
        self._noted = NotedRuns(own_runs=False)  # foreign runs only: ours write their records
        self.metrics = RelayMetrics(
            prometheus_provider() if settings.metrics == "prometheus" else None,
            dropped=lambda: self.span_processor.dropped,
            bus=self.bus,
        )
        #: every change of a turn's status, for watchers (GET /turns as a stream, ?wait=)
        self.feed = TurnFeed()
        watched = WatchedTurns(open_turn_store(settings), self.feed)
        self.turns: TurnStore = watched
        #: the other instances' turn changes, for this one's watchers (a shared Redis bus)
        self.turn_changes: TurnChanges | None = open_turn_changes(settings, watched.heard)
        if self.turn_changes is not None:
            watched.announce = self.turn_changes.announce
        self._foreign_records = RecordWriter(self.turns, self._noted.messages, self._noted.users)
        self.messages: MessageStore = open_message_store(settings)  # saved answers
        #: finished spans, for replay (RELAY_STORE); written by add_span_store's processor
        self.store: SpanStore = open_store(settings)
        self.store_processor: BatchSpanProcessor | None = None
        self.runs = RunManager(
            self.bus,
            self.turns,
            self.span_processor.flush,
            disconnect_grace_s=settings.disconnect_grace_s,
            thread_policy=settings.thread_policy,
            turn_timeout_s=settings.turn_timeout_s,
            lease_s=settings.lease_s,
        )
        #: the mounted graphs' admissions, by name: what takes up a claimed turn again
        self.recoverables: dict[str, Recoverable] = {}
        #: the runs' leases: renewed here, and the turns of gone instances taken over
        #: (recovered from their checkpoint when that is safe, else ended)
        self.leases = Leases(
            self.turns,
            self.runs,
            self.bus,
            lease_s=settings.lease_s,
            shared=settings.store.startswith(("postgresql://", "postgres://")),
            claimed=self.metrics.turn_recovered,
            recover=TurnRecovery(
                self.recoverables,
                self.bus,
                policy=settings.recovery,
                max_attempts=settings.recovery_max_attempts,
            ),
        )
        #: set when the server begins to shut down: open streams tell clients to reconnect
        self.closing = asyncio.Event()
        self.streams = Streams(
            self.bus,
            settings,
            self.closing,
            attached=self._reader_attached,
            detached=self._reader_left,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        #: the first served graph's topology, at GET /graph (set by mount)
        self.topology: dict[str, Any] | None = None
        #: the mounted graphs, by name (GET /graphs)
        self.agents: dict[str, GraphAgent] = {}
        self._provider: TracerProvider | None = None
        self._starting = StartLocks()  # /chat, /agui: check-and-start per turn and thread
        self._router: Any = None  # a FastAPI APIRouter, made on first use
        #: dependencies for the app's routes: the bearer token (RELAY_API_TOKEN), the
        #: rate limit of the run endpoints (RELAY_RATE_LIMIT), the shared bus being up
        self.require_token: Callable[..., Awaitable[None]] = token_checker(settings.api_token)
        #: who may call, as GET /config tells the SPA: RELAY_AUTH's mode, or ``langgraph``
        self.auth_mode = settings.auth
        #: who a request acts for (RELAY_AUTH, or ``auth``; relay/auth): every API route's
        #: dependency
        self.identify: Callable[..., Awaitable[Any]]
        if self.langgraph_auth is None:
            self.identify = identity_dependency(open_authenticator(settings))
        else:
            from relay.http.langgraph_auth import langgraph_identity

            self.auth_mode = self.langgraph_auth.mode
            self.identify = langgraph_identity(self.langgraph_auth, settings.max_body_bytes)
        self.rate_limit = RateLimit.parse(settings.rate_limit) if settings.rate_limit else no_limit
        self.require_bus = bus_dependency(self.bus_problem)
        # -- the OTLP receivers ------------------------------------------------------------
        #: the OTLP receiver (RELAY_OTLP_HTTP / RELAY_OTLP_GRPC), or None when both are off
        self.receiver: OTLPReceiver | None = None
        #: stray parts of received runs, to and from the instances sharing the Redis bus
        #: (a run's spans split over replicas: relay/ingest/strays.py)
        self.handoffs: HandoffChannel | None = None
        if settings.otlp_http or settings.otlp_grpc:
            from relay.ingest.receiver import OTLPReceiver

            self.handoffs = open_handoffs(settings)
            self.receiver = OTLPReceiver(
                self.bus,
                self.turns,
                self.store,
                self.runs.running,
                pending_spans=settings.otlp_pending_spans,
                pending_s=settings.otlp_pending_s,
                dedup_spans=settings.otlp_dedup_spans,
                store_backlog=settings.otlp_store_backlog,
                settle_s=settings.otlp_settle_ms / 1000,
                resume_route=self.resume_route,
                handoffs=self.handoffs,
            )
            self.metrics.observe_receiver(lambda: self.receiver.stats if self.receiver else {})
        self.grpc_receiver: GrpcReceiver | None = None
        #: cancel requests to and from the instances sharing the Redis bus (the turn's owner
        #: cancels it, whichever instance the request lands on)
        self.cancels: CancelChannel | None = open_cancels(settings, self.runs.cancel)
        #: what GET /readyz checks besides the relay's own stores (add_readiness_check)
        self._readiness_checks: list[tuple[str, readiness.Check]] = []
        self._tasks: set[asyncio.Task[None]] = set()  # background work (_background)
        self.lifecycles = Lifecycles()  # what mounted routes keep beside their requests
        #: the CORS policy :meth:`install` applies instead of RELAY_CORS_ORIGINS' own
        #: (langgraph.json's ``http.cors``: CORSMiddleware's keyword arguments), or None
        self.cors: Mapping[str, Any] | None = None
        #: the checkpointer :meth:`lifespan` opened for the mounted graphs (None before)
        self.checkpointer: Any = None

    def resume_route(self, graph_id: str) -> str | None:
        """The resume route this server offers for a run of ``graph_id`` (what a
        ``paused`` event's hint names, live, received or replayed): that graph's, when it
        is mounted here; else none (a relay-only server; the agent runs elsewhere)."""
        return f"/graphs/{graph_id}/chat/resume" if graph_id in self.agents else None

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        auth: Any = None,
        *,
        store: Mapping[str, Any] | StoreOptions | None = None,
        checkpointer: Mapping[str, Any] | CheckpointerOptions | None = None,
        env_file: str | os.PathLike[str] | None = None,
    ) -> Relay:
        """A relay from RELAY_* / OTEL_* (``environ``, default the process's); ``auth``: a
        ``langgraph_sdk.Auth`` that decides who is asking and what they may do, as in
        langgraph.json (README "langgraph.json's auth"); ``store`` and ``checkpointer``:
        langgraph.json's sections of those names (``{"index": {...}, "ttl": {...}}``,
        ``{"ttl": {...}, "serde": {...}}``); ``env_file``: a ``.env`` file read first into
        the process environment (and over ``environ``), its values winning, as ``langgraph
        dev`` reads langgraph.json's ``env`` (relay/envfile.py)."""
        if env_file is not None:
            from relay.envfile import load_env_file

            values = load_env_file(env_file)
            environ = None if environ is None else {**environ, **values}
        return cls(
            RelaySettings.from_env(environ),
            environ,
            auth,
            store=store,
            checkpointer=checkpointer,
        )

    # -- graphs -------------------------------------------------------------------------

    def mount(self, app: Any, *agents: GraphAgent) -> None:
        """Serve ``agents`` on ``app`` (a FastAPI app made with ``lifespan=relay.lifespan``):
        ``/graphs/{name}/chat``, ``/chat/resume`` and ``/agui`` for each, the first also
        at ``/chat``, ``/chat/resume``, ``/agui``; and, on the first call, the turn API,
        ``GET /graphs``, the SPA and the error answers (:meth:`install`)."""
        from relay.http.graphs import mount_agents
        from relay.langgraph.agent import GraphAgent

        for agent in agents:
            if not isinstance(agent, GraphAgent):
                raise TypeError(
                    f"relay.mount takes GraphAgent(graph, ...) objects, not {type(agent).__name__}"
                )
            if agent.name in self.agents:
                raise ValueError(
                    f"a graph named {agent.name!r} is already mounted; give "
                    "each GraphAgent its own name"
                )
        first = not self.agents
        for agent in agents:
            self.agents[agent.name] = agent
        if self.topology is None and agents:
            self.topology = agents[0].topology
        if not getattr(app.state, "relay_mounted", False):
            app.state.relay = self
            app.state.relay_mounted = True
            app.include_router(self.router)
            self.install(app)
        mount_agents(app, self, agents, self._starting, first)

    @property
    def tracer_provider(self) -> TracerProvider:
        """The tracer provider of the mounted graphs' spans (made on first use): the span
        processor, the span store (for replay) and the OTLP export (OTEL_EXPORTER_OTLP_*),
        with ``service.name`` from OTEL_SERVICE_NAME (default ``span-relay``)."""
        if self._provider is None:
            service = self.environ.get("OTEL_SERVICE_NAME") or "span-relay"
            provider = TracerProvider(resource=Resource.create({"service.name": service}))
            provider.add_span_processor(self.span_processor)
            self.add_span_store(provider)
            self.add_otlp_export(provider, self.environ)
            self._provider = provider
        return self._provider

    def tracer(self, name: str = "relay") -> Tracer:
        """A tracer of :attr:`tracer_provider`: for spans a graph's own code opens."""
        return self.tracer_provider.get_tracer(name)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        """The app's lifespan (``FastAPI(lifespan=relay.lifespan)``): the checkpointer of
        the mounted graphs (RELAY_CHECKPOINTER: SQLite under RELAY_DATA_DIR, or
        PostgreSQL) and their LangGraph store (RELAY_STORE: the same), the checkpointer's
        TTL sweeper (``checkpointer.ttl``), :meth:`start`, and at the end :meth:`stop`."""
        async with contextlib.AsyncExitStack() as stack:
            memory = None
            if self.agents:
                saver = await stack.enter_async_context(
                    open_checkpointer(self.settings, self.environ, self.checkpointer_options.serde)
                )
                self.checkpointer = saver
                # /readyz covers the checkpointer too: every /chat reads it first
                self.add_readiness_check("checkpoints", lambda: check_checkpointer(saver))
                if any(getattr(a.graph, "store", None) is None for a in self.agents.values()):
                    memory = await stack.enter_async_context(
                        open_graph_store(self.settings, self.store_options)
                    )
                    self.add_readiness_check("memory store", lambda: check_store(memory))
                self.graph_store = memory
                ttl = self.checkpointer_options.ttl
                if ttl is not None:  # checkpointer.ttl: threads idle for longer are deleted
                    sweeper = ThreadSweeper(saver, ttl, self.threads, self.turns.lock_thread)
                    self.thread_sweeper = await stack.enter_async_context(sweeper.running())
                tracer = self.tracer("span-relay")
                for agent in self.agents.values():
                    agent.bind(
                        tracer=tracer,
                        turns=self.turns,
                        messages=self.messages,
                        add_event=self.span_processor.add_event,
                        turn_timeout_s=self.settings.turn_timeout_s,
                        tool_timeout_s=self.settings.tool_timeout_s,
                        custom_max_bytes=self.settings.custom_event_max_bytes,
                        checkpointer=saver,
                        store=memory,
                        threads=self.threads,
                    )
            await self.start()
            try:
                yield
            finally:
                await self.stop()
                if self._provider is not None:
                    await asyncio.to_thread(self._provider.shutdown)

    # -- the HTTP surface (relay.http), from the parts -------------------------------------

    @property
    def router(self) -> Any:
        """The turn API's routes (relay/http/turns.py) over this relay's parts: a FastAPI
        ``APIRouter`` for ``app.include_router``."""
        if self._router is None:
            from relay.http.turns import build_router

            self._router = build_router(self)
        return self._router

    def install(self, app: Any) -> None:
        """What the relay's routes rely on, on ``app``: the error answers (``{"error":
        {"code", "message"}}``; ``503 store_unavailable`` with ``Retry-After`` for every
        route, the app's own included, that needs a database while it is away),
        ``X-Content-Type-Options: nosniff`` on every answer, CORS when
        RELAY_CORS_ORIGINS lists origins (off by default) or :attr:`cors` is set, and
        ``/docs`` and ``/redoc`` that work offline: the app's own pages (its ``docs_url``,
        ``redoc_url``) are replaced by ones whose assets the relay serves, and its
        ``/openapi.json`` by one behind the API's credential (relay/http/docs.py)."""
        from relay.http.docs import install_docs
        from relay.http.errors import install_error_handlers
        from relay.http.middleware import install_middleware

        install_error_handlers(app)
        install_middleware(app, self.settings, self.cors)
        install_docs(app, self.identify)

    def add_otlp_export(
        self, provider: TracerProvider, environ: Mapping[str, str] | None = None
    ) -> object | None:
        return add_otlp_export(
            provider,
            self.settings.capture_content,
            environ,
            wrap=lambda e: CountingExporter(e, self.metrics),
        )

    def _publish(self, event: Event) -> Event:
        stamped = self.bus.publish(event)
        self.metrics.published(stamped)
        notes = self.span_processor.state.notes
        if notes:  # a foreign run began or ended in the app's provider
            entries = self._noted.take(notes)
            if entries:
                self._background(asyncio.to_thread(self.store.index_runs, entries))
        if stamped.turn_id in self._noted.foreign and (
            stamped.type == GRAPH_TOPOLOGY or stamped.is_run_terminal
        ):
            self._foreign_records.put([stamped])
        return stamped

    def _background(self, work: Any) -> None:
        """Run ``work`` (a coroutine) on the loop; a failure is logged, never raised."""

        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("relay: could not index a foreign run")

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
        # and takes up (or ends) what a dead predecessor left running
        died = await self.leases.start()
        if died:
            log.warning(
                "relay: %d turn(s) were running when their process stopped; taken over",
                died,
            )
        self.lifecycles.start()
        log_served(
            self.settings,
            self.environ,
            self._served(),
            routes=self._router is not None,
            auth_mode=self.auth_mode,
            memory_store=self.graph_store is not None,
        )

    def _served(self) -> list[ServedGraph]:
        """The mounted graphs for the start-up log, each with its own checkpointer when it
        keeps one (a graph compiled with one: :meth:`GraphAgent.bind` leaves it)."""
        graphs = []
        for agent in self.agents.values():
            saver = getattr(agent.graph.checkpointer, "inner", agent.graph.checkpointer)
            if saver is not None and saver is self.checkpointer:
                graphs.append(ServedGraph(agent.name))
            elif saver:
                graphs.append(ServedGraph(agent.name, f"its own {type(saver).__name__}"))
            else:
                graphs.append(ServedGraph(agent.name, "no checkpointer"))
        return graphs

    def begin_shutdown(self) -> None:
        """The server is going down (SIGTERM): every open stream ends with a ``reconnect``
        frame. Safe to call from a signal handler or any thread."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.closing.set)

    async def stop(self) -> None:
        self.closing.set()
        await self.lifecycles.stop()
        await self.runs.shutdown(self.settings.shutdown_grace_s)
        await self.leases.stop()
        self.span_processor.unbind()
        await self._foreign_records.drain(2.0)  # in-process foreign turns' records
        if self._tasks:  # and their index
            await asyncio.wait(set(self._tasks), timeout=2.0)
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
        problems += await readiness.problems(
            [*readiness.store_checks(self.turns, self.store), *self._readiness_checks]
        )
        problems += await self.bus.problems()
        return problems

    # -- receivers and the shared bus -----------------------------------------------------

    async def _start_receivers(self) -> None:
        await self.bus.start()
        if self.cancels is not None:
            await self.cancels.start()
        if self.turn_changes is not None:
            await self.turn_changes.start()
        if self.handoffs is not None:
            await self.handoffs.start()
        if self.receiver is not None:
            await self.receiver.start()
        if self.settings.otlp_grpc:
            from relay.ingest.grpc import GrpcReceiver

            assert self.receiver is not None  # RELAY_OTLP_GRPC turns the receiver on
            self.grpc_receiver = GrpcReceiver(
                self.receiver,
                self.settings.otlp_grpc,
                max_bytes=self.settings.otlp_max_bytes,
                api_token=self.settings.api_token,
            )
            await self.grpc_receiver.start()

    async def _stop_receivers(self) -> None:
        if self.grpc_receiver is not None:
            await self.grpc_receiver.stop()
            self.grpc_receiver = None
        if self.receiver is not None:
            await self.receiver.stop()
        if self.cancels is not None:
            await self.cancels.stop()
        if self.turn_changes is not None:
            await self.turn_changes.stop()
        if self.handoffs is not None:
            await self.handoffs.stop()
        await self.bus.stop()

    def bus_problem(self) -> str | None:
        """Why the (shared) bus cannot take a new turn now, or None."""
        return self.bus.unavailable()

    # -- streams ------------------------------------------------------------------------

    def _reader_attached(self, turn_id: str) -> None:
        self.runs.reader_attached(turn_id)
        self.metrics.stream_opened()

    def _reader_left(self, turn_id: str, completed: bool, on_disconnect: str, outcome: str) -> None:
        self.metrics.stream_closed(outcome)
        self.runs.reader_left(turn_id, completed, on_disconnect)

    def stream(
        self,
        turn_id: str,
        after: int,
        media: str,
        *,
        stop_at: frozenset[str] = RUN_TERMINAL,
        on_disconnect: str = "cancel",
        encoder: Encoder | None = None,
    ) -> EventStream:
        """A response that streams ``turn_id``'s log after ``after`` until ``stop_at``
        (``encoder``: another frame format, e.g. :class:`relay.delivery.agui.AGUIEncoder`)."""
        return self.streams.live(
            turn_id, after, media, stop_at=stop_at, on_disconnect=on_disconnect, encoder=encoder
        )

    async def subscribe(
        self, turn_id: str, after: int = 0, *, until: frozenset[str] = TURN_TERMINAL
    ) -> AsyncIterator[Event]:
        """A turn's events in-process, after ``after``, live, up to and including the
        first event whose type is in ``until`` (by default the turn's end: across a pause
        and its resume). Raises :class:`relay.bus.UnknownTurn` for a turn the bus does
        not hold and :class:`relay.bus.CursorExpired` for a cursor retention dropped.

        The events carry the turn's id as its client created it, whichever spelling of
        it ``turn_id`` is. A live turn the bus holds under this very spelling is read at
        once; the turn's record (a read of the store) is consulted only to resolve another
        spelling, or for a turn that has finished or that the bus does not hold here."""
        turn_id = await self._log_id(turn_id)
        reader = self.bus.reader(turn_id, after)
        try:
            while True:
                for event in reader.take():
                    yield event
                    if event.type in until:
                        return
                if reader.exhausted:
                    return
                await reader.wait(None)
        finally:
            reader.close()

    async def _log_id(self, turn_id: str) -> str:
        """The id ``turn_id``'s log is kept under on the bus: the turn's own spelling.

        A live turn whose log the bus holds under ``turn_id`` (this instance runs it, or
        the shared bus has looked it up) is spelled as its client created it: the log is
        named by its events' ``turn_id``. Only then does the store stay out of it; any
        other case reads the record (the id in any spelling finds the turn's own), then
        lets the bus look the turn up (a shared bus: a turn that runs elsewhere)."""
        bus = self.bus
        if bus.has_turn(turn_id) and not bus.finished(turn_id):
            return turn_id
        record = await self.turns.get(turn_id)
        turn_id = record.turn_id if record is not None else turn_id
        await bus.lookup(turn_id)
        return turn_id
