"""What the HTTP surface uses of a relay, declared: the routes take these parts, not the
:class:`relay.core.Relay` itself (which satisfies this protocol), so nothing here imports
the core and the core may mount the routes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from relay.auth import User
from relay.bus.base import Bus
from relay.delivery.streams import Streams
from relay.export.metrics import RelayMetrics
from relay.lifecycle import Lifecycles
from relay.settings import RelaySettings
from relay.store import SpanStore
from relay.turns.feed import TurnFeed
from relay.turns.messages import MessageStore
from relay.turns.records import TurnStore
from relay.turns.recovering import Recoverable
from relay.turns.runs import RunManager

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from relay.auth.langgraph_auth import LangGraphAuth
    from relay.bus.redis_cancels import CancelChannel
    from relay.ingest.receiver import OTLPReceiver
    from relay.langgraph.agent import GraphAgent
    from relay.langgraph.thread_ttl import ThreadGate


class RelayParts(Protocol):
    settings: RelaySettings
    bus: Bus
    turns: TurnStore
    #: every change of a turn's status (GET /turns as a stream, ?wait=)
    feed: TurnFeed
    runs: RunManager
    #: the mounted graphs' admissions by name: what takes up a claimed turn again
    recoverables: dict[str, Recoverable]
    streams: Streams
    store: SpanStore
    store_processor: BatchSpanProcessor | None
    messages: MessageStore
    metrics: RelayMetrics
    receiver: OTLPReceiver | None
    #: cancel requests to the instance that runs a turn (a shared Redis bus), or None
    cancels: CancelChannel | None
    closing: asyncio.Event
    #: work a mounted route keeps beside its requests, started and stopped with the relay
    lifecycles: Lifecycles
    #: the served graph's topology (GET /graph), or None for a relay-only server
    topology: dict[str, Any] | None
    #: the served graphs by name, in mount order (GET /graphs); empty for a relay-only server
    agents: dict[str, GraphAgent]
    #: a thread's runs and its deletion, apart in this process
    threads: ThreadGate
    #: the LangGraph store of the graphs compiled without one (opened by the lifespan)
    graph_store: Any
    #: the dependency that checks ``Authorization: Bearer`` (RELAY_API_TOKEN): the OTLP
    #: receiver's credential
    require_token: Callable[..., Awaitable[None]]
    #: the dependency of every other API route: the request's user (RELAY_AUTH), or None
    identify: Callable[..., Awaitable[User | None]]
    #: LangGraph's ``Auth`` whose ``@auth.on`` handlers the routes ask, or None
    langgraph_auth: LangGraphAuth | None
    #: who may call, as GET /config says: RELAY_AUTH's mode, or ``langgraph``
    auth_mode: str
    #: the run endpoints' rate limit (RELAY_RATE_LIMIT) and the shared bus being up
    rate_limit: Callable[..., Any]
    require_bus: Callable[..., Any]

    async def readiness_problems(self) -> list[str]: ...

    def resume_route(self, graph_id: str) -> str | None:
        """The resume route this server offers for a run of ``graph_id`` (None: none)."""
        ...
