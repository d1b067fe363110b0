"""A run's turn log as LangGraph's run stream (``POST /threads/{id}/runs/stream``).

:class:`RunStreamEncoder` is an encoder of :class:`relay.delivery.streaming.EventStream`
(the same writer as every stream of the relay: heartbeats, send timeout, disconnects,
bus loss) whose batches go through its async :meth:`RunStreamEncoder.frames`: the
``values`` and ``updates`` modes read the thread's checkpoints, which the events alone do
not carry. Frames, in LangGraph's SSE shapes:

- first ``metadata`` ``{"run_id", "attempt": 1}``;
- ``values``: the state after each step. A run saves each step's checkpoint before the
  next step starts (relay/langgraph/agent.py ``DURABILITY``), so at a top-level
  ``node_started`` the checkpoints of the steps before it are there, and at the run's
  end all of them: each checkpoint of the run not yet sent (``source`` ``loop``) is one
  ``values`` frame, oldest first. A run that paused ends with its state again, with
  ``__interrupt__: [{value, id}]``;
- ``updates``: ``{node: update}`` per task of each finished step (the step's checkpoint's
  tasks, whose results the next checkpoint settles); a pause ends with
  ``{"__interrupt__": [...]}``;
- ``messages-tuple`` (event ``messages``): ``[chunk, metadata]`` per ``text_delta``, the
  chunk an ``AIMessageChunk``'s ``model_dump()``, the metadata ``langgraph_node``,
  ``langgraph_step``, ``langgraph_checkpoint_ns``, ``thread_id``, ``run_id``; and, as
  LangGraph does, each message a node returned that was not streamed as it was written
  (a tool's message, an answer the node made itself), whole, once its step is saved. A
  returned message whose id is a streamed message's (the relay's instrumentation records
  LangChain's message id on each chunk) was sent already, as LangGraph does;
- ``custom``: a ``custom`` event's payload (``data``);
- ``error`` ``{"error", "message"}`` for a failed or cancelled run (and for a stream
  that lost the shared bus).

Only the top level is streamed: no ``mode|namespace`` events for subgraphs yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from langchain_core.messages import AIMessageChunk

from relay.agent_server.jsonable import interrupt_json, jsonable
from relay.agent_server.state import step_updates
from relay.delivery.negotiation import SSE
from relay.events import (
    CUSTOM,
    ERROR,
    NODE_STARTED,
    PAUSED,
    TEXT_DELTA,
    TURN_COMPLETED,
    Event,
    dumps,
)

#: the checkpoints read back at most at one step boundary
MAX_HISTORY = 1000


class Checkpoints(Protocol):
    """The thread's checkpoints (:class:`relay.agent_server.stream.ThreadCheckpoints`)."""

    async def since(self, checkpoint_id: str | None) -> list[Any]: ...


def checkpoint_id_of(snapshot: Any) -> str | None:
    """A ``StateSnapshot``'s checkpoint id (None for a thread with no checkpoint)."""
    config = getattr(snapshot, "config", None) or {}
    found = config.get("configurable", {}).get("checkpoint_id")
    return str(found) if found else None


class ThreadCheckpoints:
    """A thread's checkpoints from a compiled graph's checkpointer."""

    def __init__(self, graph: Any, thread_id: str) -> None:
        self.graph = graph
        self.config = {"configurable": {"thread_id": thread_id}}

    async def latest_id(self) -> str | None:
        """The id of the thread's latest checkpoint (None: it has none)."""
        return checkpoint_id_of(await self.graph.aget_state(self.config))

    async def since(self, checkpoint_id: str | None) -> list[Any]:
        """The snapshots from ``checkpoint_id`` (included) to the latest, oldest first;
        all of them (at most :data:`MAX_HISTORY`) when ``checkpoint_id`` is None."""
        found: list[Any] = []
        async for snapshot in self.graph.aget_state_history(self.config, limit=MAX_HISTORY):
            found.append(snapshot)
            if checkpoint_id is not None and checkpoint_id_of(snapshot) == checkpoint_id:
                break
        found.reverse()
        return found


def frame(name: str, data: Any) -> bytes:
    """One SSE frame, as LangGraph's server writes it (no id)."""
    return f"event: {name}\ndata: {dumps(data)}\n\n".encode()


