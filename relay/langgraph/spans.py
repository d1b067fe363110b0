"""The span helpers, for a graph that opens its own spans (DESIGN.md §3).

:class:`relay.GraphAgent` instruments any graph by itself (relay/langgraph/instrument.py)
and opens the run's root span with :func:`run_span`; these helpers are for the spans a
node's own code opens (a guardrail, a retrieval, a model call it streams itself) and for
an app that drives its graph without a GraphAgent. Following DESIGN.md §3 (identifying
attributes at start, because a span processor's ``on_start`` sees nothing set later):

- :func:`run_span` opens the root span of one HTTP run (a chat or a resume), carrying
  the turn id and the graph's topology, and closes it with the run's outcome;
- :func:`traced_node` wraps a LangGraph node function in a ``node {name}`` span; an
  interrupt is ``paused``, a cancellation ``cancelled``, anything else raised ``error``
  (:func:`outcome_of`, which the GraphAgent's instrumentation asks too);
- :func:`child_span` opens a model / retrieval / guardrail / tool span inside a node.

:class:`NodeLog` records each node span's name, outcome and duration as it ends, for the
ChatResponse's ``nodes`` list: the same facts the stream shows, taken from the same spans.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode, Tracer

from relay import conventions as c
from relay.events import INTERRUPTED_MESSAGE
from relay.langgraph.failures import transient
from relay.spans import to_ms
from relay.turns.draining import RunDrained
from relay.turns.run_end import HANDED_OVER, HANDOVER, INTERRUPTED, SHUTDOWN


@dataclass
class NodeLog:
    """The node spans of one run, in start order."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self, name: str, namespace: list[str] | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": name, "status": "running", "duration_ms": 0.0}
        if namespace:
            entry["namespace"] = list(namespace)
        with self._lock:
            self.nodes.append(entry)
        return entry

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(n) for n in self.nodes]


_node_log: contextvars.ContextVar[NodeLog | None] = contextvars.ContextVar(
    "span_relay_node_log", default=None
)


@dataclass
class RunSpan:
    """The open root span of a run and what the run will say when it ends."""

    span: Span
    node_log: NodeLog
    outcome: str = "error"
    end_attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def trace_id(self) -> str:
        return format(self.span.get_span_context().trace_id, "032x")

    @property
    def span_id(self) -> str:
        return format(self.span.get_span_context().span_id, "016x")

    def finish(self, outcome: str, **attributes: Any) -> None:
        """Set the outcome and the end attributes (JSON-encoded when not scalar)."""
        self.outcome = outcome
        for key, value in attributes.items():
            if value is None:
                continue
            if not isinstance(value, str | bool | int | float):
                value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            self.end_attributes[key] = value


