"""Payloads sent from inside a node -> span events of the node's span (docs/events.md,
``custom``).

A node reports progress two ways, and both are captured here, on the thread that sends
the payload, as a ``relay.custom`` span event of the node's span (so the store, the OTLP
export and the replay have it, exactly as it went live):

- LangGraph's stream writer (``get_stream_writer()``, ``runtime.stream_writer``): the
  GraphAgent runs its graph with :func:`stream_writer_config`, which makes
  :meth:`CustomEvents.write` the writer of every node of the run, its subgraphs' too;
- LangChain's custom callback events (``adispatch_custom_event`` /
  ``dispatch_custom_event``): the run's callback handler
  (:class:`relay.langgraph.instrument.GraphInstrumentation`) hands them to
  :meth:`CustomEvents.record` with the event's name.

The payload is encoded as JSON on the spot (a later change to the object the node keeps
does not change what was sent). One whose JSON passes ``max_bytes``
(RELAY_CUSTOM_EVENT_MAX_BYTES) is cut (:func:`encode`) and marked
``relay.custom.truncated``. A node span takes at most :data:`MAX_PER_NODE` of them: the
SDK keeps a bounded number of events per span (128 by default), and a payload the stored
span could not keep would make the replay differ from what went live; later ones are
dropped and counted.

Hot path: a dictionary lookup, one JSON encoding of at most the payload, one span event.
It never blocks on I/O and never raises into the node: a failure is counted
(``failures``) and the payload dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from langgraph.config import get_config
from langgraph.pregel.protocol import StreamProtocol
from langgraph.runtime import Runtime
from opentelemetry import trace
from opentelemetry.trace import Span

from relay import conventions as c

#: what LangGraph reads the run's runtime (its stream writer) and its stream from
try:  # pragma: no cover - the names LangGraph gives them (langgraph._internal._constants)
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME, CONFIG_KEY_STREAM
except ImportError:  # pragma: no cover
    CONFIG_KEY_RUNTIME, CONFIG_KEY_STREAM = "__pregel_runtime", "__pregel_stream"

#: the default of RELAY_CUSTOM_EVENT_MAX_BYTES: the largest payload (its JSON) kept whole
MAX_BYTES = 8 * 1024
#: at most this many payloads per node span (below the SDK's 128 events a span keeps)
MAX_PER_NODE = 100
#: a cut payload keeps its top-level scalar fields; a string among them at most this long
MAX_KEPT_TEXT = 256

AddEvent = Callable[..., None]  # RelaySpanProcessor.add_event(span, name, attributes)
NodeSpan = Callable[[str | None], Span | None]  # checkpoint namespace -> the node's span


def encode(data: Any, max_bytes: int) -> tuple[str, bool]:
    """``data`` as JSON text and whether it was cut. Whole when its JSON takes at most
    ``max_bytes``; else, for an object, its top-level scalar fields (strings cut to
    :data:`MAX_KEPT_TEXT` characters) as far as they fit, so a cut progress payload
    still says its ``stage`` and ``progress``; anything else cut is ``null``. What JSON
    cannot hold is written as its ``str``."""
    text = orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS)
    if len(text) <= max_bytes:
        return text.decode(), False
    kept: dict[str, Any] = {}
    if isinstance(data, Mapping):
        size = 2
        for key, value in data.items():
            if isinstance(value, str):
                value = value[:MAX_KEPT_TEXT]
            elif value is not None and not isinstance(value, bool | int | float):
                continue
            item = len(orjson.dumps({str(key): value})) - 1
            if size + item > max_bytes:
                break
            kept[str(key)] = value
            size += item
    return (orjson.dumps(kept).decode() if kept else "null"), True


def stream_writer_config(
    configurable: Mapping[str, Any], write: Callable[[Any], None], store: Any = None
) -> dict[str, Any]:
    """``configurable`` with ``write`` as the run's stream writer; ``store``: the graph's
    (LangGraph takes a run's store from a runtime in its config, as a subgraph's).

    LangGraph takes a run's stream writer from the runtime in its config when the config
    carries a stream (as it does for a subgraph), and hands every node, subgraphs' nodes
    included, that writer; the stream given here takes no stream mode (``custom`` only,
    which nothing but the writer produces, and the writer is ours), so it receives
    nothing and the run's own streaming is unchanged."""
    runtime = configurable.get(CONFIG_KEY_RUNTIME)
    if not isinstance(runtime, Runtime):
        runtime = Runtime(store=store)
    return {
        **configurable,
        CONFIG_KEY_RUNTIME: runtime.override(stream_writer=write),
        CONFIG_KEY_STREAM: configurable.get(CONFIG_KEY_STREAM)
        or StreamProtocol(_nothing, {"custom"}),
    }


def _nothing(chunk: Any) -> None:
    return None


class CustomEvents:
    """One run's custom payloads: each becomes a ``relay.custom`` event of its node's
    span (``node_span(checkpoint namespace)``, else the current span when it is a node's:
    a graph that opens its own node spans)."""

    def __init__(self, add_event: AddEvent, node_span: NodeSpan, max_bytes: int = MAX_BYTES):
        self.add_event = add_event
        self.node_span = node_span
        self.max_bytes = max_bytes
        self.dropped = 0  # past MAX_PER_NODE, or sent outside any node
        self.failures = 0
        self._counts: dict[int, int] = {}  # span id -> payloads recorded on it
        self._lock = threading.Lock()

    def write(self, data: Any) -> None:
        """The run's stream writer (``get_stream_writer()``), on the node's thread."""
        try:
            ns = (get_config().get("configurable") or {}).get("checkpoint_ns")
            self.record(ns if isinstance(ns, str) else None, data, None)
        except Exception:
            self.failures += 1

    def record(self, ns: str | None, data: Any, name: str | None) -> None:
        """One payload sent inside the task ``ns`` (its checkpoint namespace)."""
        try:
            span = self.node_span(ns) if ns else None
            if span is None:
                span = _current_node_span()
            if span is None:
                self.dropped += 1
                return
            key = span.get_span_context().span_id
            with self._lock:
                count = self._counts.get(key, 0)
                if count >= MAX_PER_NODE:
                    self.dropped += 1
                    return
                self._counts[key] = count + 1
            text, cut = encode(data, self.max_bytes)
            attributes: dict[str, Any] = {c.CUSTOM_DATA: text}
            if name is not None:
                attributes[c.CUSTOM_NAME] = str(name)
            if cut:
                attributes[c.CUSTOM_TRUNCATED] = True
            self.add_event(span, c.CUSTOM_EVENT, attributes)
        except Exception:
            self.failures += 1


def _current_node_span() -> Span | None:
    """The current span when it is an open node span (a ``traced_node``'s)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    attributes = getattr(span, "attributes", None) or {}
    return span if c.NODE_NAME in attributes else None
