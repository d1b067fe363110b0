"""span-relay: an agent's OpenTelemetry spans drive its live UI.

The public surface, curated: what an app that serves its own graph writes against.

- :class:`Relay`: settings, bus, stores, runs, span processor, from the environment;
  ``relay.mount(app, GraphAgent(graph))`` serves any compiled LangGraph graph (``/chat``,
  ``/chat/resume``, ``/agui``, the turn API, the SPA) with ``lifespan=relay.lifespan``.
- :class:`GraphAgent`: a compiled graph as turns, instrumented; its hooks say what its
  values mean. The span helpers for a graph's own spans: :mod:`relay.langgraph.spans`
  (``child_span``, ``traced_node``, ``run_span``); :func:`topology_metadata`, the one
  line that gives a graph another instrumentation traces its real topology.
- :class:`RelaySpanProcessor`: spans -> events (``relay.span_processor`` of a Relay).
- the turn: :class:`TurnRecord` (found by any spelling of its id: :func:`id_key`),
  :class:`ChatResponse`, the run manager's :class:`ThreadBusy`.
- the run endpoints' helpers: :func:`read_json_object`, :func:`negotiate` (JSON / SSE /
  NDJSON), :class:`ApiError` (a 4xx JSON answer), :class:`AGUIEncoder` (AG-UI 1.0 frames).
- client-executed tools: :func:`client_tool` (a tool the client runs: calling it pauses
  the turn with an interrupt of type ``client_tool``), :func:`client_tools_of` (the tools
  an AG-UI client sent, for a model node to bind).
- LangGraph's checkpointer of the embedded default (SQLite) or PostgreSQL:
  :func:`open_checkpointer`; its long-term memory store (``get_store()``,
  ``runtime.store``) on the same: :func:`open_store` (every mounted graph compiled
  without a store gets it; ``Relay(..., store={"index": ..., "ttl": ...})`` as
  langgraph.json's ``store`` section).
- the event contract: :mod:`relay.events`; span attribute names: :mod:`relay.conventions`.
- ``relay.__version__``: the installed distribution's version.

The graph-only names (:class:`GraphAgent`, :class:`PendingInterrupt`, the client-tool
helpers, :class:`GraphInstrumentation`, the span helpers) are imported on first use, by
the module's ``__getattr__``: they need LangGraph and LangChain (with LangSmith, half a
second and more), which a process that serves no graph (``span-relay serve
--relay-only``, ``span-relay --help``) never imports.
"""

from typing import TYPE_CHECKING, Any

from relay import conventions, events
from relay.core import Relay
from relay.delivery.agui import AGUIEncoder
from relay.delivery.negotiation import JSON, NDJSON, SSE, NotAcceptable, negotiate
from relay.errors import ApiError, StoreUnavailable
from relay.events import RUN_TERMINAL, TURN_TERMINAL, Event
from relay.http.requests import read_json_object
from relay.ingest.processor import RelaySpanProcessor
from relay.langgraph.checkpoints import check_checkpointer, open_checkpointer, read_checkpoints
from relay.langgraph.store import StoreOptions, open_store
from relay.langgraph.topology import topology_metadata
from relay.settings import ConfigError, RelaySettings
from relay.turns.messages import Message, SQLiteMessageStore
from relay.turns.records import PAUSED, RUNNING, TurnRecord, TurnStore, id_key
from relay.turns.response import ChatResponse
from relay.turns.runs import RunManager, ThreadBusy
from relay.version import __version__

if TYPE_CHECKING:
    from relay.langgraph.agent import GraphAgent, PendingInterrupt
    from relay.langgraph.client_tools import ClientTool, client_tool, client_tools_of
    from relay.langgraph.instrument import GraphInstrumentation
    from relay.langgraph.spans import child_span, run_span, traced_node

__all__ = [
    "JSON",
    "NDJSON",
    "PAUSED",
    "RUNNING",
    "RUN_TERMINAL",
    "SSE",
    "TURN_TERMINAL",
    "AGUIEncoder",
    "ApiError",
    "ChatResponse",
    "ClientTool",
    "ConfigError",
    "Event",
    "GraphAgent",
    "GraphInstrumentation",
    "Message",
    "NotAcceptable",
    "PendingInterrupt",
    "Relay",
    "RelaySettings",
    "RelaySpanProcessor",
    "RunManager",
    "SQLiteMessageStore",
    "StoreOptions",
    "StoreUnavailable",
    "ThreadBusy",
    "TurnRecord",
    "TurnStore",
    "__version__",
    "check_checkpointer",
    "child_span",
    "client_tool",
    "client_tools_of",
    "conventions",
    "events",
    "id_key",
    "negotiate",
    "open_checkpointer",
    "open_store",
    "read_checkpoints",
    "read_json_object",
    "run_span",
    "topology_metadata",
    "traced_node",
]


def __getattr__(name: str) -> Any:
    """The graph-only names, imported on first use (``from relay import GraphAgent``)."""
    value: Any
    if name in ("GraphAgent", "PendingInterrupt"):
        from relay.langgraph import agent

        value = getattr(agent, name)
    elif name in ("ClientTool", "client_tool", "client_tools_of"):
        from relay.langgraph import client_tools

        value = getattr(client_tools, name)
    elif name == "GraphInstrumentation":
        from relay.langgraph import instrument

        value = instrument.GraphInstrumentation
    elif name in ("child_span", "run_span", "traced_node"):
        from relay.langgraph import spans

        value = getattr(spans, name)
    else:
        raise AttributeError(f"module 'relay' has no attribute {name!r}")
    globals()[name] = value  # the next lookup is an ordinary one
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