@contextlib.contextmanager
def run_span(
    tracer: Tracer,
    *,
    agent: str,
    thread_id: str,
    turn_id: str,
    run_kind: str,
    graph_id: str,
    topology: Mapping[str, Any],
    message: str | None = None,
    link_to: tuple[str, str] | None = None,
    start_markers: bool = False,
    instrumented: bool = False,
    user_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Iterator[RunSpan]:
    """The root span of one run. ``link_to`` = (trace_id, span_id) of the paused run (a
    resume) or of the cut one (a recovery); ``extra``: more attributes of the root's
    start (a recovery's ``relay.recovery.*``).

    ``start_markers=True`` also emits a start marker (:func:`start_marker`): for an agent
    whose spans reach the relay over OTLP, which sees a span only when it ends."""
    attributes: dict[str, Any] = {
        c.OPERATION: c.OP_INVOKE_AGENT,
        c.AGENT_NAME: agent,
        c.CONVERSATION_ID: thread_id,
        c.TURN_ID: turn_id,
        c.RUN_KIND: run_kind,
        c.GRAPH_ID: graph_id,
        c.GRAPH_TOPOLOGY: json.dumps(topology, separators=(",", ":")),
    }
    if message is not None:
        attributes[c.TURN_MESSAGE] = message
    if instrumented:  # GraphInstrumentation spans the graph: read no other instrumentation
        attributes[c.GRAPH_INSTRUMENTED] = True
    if user_id:
        attributes[c.ENDUSER_ID] = user_id
    attributes.update(extra or {})
    links = []
    if link_to is not None:
        links.append(Link(SpanContext(int(link_to[0], 16), int(link_to[1], 16), is_remote=False)))
    node_log = NodeLog()
    token = _node_log.set(node_log)
    span = tracer.start_span(f"invoke_agent {agent}", attributes=attributes, links=links)
    if start_markers:
        start_marker(tracer, span, f"invoke_agent {agent}", attributes)
    run = RunSpan(span, node_log)
    try:
        with trace.use_span(
            span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            yield run
    except asyncio.CancelledError as exc:
        if HANDOVER in exc.args:  # cut by a stop that hands the turn over: it goes on
            run.outcome = HANDED_OVER
        elif SHUTDOWN in exc.args:  # the relay's stop cut it: nobody asked for a cancel
            run.outcome = INTERRUPTED
            run.end_attributes[c.ERROR_MESSAGE] = INTERRUPTED_MESSAGE
        else:
            run.outcome = "cancelled"
        raise
    except RunDrained:  # stopped at a step boundary to be handed over: it goes on
        run.outcome = HANDED_OVER
        raise
    except BaseException as exc:
        run.outcome = "error"
        # sending again helps only past a timeout or an outage (relay/langgraph/failures.py)
        run.end_attributes.setdefault(c.ERROR_RETRYABLE, transient(exc))
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        _node_log.reset(token)
        span.set_attributes(run.end_attributes)
        span.set_attribute(c.TURN_OUTCOME, run.outcome)
        span.end()


def outcome_of(error: BaseException) -> str:
    """The outcome of a node (``relay.node.outcome``) or of a span inside it, for what it
    raised: an interrupt (``GraphInterrupt``) pauses it, it did not fail; a handoff to the
    parent graph (``ParentCommand``) is ``ok``; a cancellation (or Ctrl-C) is
    ``cancelled``; anything else is ``error``. A node that returns is ``ok``.

    The one place that decides it: :func:`traced_node` and the GraphAgent's
    instrumentation (:class:`relay.langgraph.instrument.GraphInstrumentation`) both ask
    here."""
    if isinstance(error, GraphInterrupt):  # interrupt(): the node pauses, it did not fail
        return "paused"
    if isinstance(error, GraphBubbleUp):  # ParentCommand: a handoff, not a failure
        return "ok"
    if isinstance(error, asyncio.CancelledError | KeyboardInterrupt):
        return "cancelled"
    return "error"


def _task_id(config: RunnableConfig | None) -> str | None:
    if not config:
        return None
    ns = (config.get("metadata") or {}).get("langgraph_checkpoint_ns", "")
    return ns.rsplit(":", 1)[-1] if ":" in ns else None


def _step(config: RunnableConfig | None) -> int | None:
    if not config:
        return None
    return (config.get("metadata") or {}).get("langgraph_step")


def traced_node(
    tracer: Tracer, name: str, fn: Callable[..., Any], *, start_markers: bool = False
) -> Callable[..., Any]:
    """Wrap a LangGraph node ``fn(state)`` or ``fn(state, config)`` (sync or async) in a
    node span. Under a :class:`relay.GraphAgent`, which opens every node's span itself,
    the wrapper opens none: the node is not instrumented twice.

    ``start_markers=True`` also emits a start marker when the node starts (see
    :func:`start_marker`), so that a relay receiving spans over OTLP shows the node
    running at once instead of when it ends."""
    takes_config = _takes_config(fn)

    def call(state: Any, config: RunnableConfig | None) -> Any:
        return fn(state, config) if takes_config else fn(state)

    def start(config: RunnableConfig | None) -> tuple[Span, dict[str, Any] | None] | None:
        step = _step(config)
        task_id = _task_id(config)
        span_now = trace.get_current_span()
        current = (getattr(span_now, "attributes", None) or {}) if span_now.is_recording() else {}
        if current.get(c.NODE_NAME) == name and current.get(c.NODE_TASK_ID) == task_id:
            return None  # the GraphAgent's instrumentation opened this node's span
        attributes: dict[str, Any] = {c.NODE_NAME: name}
        if step is not None:
            attributes[c.NODE_STEP] = step
        if task_id is not None:
            attributes[c.NODE_TASK_ID] = task_id
        node_log = _node_log.get()
        entry = node_log.started(name) if node_log is not None else None
        span = tracer.start_span(f"node {name}", attributes=attributes)
        if start_markers:
            start_marker(tracer, span, f"node {name}", attributes)
        return span, entry

    def end(span: Span, entry: dict[str, Any] | None, outcome: str) -> None:
        span.set_attribute(c.NODE_OUTCOME, outcome)
        span.end()
        if entry is not None:
            entry["status"] = outcome
            end_time = getattr(span, "end_time", None) or 0
            start_time = getattr(span, "start_time", None) or 0
            entry["duration_ms"] = to_ms(end_time - start_time)

    def failed(exc: BaseException, span: Span) -> str:
        """The node's outcome for ``exc``; an error is also recorded on its span."""
        outcome = outcome_of(exc)
        if outcome == "error":
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        return outcome

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_node(state: Any, config: RunnableConfig) -> Any:
            opened = start(config)
            if opened is None:
                return await call(state, config)
            span, entry = opened
            outcome = "ok"
            try:
                with trace.use_span(
                    span, end_on_exit=False, record_exception=False, set_status_on_exception=False
                ):
                    return await call(state, config)
            except BaseException as exc:
                outcome = failed(exc, span)
                raise
            finally:
                end(span, entry, outcome)

        return async_node

    @functools.wraps(fn)
    def sync_node(state: Any, config: RunnableConfig) -> Any:
        opened = start(config)
        if opened is None:
            return call(state, config)
        span, entry = opened
        outcome = "ok"
        try:
            with trace.use_span(
                span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                return call(state, config)
        except BaseException as exc:
            outcome = failed(exc, span)
            raise
        finally:
            end(span, entry, outcome)

    return sync_node


def _takes_config(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` takes a second positional argument (LangGraph's ``config``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


@contextlib.contextmanager
def child_span(
    tracer: Tracer, name: str, operation: str, attributes: Mapping[str, Any] | None = None
) -> Iterator[Span]:
    """A model / retrieval / guardrail / tool span under the current node span.

    ``attributes`` are set at start; set results on the yielded span before it ends.
    A raised exception marks the span as an error and propagates.
    """
    attrs = {c.OPERATION: operation, **(attributes or {})}
    with tracer.start_as_current_span(
        name, attributes=attrs, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except asyncio.CancelledError:
            span.set_attribute(c.SPAN_OUTCOME, "cancelled")
            raise
        except GraphBubbleUp:
            raise
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise


def start_marker(tracer: Tracer, span: Span, name: str, attributes: Mapping[str, Any]) -> None:
    """Emit the start marker of ``span`` (docs/events.md, "Start markers").

    OTLP carries a span once, when it ends, so a relay that receives an agent's spans
    over OTLP would learn that a node started only when it finished. The marker is a
    zero-duration child of ``span`` that ends at once (and so is exported at once), named
    ``relay.start {name}``, started and ended at ``span``'s start time, with
    ``relay.start_of`` = ``span``'s id, ``relay.start.parent`` = ``span``'s parent id (16
    hex; absent for a root) and ``relay.start.attributes`` = ``span``'s start attributes
    as one JSON object. The relay's mapping turns it into the span's start event; the
    span's own start then yields nothing, and its end gives the end event as usual.
    """
    context = span.get_span_context()
    start_time = getattr(span, "start_time", None)
    marker_attributes: dict[str, Any] = {
        c.START_OF: format(context.span_id, "016x"),
        c.START_ATTRIBUTES: json.dumps(
            dict(attributes), separators=(",", ":"), ensure_ascii=False, default=str
        ),
    }
    parent = getattr(span, "parent", None)
    if parent is not None:
        marker_attributes[c.START_PARENT] = format(parent.span_id, "016x")
    marker = tracer.start_span(
        c.START_PREFIX + name,
        context=trace.set_span_in_context(span),
        attributes=marker_attributes,
        start_time=start_time,
    )
    marker.end(end_time=start_time)