class RunStreamEncoder:
    """LangGraph's run stream of one run (see the module docstring). ``baseline``: the
    thread's latest checkpoint before the run started (None: none), where the run's own
    checkpoints begin."""

    media_type = SSE

    def __init__(
        self,
        run_id: str,
        thread_id: str,
        modes: Sequence[str],
        checkpoints: Checkpoints,
        baseline: str | None,
    ) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.modes = frozenset(modes)
        self.checkpoints = checkpoints
        #: the last checkpoint whose values (and step's updates) were sent
        self.sent = baseline
        self._latest: Any = None
        #: each top-level node's latest start: (step, task id), for message metadata
        self._nodes: dict[str, tuple[Any, Any]] = {}
        #: the ids of the messages streamed chunk by chunk (text_delta)
        self._streamed: set[str] = set()

    # -- the encoder interface of relay.delivery.streaming ---------------------------------

    def preamble(self) -> bytes:
        return frame("metadata", {"run_id": self.run_id, "attempt": 1})

    def event(self, event: Event) -> bytes:
        """The frames an event makes by itself (``messages``, ``custom``)."""
        fields = event.fields
        if event.type == NODE_STARTED and not fields.get("namespace"):
            self._nodes[str(fields.get("node"))] = (fields.get("step"), fields.get("task_id"))
        if event.type == TEXT_DELTA and "messages-tuple" in self.modes:
            self._streamed.add(str(fields.get("message_id")))
            return frame("messages", self._message(fields))
        if event.type == CUSTOM and "custom" in self.modes:
            return frame("custom", fields.get("data"))
        return b""

    def heartbeat(self) -> bytes:
        return b": heartbeat\n\n"

    def problem(self, type_: str, fields: dict[str, Any]) -> bytes:
        """The writer's own frames: an ``error`` (the bus is away) as LangGraph's; a
        ``reset`` note or a ``reconnect`` has no LangGraph counterpart (the stream ends or
        goes on as it would)."""
        if type_ == "error":
            return frame("error", {"error": fields.get("code"), "message": fields.get("message")})
        return b""

    def epilogue(self) -> bytes:
        return b""

    # -- the async hook --------------------------------------------------------------------

    async def frames(self, batch: list[Event]) -> bytes:
        """A batch's frames: checkpoints read at each step boundary and at the end."""
        out: list[bytes] = []
        for event in batch:
            top_level = not event.fields.get("namespace")
            if event.type == NODE_STARTED and top_level and self._wants_checkpoints:
                out.append(await self._steps())
            elif event.type in (TURN_COMPLETED, PAUSED, ERROR):
                if self._wants_checkpoints:
                    out.append(await self._steps())
                out.append(await self._end(event))
            out.append(self.event(event))
        return b"".join(out)

    @property
    def _wants_checkpoints(self) -> bool:
        return bool(self.modes & {"values", "updates", "messages-tuple"})

    async def _steps(self) -> bytes:
        """``values`` and ``updates`` of every step saved since the last one sent."""
        snapshots = await self.checkpoints.since(self.sent)
        if not snapshots:
            return b""
        self._latest = snapshots[-1]
        out: list[bytes] = []
        known = self.sent is not None and checkpoint_id_of(snapshots[0]) == self.sent
        previous = snapshots[0] if known else None
        for snapshot in snapshots[1:] if known else snapshots:
            if previous is not None:
                for update in step_updates(previous.tasks):
                    if "__start__" in update:
                        continue
                    if "messages-tuple" in self.modes:
                        out += self._returned_messages(update)
                    if "updates" in self.modes:
                        out.append(frame("updates", update))
            source = (snapshot.metadata or {}).get("source")
            if source == "loop" and "values" in self.modes:
                out.append(frame("values", jsonable(snapshot.values)))
            previous = snapshot
        self.sent = checkpoint_id_of(snapshots[-1])
        return b"".join(out)

    async def _end(self, event: Event) -> bytes:
        """A pause's interrupts, or a failure's ``error`` frame."""
        if event.type == ERROR:
            return frame(
                "error",
                {"error": event.fields.get("code"), "message": event.fields.get("message")},
            )
        if event.type != PAUSED:
            return b""
        latest = self._latest
        if latest is None:
            found = await self.checkpoints.since(self.sent)
            latest = found[-1] if found else None
        if latest is not None:
            interrupts = [interrupt_json(i) for i in latest.interrupts]
        else:
            interrupts = [jsonable(i) for i in event.fields.get("interrupts", [])]
        out = []
        if "updates" in self.modes:
            out.append(frame("updates", {"__interrupt__": interrupts}))
        if "values" in self.modes:
            values = jsonable(latest.values) if latest is not None else {}
            if not isinstance(values, dict):
                values = {}
            out.append(frame("values", {**values, "__interrupt__": interrupts}))
        return b"".join(out)

    def _message(self, fields: Mapping[str, Any]) -> list[Any]:
        node = str(fields.get("node") or "")
        chunk = AIMessageChunk(content=str(fields.get("delta") or ""), id=fields.get("message_id"))
        return [jsonable(chunk.model_dump()), self._metadata(node)]

    def _metadata(self, node: str) -> dict[str, Any]:
        step, task_id = self._nodes.get(node, (None, None))
        return {
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "langgraph_node": node,
            "langgraph_step": step,
            "langgraph_checkpoint_ns": f"{node}:{task_id}" if task_id else node,
        }

    def _returned_messages(self, update: Mapping[str, Any]) -> list[bytes]:
        """The ``messages`` frames of the messages a node returned and did not stream."""
        out: list[bytes] = []
        for node, wrote in update.items():
            messages = wrote.get("messages") if isinstance(wrote, Mapping) else None
            if isinstance(messages, Mapping):
                messages = [messages]
            if not isinstance(messages, list):
                continue
            for message in messages:
                if not isinstance(message, Mapping) or message.get("id") in self._streamed:
                    continue  # streamed: sent already, chunk by chunk
                out.append(frame("messages", [message, self._metadata(node)]))
        return out
