"""Spans for any LangGraph graph, from LangChain's callbacks (DESIGN.md §3).

:class:`GraphInstrumentation` is a LangChain callback handler that :class:`GraphAgent`
hands to every run of its graph (``config["callbacks"]``); nothing in the graph changes.
It opens, with their identifying attributes at start:

- a ``node {name}`` span for every LangGraph task (a node, a ``Send`` instance, a node of
  a compiled subgraph, with ``relay.node.namespace`` = the enclosing nodes), made the
  current span while the node runs, so spans the node's own code opens are its children;
- a ``chat {model}`` span for every chat model call, whose streamed tokens become
  ``gen_ai.content.delta`` span events (``RelaySpanProcessor.add_event``): ``text_delta``
  inside the right node. The handler declares itself a streaming handler, so a model
  invoked with ``ainvoke`` streams too;
- an ``execute_tool {tool}`` span for every tool call, a ``retrieval {name}`` span for
  every retriever. A payload a node sends (a custom callback event here, the stream
  writer's through the GraphAgent) is a ``relay.custom`` event of its node's span
  (:mod:`relay.langgraph.custom_events`). An async tool still running after
  ``tool_timeout_s`` (RELAY_TOOL_TIMEOUT_S) is cancelled; the GraphAgent then ends the
  turn ``tool_timeout``.

An interrupt (``GraphInterrupt``) ends a node ``paused``; a handoff to the parent graph
(``ParentCommand``) ends it ``ok``; a cancellation ``cancelled``; anything else raised
``error`` (:func:`relay.langgraph.spans.outcome_of` decides, for ``traced_node`` too).
Where a span of the same kind is already current (the graph carries its own spans: the
:mod:`relay.langgraph.spans` helpers, a ``traced_node``), the handler opens none:
nothing is instrumented twice. :meth:`close` ends what is still open when the run is
over (a cancelled run's callbacks may never come).

Parents come from LangChain's run tree (``parent_run_id``), not from the current context:
the nearest enclosing run this handler opened a span for (a subgraph's nodes are children
of its parent node), else the context the handler was made in (the run's root span).
LangChain calls async end callbacks in a shielded task (a copy of the context), where a
node's context cannot be restored; the run tree does not depend on it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from relay import conventions as c
from relay.langgraph.callback_inputs import task_of, tool_arguments, usage
from relay.langgraph.custom_events import CustomEvents
from relay.langgraph.retries import RetryPolicies, will_retry
from relay.langgraph.spans import NodeLog, outcome_of
from relay.spans import to_ms

T = TypeVar("T")
AddEvent = Callable[..., None]  # RelaySpanProcessor.add_event(span, name, attributes)

NODE = "node"
CHAT = "chat"
TOOL = "tool"
RETRIEVAL = "retrieval"
_OPERATION = {CHAT: c.OP_CHAT, TOOL: c.OP_TOOL, RETRIEVAL: c.OP_RETRIEVAL}
#: a node attempt that failed and that LangGraph runs again (its RetryPolicy)
RETRYING = "retrying"


@dataclass(slots=True)
class _Open:
    kind: str
    span: Span
    token: object | None
    entry: dict[str, Any] | None = None  # the node's line in the ChatResponse
    task: str | None = None
    #: a node's retry policies (LangGraph's RetryPolicy) and which attempt this span is
    retry: tuple[Any, ...] = ()
    attempt: int = 1


class GraphInstrumentation(BaseCallbackHandler):
    """One run's spans (make one per run: it keeps that run's open spans)."""

    run_inline = True  # called in the caller's context: the node span becomes current
    raise_error = False  # never raise into the graph

    def __init__(
        self,
        tracer: Tracer,
        add_event: AddEvent | None = None,
        node_log: NodeLog | None = None,
        tool_timeout_s: float | None = None,
        user_id: str | None = None,
        retry_policies: RetryPolicies | None = None,
    ) -> None:
        self.tracer = tracer
        #: the user the run acts for: ``enduser.id`` on every span of this run
        self.user_id = user_id
        self.add_event = add_event
        self.node_log = node_log
        #: an async tool still running after this is cancelled (RELAY_TOOL_TIMEOUT_S);
        #: ``timed_out`` then names it, and the run ends with ``tool_timeout``
        self.tool_timeout_s = tool_timeout_s
        self.timed_out: str | None = None
        self._timers: dict[UUID, asyncio.TimerHandle] = {}
        self.root = otel_context.get_current()  # the run's root span, where this is made
        self._parents: dict[UUID, UUID | None] = {}  # every run started, to its parent
        self._open: dict[UUID, _Open | None] = {}
        #: checkpoint namespace -> its open node span (where a node's payloads go)
        self._tasks: dict[str, Span] = {}
        #: the run's custom payloads (custom_events.py); the GraphAgent sets it
        self.custom: CustomEvents | None = None
        #: the graph's RetryPolicies: a failed attempt LangGraph runs again ends ``retrying``
        self.retry_policies = retry_policies
        self._retried: dict[str, int] = {}  # a task's checkpoint ns -> its attempts retried
        #: the last tool that raised (its name and error): ``tool_failed`` when the run
        #: fails with that error
        self.failed_tool: tuple[str, BaseException] | None = None
        self._lock = threading.Lock()

    # -- streaming: models stream their tokens to on_llm_new_token when this is attached --

    def tap_output_aiter(self, run_id: UUID, output: AsyncIterator[T]) -> AsyncIterator[T]:
        return output

    def tap_output_iter(self, run_id: UUID, output: Iterator[T]) -> Iterator[T]:
        return output

    # -- nodes ------------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id
        task = task_of(metadata)
        if task is None:
            return
        node, ns, namespace, task_id = task
        if ns in self._tasks:
            return  # a runnable inside the node (its function, a subgraph): one task's
            # runnables run one inside the other, never side by side
        if _current_is(c.NODE_NAME, node, c.NODE_TASK_ID, task_id):
            return  # the graph's own node span (traced_node) is already open
        attributes: dict[str, Any] = {c.NODE_NAME: node, c.NODE_NAMESPACE: namespace}
        step = (metadata or {}).get("langgraph_step")
        if isinstance(step, int):
            attributes[c.NODE_STEP] = step
        if task_id:
            attributes[c.NODE_TASK_ID] = task_id
        retry = self.retry_policies.of(namespace, node) if self.retry_policies else ()
        attempt = self._retried.get(ns, 0) + 1
        if attempt > 1:
            attributes[c.NODE_ATTEMPT] = attempt
        entry = self.node_log.started(node, namespace) if self.node_log is not None else None
        self._begin(run_id, NODE, f"node {node}", attributes, entry=entry, task=ns, current=True)
        opened = self._open.get(run_id)
        if opened is not None and retry:
            opened.retry = retry
            opened.attempt = attempt

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id, "ok", None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        outcome = outcome_of(error)
        opened = self._open.get(run_id)
        if (
            outcome == "error"
            and opened is not None
            and opened.retry
            and opened.task is not None
            and will_retry(opened.retry, error, opened.attempt)
        ):
            outcome = RETRYING  # LangGraph runs the node again: not the node's failure
            self._retried[opened.task] = opened.attempt
        self._finish(run_id, outcome, error)

    # -- model calls ------------------------------------------------------------------

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id
        self._model_start(run_id, serialized, metadata, kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id
        self._model_start(run_id, serialized, metadata, kwargs)

    def on_llm_new_token(self, token: Any, *, run_id: UUID, **kwargs: Any) -> None:
        opened = self._open.get(run_id)
        if opened is None or self.add_event is None or not isinstance(token, str) or not token:
            return
        attributes = {c.DELTA_TEXT: token}
        # the id LangChain gives the message being written (LangGraph's own streams name it)
        message_id = getattr(getattr(kwargs.get("chunk"), "message", None), "id", None)
        if isinstance(message_id, str) and message_id:
            attributes[c.DELTA_MESSAGE_ID] = message_id
        self.add_event(opened.span, c.DELTA_EVENT, attributes)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        opened = self._open.get(run_id)
        if opened is not None:
            for key, value in usage(response).items():
                opened.span.set_attribute(key, value)
        self._finish(run_id, "ok", None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id, outcome_of(error), error)

    # -- payloads sent from inside a node (custom_events.py) ------------------------------

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if self.custom is not None:
            ns = (kwargs.get("metadata") or {}).get("langgraph_checkpoint_ns")
            self.custom.record(ns if isinstance(ns, str) else None, data, name)

    # -- tools and retrievers -----------------------------------------------------------

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id
        if _current_is(c.OPERATION, c.OP_TOOL):
            self._remember(run_id, None)
            return
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        attributes: dict[str, Any] = {c.OPERATION: c.OP_TOOL, c.TOOL_NAME: name}
        if kwargs.get("tool_call_id"):
            attributes[c.TOOL_CALL_ID] = str(kwargs["tool_call_id"])
        metadata = kwargs.get("metadata") or {}
        if metadata.get("idempotent") is True:  # running it again is safe (recovery)
            attributes[c.TOOL_IDEMPOTENT] = True
        if metadata.get("relay_client_tool"):  # the client runs it
            attributes[c.TOOL_CLIENT] = True
            attributes[c.TOOL_CALL_ARGUMENTS] = json.dumps(kwargs.get("inputs") or {}, default=str)
        else:
            attributes.update(tool_arguments(kwargs.get("inputs"), input_str))
        self._begin(run_id, TOOL, f"execute_tool {name}", attributes)
        self._bound_tool(run_id, name)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._unbound_tool(run_id)
        self._finish(run_id, "ok", None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._unbound_tool(run_id)
        if self.timed_out and isinstance(error, asyncio.CancelledError):  # our cancel
            error = TimeoutError(f"tool {self.timed_out} ran longer than {self.tool_timeout_s:g} s")
        outcome = outcome_of(error)
        opened = self._open.get(run_id)
        if outcome == "error" and opened is not None:
            name = str(getattr(opened.span, "name", "tool"))
            self.failed_tool = (name.removeprefix("execute_tool "), error)
        self._finish(run_id, outcome, error)

    def _bound_tool(self, run_id: UUID, name: str) -> None:
        """Cancel the task that runs an async tool once it has run ``tool_timeout_s``. A
        sync tool runs in a worker thread, which nothing can stop: it is not bounded."""
        if not self.tool_timeout_s:
            return
        try:
            loop = asyncio.get_running_loop()
            task = asyncio.current_task()
        except RuntimeError:
            return
        if task is None:
            return

        def expire() -> None:
            self.timed_out = name
            task.cancel(f"tool {name} ran longer than {self.tool_timeout_s:g} s")

        self._timers[run_id] = loop.call_later(self.tool_timeout_s, expire)

    def _unbound_tool(self, run_id: UUID) -> None:
        timer = self._timers.pop(run_id, None)
        if timer is not None:
            timer.cancel()

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id
        if _current_is(c.OPERATION, c.OP_RETRIEVAL):
            self._remember(run_id, None)
            return
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "retriever")
        self._begin(run_id, RETRIEVAL, f"retrieval {name}", {c.OPERATION: c.OP_RETRIEVAL})

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        opened = self._open.get(run_id)
        if opened is not None:
            opened.span.set_attribute(c.RETRIEVAL_DOCUMENTS, len(documents))
        self._finish(run_id, "ok", None)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id, outcome_of(error), error)

    # -- the end of the run ---------------------------------------------------------------

    def close(self, outcome: str = "cancelled") -> None:
        """End every span still open (newest first) with ``outcome``: the run is over and
        their callbacks will not come."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        with self._lock:
            left = [(run_id, o) for run_id, o in self._open.items() if o is not None]
        for run_id, _ in reversed(left):
            self._finish(run_id, outcome, None, detach=False)

    # -- spans ------------------------------------------------------------------------

    def _model_start(
        self,
        run_id: UUID,
        serialized: Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        kwargs: Mapping[str, Any],
    ) -> None:
        if _current_is(c.OPERATION, c.OP_CHAT):
            self._remember(run_id, None)  # the node's code opened the model span itself
            return
        meta = metadata or {}
        params = kwargs.get("invocation_params") or {}
        model = (
            meta.get("ls_model_name")
            or params.get("model")
            or params.get("model_name")
            or kwargs.get("name")
            or (serialized or {}).get("name")
            or "model"
        )
        attributes = {
            c.OPERATION: c.OP_CHAT,
            c.REQUEST_MODEL: str(model),
            c.PROVIDER: str(meta.get("ls_provider") or "unknown"),
        }
        self._begin(run_id, CHAT, f"chat {model}", attributes)

    def _begin(
        self,
        run_id: UUID,
        kind: str,
        name: str,
        attributes: dict[str, Any],
        *,
        entry: dict[str, Any] | None = None,
        task: str | None = None,
        current: bool = False,
    ) -> None:
        """Open the span under its parent; ``current``: make it the current span of the
        caller's context (a node: what its own code opens is its child)."""
        if self.user_id:
            attributes[c.ENDUSER_ID] = self.user_id
        span = self.tracer.start_span(
            name, context=self._parent_context(run_id), attributes=attributes
        )
        token = otel_context.attach(trace.set_span_in_context(span)) if current else None
        self._remember(run_id, _Open(kind, span, token, entry, task))
        if task is not None:
            with self._lock:
                self._tasks[task] = span

    def node_span(self, ns: str | None) -> Span | None:
        """The open span of the node running as the task ``ns`` (checkpoint namespace)."""
        return self._tasks.get(ns) if ns else None

    def _parent_context(self, run_id: UUID) -> otel_context.Context:
        """The context of the nearest enclosing run with a span of ours, else the root's."""
        with self._lock:
            parent = self._parents.get(run_id)
            while parent is not None:
                opened = self._open.get(parent)
                if opened is not None:
                    return trace.set_span_in_context(opened.span)
                parent = self._parents.get(parent)
        return self.root

    def _remember(self, run_id: UUID, opened: _Open | None) -> None:
        with self._lock:
            self._open[run_id] = opened

    def _finish(
        self, run_id: UUID, outcome: str, error: BaseException | None, *, detach: bool = True
    ) -> None:
        with self._lock:
            self._parents.pop(run_id, None)  # its children have all started
            opened = self._open.pop(run_id, None)
            if opened is not None and opened.task is not None:
                self._tasks.pop(opened.task, None)
        if opened is None:
            return
        span = opened.span
        if outcome in ("error", RETRYING) and error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.set_attribute(c.NODE_OUTCOME if opened.kind == NODE else c.SPAN_OUTCOME, outcome)
        if outcome == RETRYING:  # its line among a parent node's children says so too
            span.set_attribute(c.SPAN_OUTCOME, outcome)
        elif opened.kind == NODE and opened.task is not None and opened.retry:
            self._retried.pop(opened.task, None)
        span.end()
        if detach and opened.token is not None:
            _detach(opened.token)
        if opened.entry is not None:
            opened.entry["status"] = outcome
            start = getattr(span, "start_time", None)
            end = getattr(span, "end_time", None)
            if start and end:
                opened.entry["duration_ms"] = to_ms(end - start)


def _current_is(key: str, value: Any, key2: str | None = None, value2: Any = None) -> bool:
    """True when the current span already is such a span (the graph's own helpers) and
    still open (an ended span a shielded end callback could not detach is no parent)."""
    current = trace.get_current_span()
    if not current.is_recording():
        return False
    attributes = getattr(current, "attributes", None)
    if not attributes or attributes.get(key) != value:
        return False
    return key2 is None or attributes.get(key2) == value2


def _detach(token: object) -> None:
    """Detach the node's context. The end callback may come in another context than the
    start (a run cut short): then there is nothing of ours to restore."""
    try:
        otel_context._RUNTIME_CONTEXT.detach(token)  # type: ignore[arg-type]
    except Exception:
        pass
