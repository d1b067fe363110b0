"""GraphAgent: any compiled LangGraph graph as turns (DESIGN.md §2, §3, §6).

```python
agent = GraphAgent(graph, name="research")   # a compiled graph; instruments it
relay.mount(app, agent)                      # /chat, /chat/resume, /agui, the SPA
```

One run of the graph (a chat or a resume) is one coroutine that the relay's
:class:`relay.turns.runs.RunManager` starts as the turn's task: it opens the run's root
span (every attribute the mapping needs, DESIGN.md §3), runs the graph with
:class:`relay.langgraph.instrument.GraphInstrumentation` as its callback handler (node,
model and tool spans, text deltas), bounds it by the turn timeout, and returns the
ChatResponse, which the root span carries at its end. A finished answer is then saved in
a ``save_message`` span (the ``message_saved`` event).

The hooks (relay/langgraph/hooks.py) shape what a graph's values mean; their defaults
fit graphs on ``MessagesState``. ``config_of(headers)`` adds request-specific entries to
the run's ``configurable`` (it may raise :class:`relay.ApiError` for a bad header).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl
from langgraph.types import Command
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

from relay import conventions as c
from relay.langgraph.checkpoints import read_checkpoints
from relay.langgraph.client_tools import run_graph
from relay.langgraph.custom_events import MAX_BYTES, CustomEvents, stream_writer_config
from relay.langgraph.failures import (
    TURN_TIMEOUT,
    Failure,
    failure_of,
    limit_failure,
    tool_timeout,
)
from relay.langgraph.fenced_saver import fenced
from relay.langgraph.hooks import (
    default_answer,
    default_citations,
    default_input,
    default_status,
    default_waiting,
    input_keys,
)
from relay.langgraph.instrument import AddEvent, GraphInstrumentation
from relay.langgraph.retries import RetryPolicies
from relay.langgraph.spans import RunSpan, run_span
from relay.langgraph.thread_ttl import ThreadGate
from relay.langgraph.topology import topology
from relay.turns.draining import RunDrained, current_drain
from relay.turns.messages import Message, MessageStore
from relay.turns.records import TurnRecord, TurnStore
from relay.turns.recovering import POLICIES as RECOVERY_POLICIES
from relay.turns.recovering import Recovery
from relay.turns.response import ChatResponse

log = logging.getLogger("relay.agent")

#: each step's checkpoint is saved before the next step starts (LangGraph's default,
#: ``async``, saves it while the next step runs): a run cut by its process's death goes on
#: from the last step that completed, and a node that completed never runs again on a
#: recovery (relay/turns/recovering.py). It costs one checkpoint write's wait per step.
DURABILITY = "sync"
#: the key of a checkpoint's metadata that holds the trace id of the run that wrote it
#: (a run of a turn is a trace: a resume's and a recovery's are traces of their own)
TRACE_KEY = "relay_trace_id"

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class PendingInterrupt:
    id: str
    value: Any


@dataclass(slots=True)
class _Binding:
    """What a relay gives the agent when it starts (Relay.lifespan)."""

    tracer: Tracer
    turns: TurnStore
    messages: MessageStore | None
    add_event: AddEvent | None
    turn_timeout_s: float
    tool_timeout_s: float | None = None
    #: the relay's per-process exclusion of a thread's runs and its deletion (thread_ttl.py)
    threads: ThreadGate | None = None
    #: the largest custom payload kept whole (RELAY_CUSTOM_EVENT_MAX_BYTES)
    custom_max_bytes: int = MAX_BYTES


class GraphAgent:
    """A compiled LangGraph graph, served as turns: what :meth:`relay.Relay.mount` takes.

    Wrap any compiled graph (a prebuilt agent, a supervisor, a graph with subgraphs,
    ``Send`` or interrupts) and mount it; the relay serves it at
    ``/graphs/{name}/chat``, ``/chat/resume`` and ``/agui``::

        agent = GraphAgent(graph, name="research", examples=["What changed in 2.0?"])
        relay.mount(app, agent)

    ``name`` (default: the graph's own name, else ``graph``) is part of those URLs;
    ``title``, ``description`` and ``examples`` are what the SPA shows. The hooks say
    what the graph's values mean (relay/langgraph/hooks.py; their defaults fit graphs on
    ``MessagesState``): ``input_of`` makes the graph's input from the user's message,
    ``answer_of``, ``citations_of`` and ``status_of`` read the final values,
    ``waiting_of`` words the answer while the turn waits on a person, and ``config_of``
    adds entries to the run's ``configurable`` from the request's headers.

    The app's lifespan (``Relay.lifespan``) gives the agent the relay's parts
    (:meth:`bind`: the tracer, the turn and message stores, a checkpointer and a
    LangGraph store when the graph has none); after that each :meth:`chat` or
    :meth:`resume` is one run's coroutine, which the routes hand to the relay's
    ``RunManager``: it opens the run's root span, runs the graph under
    :class:`GraphInstrumentation` and returns the :class:`ChatResponse`.
    """

    def __init__(
        self,
        graph: Any,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        examples: Sequence[str] = (),
        input_of: Callable[[str, TurnRecord], Any] = default_input,
        answer_of: Callable[[Any], str] = default_answer,
        citations_of: Callable[[Any], list[dict[str, Any]]] = default_citations,
        status_of: Callable[[Any], str] = default_status,
        waiting_of: Callable[[list[dict[str, Any]]], str] = default_waiting,
        config_of: Callable[[Mapping[str, str]], Mapping[str, Any]] | None = None,
        recovery: str | None = None,
    ) -> None:
        if recovery is not None and recovery not in RECOVERY_POLICIES:
            raise ValueError(
                f"GraphAgent recovery={recovery!r}: use one of {', '.join(RECOVERY_POLICIES)} "
                "(None: RELAY_RECOVERY decides)"
            )
        if not callable(getattr(graph, "ainvoke", None)) or not callable(
            getattr(graph, "get_graph", None)
        ):
            raise TypeError(
                f"GraphAgent takes a compiled LangGraph graph "
                f"(StateGraph(...).compile()), not {type(graph).__name__}"
            )
        own = getattr(graph, "name", None)
        self.name = name or (own if own and own != "LangGraph" else "graph")
        if not _NAME.match(self.name):
            raise ValueError(
                f"GraphAgent name {self.name!r}: use 1-64 letters, digits, "
                "'_' or '-' (it is part of the URL /graphs/{name}/chat)"
            )
        self.graph = graph
        self.graph_id = self.name
        self.title = title or self.name.replace("_", " ").replace("-", " ").capitalize()
        self.description = description
        self.examples = [str(e) for e in examples]
        self.input_of = input_of
        self.answer_of = answer_of
        self.citations_of = citations_of
        self.status_of = status_of
        self.waiting_of = waiting_of
        self.config_of = config_of
        #: how a turn of this graph whose process died is taken up (RELAY_RECOVERY when
        #: None): relay/turns/recovering.py
        self.recovery = recovery
        #: the keys of the graph's input (its input JSON schema), None when unknown
        self.input_keys = input_keys(graph)
        self._default_input = input_of is default_input
        self.topology = topology(graph, self.graph_id)
        #: its nodes' RetryPolicies: an attempt LangGraph runs again is no failure
        self.retry_policies = RetryPolicies(graph)
        self._bound: _Binding | None = None

    # -- set-up -------------------------------------------------------------------------

    def bind(
        self,
        *,
        tracer: Tracer,
        turns: TurnStore,
        messages: MessageStore | None,
        add_event: AddEvent | None,
        turn_timeout_s: float,
        checkpointer: Any = None,
        tool_timeout_s: float | None = None,
        store: Any = None,
        threads: ThreadGate | None = None,
        custom_max_bytes: int = MAX_BYTES,
    ) -> None:
        """Give the agent the relay's parts; a graph compiled without a checkpointer gets
        the relay's (interrupts and resumes need one), either behind the runs' fence
        (relay/langgraph/fenced_saver.py), and one compiled without a store
        the relay's LangGraph store (long-term memory: relay/langgraph/store.py).
        ``threads``: each run holds its thread there, so that the checkpointer's TTL
        sweeper (relay/langgraph/thread_ttl.py) never deletes a thread in use."""
        if checkpointer is not None and getattr(self.graph, "checkpointer", None) is None:
            self.graph = self.graph.copy(update={"checkpointer": checkpointer})
        own = getattr(self.graph, "checkpointer", None)
        if fenced(own) is not own:  # a run that lost its turn saves nothing (fencing.py)
            self.graph = self.graph.copy(update={"checkpointer": fenced(own)})
        if store is not None and getattr(self.graph, "store", None) is None:
            self.graph = self.graph.copy(update={"store": store})
        self._bound = _Binding(
            tracer,
            turns,
            messages,
            add_event,
            turn_timeout_s,
            tool_timeout_s,
            threads,
            custom_max_bytes,
        )

    @property
    def bound(self) -> _Binding:
        if self._bound is None:
            raise RuntimeError(
                f"GraphAgent {self.name!r} is not started: mount it with "
                "relay.mount(app, agent) and run the app with "
                "lifespan=relay.lifespan"
            )
        return self._bound

    def describe(self, routes: Mapping[str, str]) -> dict[str, Any]:
        """``GET /graphs/{name}``: the graph's topology and the SPA's settings."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "examples": list(self.examples),
            "graph_id": self.graph_id,
            "topology": self.topology,
            "routes": dict(routes),
        }

    def message_refusal(self) -> str | None:
        """Why a bare ``message`` cannot be this graph's input, or None when it can: the
        default ``input_of`` makes ``{"messages": [...]}``, which a graph whose input has
        no ``messages`` drops (it would answer nothing). A graph given its own
        ``input_of`` takes a message as the hook decides."""
        if not self._default_input or self.input_keys is None or "messages" in self.input_keys:
            return None
        keys = ", ".join(repr(k) for k in self.input_keys) or "none"
        return (
            f"Graph {self.name} takes no 'message': its input has no 'messages' key. "
            f"Send 'input', the graph's own input object (its keys: {keys}), instead."
        )

    def request_config(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """The run's extra ``configurable`` entries for a request (``config_of``)."""
        return dict(self.config_of(headers)) if self.config_of is not None else {}

    # -- the thread ---------------------------------------------------------------------

    async def pending_interrupts(self, thread_id: str) -> list[PendingInterrupt] | None:
        """The thread's open interrupts; None when the thread has no checkpoint at all.
        StoreUnavailable (503) while the checkpointer's database is away."""
        config = {"configurable": {"thread_id": thread_id}}
        snapshot = await read_checkpoints(self.graph.aget_state(config))
        if not snapshot.created_at and not snapshot.values:
            return None
        return [PendingInterrupt(i.id, i.value) for i in snapshot.interrupts]

    # -- runs -----------------------------------------------------------------------------

    async def chat(
        self, record: TurnRecord, graph_input: Any, configurable: Mapping[str, Any] | None = None
    ) -> ChatResponse:
        """A chat run: ``graph_input`` (the hook ``input_of``'s, or the body's ``input``)."""
        with self._run_span(record, "chat", message=record.message) as run:
            await self._remember_root(record, run)
            response = await self._invoke(record, run, graph_input, configurable)
        await self._save_message(record, run, response)
        return response

    async def resume(
        self,
        record: TurnRecord,
        answers: dict[str, Any],
        configurable: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Resume a paused turn; ``answers`` maps interrupt ids to the person's answers."""
        link = (record.root_trace_id, record.root_span_id)
        human_wait_ms = (
            round(time.time() * 1000 - record.paused_at, 3) if record.paused_at else None
        )
        link_to = (link[0], link[1]) if link[0] and link[1] else None
        with self._run_span(record, "resume", link_to=link_to) as run:
            await self._remember_root(record, run)
            if human_wait_ms is not None:
                run.end_attributes[c.TURN_HUMAN_WAIT_MS] = human_wait_ms
            response = await self._invoke(record, run, Command(resume=answers), configurable)
        await self._save_message(record, run, response)
        return response

    async def recover(
        self,
        record: TurnRecord,
        recovery: Recovery,
        configurable: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Take up a turn whose run was cut (its process died or stopped) from the
        thread's last checkpoint: the nodes that completed do not run again, the step
        that was cut does. Its root links to the cut run's and says so
        (``relay.recovery.*``: the mapping's ``turn_recovered``)."""
        link = (record.root_trace_id, record.root_span_id)
        link_to = (link[0], link[1]) if link[0] and link[1] else None
        extra: dict[str, Any] = {
            c.RECOVERY_ATTEMPT: recovery.attempt,
            c.RECOVERY_REASON: recovery.reason,
        }
        if recovery.resumed_from:
            extra[c.RECOVERY_RESUMED_FROM] = recovery.resumed_from
        with self._run_span(record, "recover", link_to=link_to, extra=extra) as run:
            await self._remember_root(record, run)
            response = await self._invoke(record, run, None, configurable)
        await self._save_message(record, run, response)
        return response

    async def checkpoint_id(self, thread_id: str) -> str | None:
        """The id of the thread's last checkpoint (what a recovery goes on from), None
        when it has none."""
        config = {"configurable": {"thread_id": thread_id}}
        snapshot = await read_checkpoints(self.graph.aget_state(config))
        configured = getattr(snapshot, "config", None) or {}
        found = configured.get("configurable", {}).get("checkpoint_id")
        return str(found) if found else None

    def _run_span(self, record: TurnRecord, kind: str, **kwargs: Any) -> Any:
        return run_span(
            self.bound.tracer,
            agent=self.name,
            thread_id=record.thread_id,
            turn_id=record.turn_id,
            run_kind=kind,
            graph_id=self.graph_id,
            topology=self.topology,
            instrumented=True,
            user_id=record.user_id or None,
            **kwargs,
        )

    async def _remember_root(self, record: TurnRecord, run: RunSpan) -> None:
        """The paused run's root is what a resume links to."""
        log.info("run started", extra={"thread_id": record.thread_id})
        record.root_trace_id = run.trace_id
        record.root_span_id = run.span_id
        await self.bound.turns.update(
            record.turn_id, root_trace_id=run.trace_id, root_span_id=run.span_id
        )

    async def _invoke(
        self,
        record: TurnRecord,
        run: RunSpan,
        graph_input: Any,
        configurable: Mapping[str, Any] | None,
    ) -> ChatResponse:
        bound = self.bound
        spans = GraphInstrumentation(
            bound.tracer,
            bound.add_event,
            run.node_log,
            tool_timeout_s=bound.tool_timeout_s,
            user_id=record.user_id or None,
            retry_policies=self.retry_policies,
        )
        run_configurable = {**(configurable or {}), "thread_id": record.thread_id}
        if bound.add_event is not None:  # payloads sent from inside nodes: custom events
            spans.custom = CustomEvents(bound.add_event, spans.node_span, bound.custom_max_bytes)
            run_configurable = stream_writer_config(
                run_configurable, spans.custom.write, getattr(self.graph, "store", None)
            )
        run_configurable["run_id"] = record.turn_id  # as the Agent Server's: in checkpoints
        config: dict[str, Any] = {
            "configurable": run_configurable,
            "callbacks": [spans],
            # each checkpoint says which run (trace) wrote it: the Agent Server routes'
            # run streams read a run's own steps by it (relay/agent_server/stream.py)
            "metadata": {TRACE_KEY: run.trace_id},
        }
        control = RunControl()  # a graceful stop drains it at a step boundary
        drain = current_drain.get()
        if drain is not None:
            drain.on_request(control.request_drain)
        try:
            async with asyncio.timeout(bound.turn_timeout_s), self._holding(record.thread_id):
                values, limit = await run_graph(
                    self.graph, graph_input, config, control, DURABILITY
                )
        except GraphDrained:  # stopped after the step in flight, its checkpoint saved
            spans.close("cancelled")
            raise RunDrained() from None
        except TimeoutError:
            spans.close("cancelled")
            return self._failed(record, run, TURN_TIMEOUT)
        except asyncio.CancelledError:
            spans.close("cancelled")
            if spans.timed_out is None:
                raise
            task = asyncio.current_task()  # the tool ran in this task: our cancel, not theirs
            if task is not None and task.cancelling():
                task.uncancel()
            return self._failed(record, run, tool_timeout(spans.timed_out))
        except Exception as exc:
            spans.close("error")
            if spans.timed_out is not None:  # LangGraph's NodeCancelledError of our cancel
                return self._failed(record, run, tool_timeout(spans.timed_out))
            log.exception("turn %s: the graph raised", record.turn_id)
            failure = failure_of(exc, run.node_log.snapshot(), spans.failed_tool)
            return self._failed(record, run, failure)
        spans.close("cancelled")  # nothing is left open by a run that returned
        if limit is not None:  # a client-tool limit stopped the graph (client_tools.py)
            return self._failed(record, run, limit_failure(limit.code, limit.message))
        return self._finished(record, run, values)

    def _holding(self, thread_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The thread, held for the run against its deletion (thread_ttl.ThreadGate)."""
        gate = self.bound.threads
        return gate.using(thread_id) if gate is not None else contextlib.nullcontext()

    def _finished(self, record: TurnRecord, run: RunSpan, values: Any) -> ChatResponse:
        pending = values.get("__interrupt__", []) if isinstance(values, Mapping) else []
        interrupts = [{"id": i.id, "value": i.value} for i in pending]
        if interrupts:
            status = "paused"
            answer = self.waiting_of(interrupts)
            citations = []
        else:
            status = self.status_of(values)
            answer = self.answer_of(values)
            citations = self.citations_of(values)
        response = ChatResponse(
            thread_id=record.thread_id,
            turn_id=record.turn_id,
            trace_id=run.trace_id,
            status=status,
            answer=answer,
            citations=citations,
            interrupts=interrupts,
            nodes=run.node_log.snapshot(),
        )
        attributes: dict[str, Any] = {c.TURN_RESPONSE: response.to_dict()}
        if interrupts:
            attributes[c.TURN_INTERRUPTS] = interrupts
        run.finish(status, **attributes)
        return response

    def _failed(self, record: TurnRecord, run: RunSpan, failure: Failure) -> ChatResponse:
        """End the run with an ``error`` (its codes: relay/langgraph/failures.py)."""
        response = ChatResponse(
            thread_id=record.thread_id,
            turn_id=record.turn_id,
            trace_id=run.trace_id,
            status="error",
            answer=failure.message,
            nodes=run.node_log.snapshot(),
        )
        run.finish(
            "error",
            **{
                c.ERROR_CODE: failure.code,
                c.ERROR_MESSAGE: failure.message,
                c.ERROR_NODE: failure.node,
                c.ERROR_RETRYABLE: failure.retryable,
                c.TURN_RESPONSE: response.to_dict(),
            },
        )
        return response

    async def _save_message(self, record: TurnRecord, run: RunSpan, response: ChatResponse) -> None:
        """Save the answer, after the run's root span has ended (so ``turn_completed`` is
        already on its way), in a ``save_message`` span under that root: its end is the
        ``message_saved`` event. A failed save is logged and leaves no event; the answer
        stands."""
        bound = self.bound
        if bound.messages is None or response.status not in ("answered", "refused"):
            return
        message_id = secrets.token_hex(16)
        with bound.tracer.start_as_current_span(
            "save_message",
            context=trace.set_span_in_context(run.span),
            record_exception=False,
            set_status_on_exception=False,
            attributes={
                c.OPERATION: c.OP_SAVE_MESSAGE,
                c.MESSAGE_ID: message_id,
                c.MESSAGE_TURN_ID: record.turn_id,
                c.CONVERSATION_ID: record.thread_id,
            },
        ) as span:
            try:
                await bound.messages.save(
                    Message(
                        message_id,
                        record.turn_id,
                        record.thread_id,
                        response.answer,
                        time.time() * 1000,
                    )
                )
            except Exception as exc:
                log.exception("could not save the answer of turn %s", record.turn_id)
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
