"""A run's turn log as LangGraph's run stream (``POST /threads/{id}/runs/stream``, and the
join stream ``GET /threads/{id}/runs/{run_id}/stream``).

:class:`RunStreamEncoder` is an encoder of :class:`relay.delivery.streaming.EventStream`
(the same writer as every stream of the relay: heartbeats, send timeout, disconnects,
bus loss) whose batches go through its async :meth:`RunStreamEncoder.frames`: the
``values`` and ``updates`` modes read the thread's checkpoints, which the events alone do
not carry. Frames, in LangGraph's SSE shapes:

- first ``metadata`` ``{"run_id", "attempt": 1}``;
- ``values``: the state after each step. A run saves each step's checkpoint before the
  next step starts (relay/langgraph/agent.py ``DURABILITY``) and marks each checkpoint
  with its trace (``TRACE_KEY``: a run of a turn is a trace), so at a top-level
  ``node_started`` of step k the run's checkpoints of the steps before k are there, and
  at the run's end all of them: each is one ``values`` frame (``source`` ``loop``),
  oldest first; a resumed run (``command.resume``: it writes no ``input`` checkpoint)
  first sends the state it resumes from, as LangGraph does (at the first step boundary
  that has one of the run's checkpoints: after the resumed step's ``messages``). A run
  that paused ends with its state again, with
  ``__interrupt__: [{value, id, response_schema}]``;
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

**Event ids.** Which frames an event makes depends only on the turn's log and the run's
checkpoints (a step's checkpoints are chosen by the step and the trace, never by what
happened to be saved when the frame was made), so the same log gives the same frames,
live, from another replica, and after the run ended. Frame ``n`` of the event with seq
``S`` has the id ``S.n``, counted over every mode (the frames of the modes a stream did
not ask for count too): an id means the same frame in any stream of the run, whatever
its modes. A stream that resumes after ``S.n`` (``Last-Event-ID``) makes the run's frames
again from its start and sends those after it: nothing missed, nothing twice. The
``metadata`` frame is ``A.0``, ``A`` the seq the run's events follow.

**Subgraphs** (``stream_subgraphs``). A node of a subgraph starts with the subgraph's
``namespace`` (its enclosing nodes' names) and its parent's span: its checkpoint namespace
is its parent node's (``research:<task id>``, ``research:<task id>|inner:<task id>``)
followed by its own ``node:<task id>``. Its frames are named ``mode|<the subgraph's
namespace>``, as LangGraph names them: ``values|ns`` and ``updates|ns`` from the
subgraph's own checkpoints (read under that ``checkpoint_ns``, by the run's trace, at the
subgraph's step boundaries and, once the step of its parent node is over, at its parent's
next boundary), ``messages|ns`` (metadata ``langgraph_checkpoint_ns`` the node's own
namespace) and ``custom|ns``. Without ``stream_subgraphs`` they are not sent, as
LangGraph sends none: a subgraph's tokens and ``custom`` payloads stay out of the top
level, whose ``messages`` then carry the messages the subgraph returned, whole. They are
made (and numbered) either way, so an id names the same frame in every stream of a run.
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
from relay.langgraph.agent import TRACE_KEY
from relay.langgraph.checkpoints import read_checkpoints

#: the checkpoints read back at most at one step boundary
MAX_HISTORY = 1000
#: the stream modes whose frames are numbered (in this order within an event's frames)
MODES = ("values", "updates", "messages-tuple", "custom")
#: a frame every stream sends, whatever its modes (``metadata``, ``error``)
ALWAYS = "*"

#: a mode prefix: the frame is sent only in a stream without ``stream_subgraphs`` (a
#: subgraph's returned message, which such a stream gets at the top level)
FLAT = "flat:"

#: one frame before it is written: (the mode it belongs to, its event name, its data)
Part = tuple[str, str, Any]


class Checkpoints(Protocol):
    """The thread's checkpoints (:class:`relay.agent_server.stream.ThreadCheckpoints`)."""

    async def of_run(self, trace_id: str) -> tuple[Any, list[Any]]: ...

    async def of_subgraph(self, trace_id: str, ns: str) -> tuple[Any, list[Any]]: ...


def checkpoint_id_of(snapshot: Any) -> str | None:
    """A ``StateSnapshot``'s checkpoint id (None for a thread with no checkpoint)."""
    config = getattr(snapshot, "config", None) or {}
    found = config.get("configurable", {}).get("checkpoint_id")
    return str(found) if found else None


def trace_of(snapshot: Any) -> str | None:
    """The trace id of the run that wrote a checkpoint (None: not a relay run's)."""
    found = (getattr(snapshot, "metadata", None) or {}).get(TRACE_KEY)
    return str(found) if found else None


def step_of(snapshot: Any) -> int:
    """A checkpoint's step (-1, the input's, when it has none)."""
    found = (getattr(snapshot, "metadata", None) or {}).get("step")
    return found if isinstance(found, int) else -1


class ThreadCheckpoints:
    """A thread's checkpoints from a compiled graph's checkpointer."""

    def __init__(self, graph: Any, thread_id: str) -> None:
        self.graph = graph
        self.config = {"configurable": {"thread_id": thread_id}}

    async def latest_id(self) -> str | None:
        """The id of the thread's latest checkpoint (None: it has none)."""
        return checkpoint_id_of(await self.graph.aget_state(self.config))

    async def of_run(self, trace_id: str) -> tuple[Any, list[Any]]:
        """The checkpoints the run ``trace_id`` wrote, oldest first (at most
        :data:`MAX_HISTORY`), and the one before them (None: the run began the thread)."""
        return await self._of(trace_id, self.config)

    async def of_subgraph(self, trace_id: str, ns: str) -> tuple[Any, list[Any]]:
        """The checkpoints the run ``trace_id`` wrote in the subgraph whose checkpoint
        namespace is ``ns`` (``node:<task id>|...``), as :meth:`of_run`."""
        configurable = {**self.config["configurable"], "checkpoint_ns": ns}
        return await self._of(trace_id, {"configurable": configurable})

    async def _of(self, trace_id: str, config: dict[str, Any]) -> tuple[Any, list[Any]]:
        async def read() -> tuple[Any, list[Any]]:
            found: list[Any] = []
            history = self.graph.aget_state_history(config, limit=MAX_HISTORY)
            async for snapshot in history:
                if trace_of(snapshot) == trace_id:
                    found.append(snapshot)
                elif found:  # the checkpoint the run began from
                    found.reverse()
                    return snapshot, found
            found.reverse()
            return None, found

        return await read_checkpoints(read())


def streamed_interrupt(item: Any) -> dict[str, Any]:
    """An interrupt as LangGraph's run stream writes it: ``{"value", "id"}`` and, where this
    LangGraph's ``Interrupt`` has it, ``response_schema`` (the stream writes the dataclass's
    fields; the thread's state, relay/agent_server/state.py, does not)."""
    found = interrupt_json(item)
    if hasattr(item, "response_schema"):
        found["response_schema"] = jsonable(item.response_schema)
    return found


def frame(name: str, data: Any, event_id: str | None = None) -> bytes:
    """One SSE frame, as LangGraph's server writes it (with an ``id:`` line or none)."""
    head = f"event: {name}\n" if event_id is None else f"event: {name}\nid: {event_id}\n"
    return f"{head}data: {dumps(data)}\n\n".encode()


def parse_event_id(raw: str | None) -> tuple[int, int] | None:
    """A ``Last-Event-ID`` of this stream (``S.n``) as ``(S, n)``; None for none, ``-1``
    (LangGraph's "from the start") or an empty one; ValueError for anything else."""
    if raw is None or raw.strip() in ("", "-1"):
        return None
    seq, dot, index = raw.strip().partition(".")
    if not dot or not seq.isdigit() or not index.isdigit() or len(raw) > 40:
        raise ValueError(raw)
    return int(seq), int(index)


class RunStreamEncoder:
    """LangGraph's run stream of one run (see the module docstring). ``start``: the seq
    the run's events follow (the ``metadata`` frame's id); ``resumable``: write ``id:``
    lines; ``cursor``: the last frame the client has (``(S, n)``), whose frames and
    every one before it are made and not sent."""

    media_type = SSE

    def __init__(
        self,
        run_id: str,
        thread_id: str,
        modes: Sequence[str],
        checkpoints: Checkpoints,
        *,
        start: int = 0,
        resumable: bool = False,
        cursor: tuple[int, int] | None = None,
        subgraphs: bool = False,
    ) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.modes = frozenset(modes) | {ALWAYS}
        self.checkpoints = checkpoints
        self.start = start
        self.resumable = resumable
        self.cursor = cursor
        self.subgraphs = subgraphs
        #: the checkpoints whose values (and step's updates) were made
        self._made: set[str] = set()
        #: each run's (trace's) latest checkpoint made, for its pause's values
        self._latest: dict[str, Any] = {}
        #: each node's latest start: (step, its checkpoint namespace, its subgraph's), for
        #: message metadata (a text delta names its node only)
        self._nodes: dict[str, tuple[Any, str, str]] = {}
        #: each node's checkpoint namespace, by its span (a child's parent)
        self._paths: dict[str, str] = {}
        #: each node's checkpoint namespace -> (its subgraph's namespace, its step there)
        self._owners: dict[str, tuple[str, Any]] = {}
        #: the subgraphs a node started in (their namespaces, in order), and those whose
        #: every step was made
        self._subs: list[str] = []
        self._subs_done: set[str] = set()
        #: the ids of the messages streamed chunk by chunk (text_delta)
        self._streamed: set[str] = set()
        #: the seq of the last event made into frames: an event delivered again (a bus
        #: reader that read a part of the log twice) makes none
        self._last_seq = start
        #: the runs (traces) whose start was read: a resume's first values are sent once
        self._begun: set[str] = set()
        #: the ids of the messages a subgraph's node returned (sent under ``messages|ns``)
        self._sent_in_subgraph: set[str] = set()

    # -- the encoder interface of relay.delivery.streaming ---------------------------------

    def preamble(self) -> bytes:
        return self._write(
            self.start, [(ALWAYS, "metadata", {"run_id": self.run_id, "attempt": 1})]
        )

    def event(self, event: Event) -> bytes:
        """An event's frames without I/O: none (every batch goes through :meth:`frames`;
        the writer asks this only of the ``message_saved`` after the end, which makes
        no frame in LangGraph's stream)."""
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
            if event.seq <= self._last_seq:
                continue
            self._last_seq = event.seq
            parts: list[Part] = []
            if event.type == NODE_STARTED:
                step = event.fields.get("step")
                below = step if isinstance(step, int) else None
                ns = self._enter(event.fields)
                if not ns:
                    parts += await self._subgraph_steps(event.trace_id, ns, below)
                    parts += await self._steps(event.trace_id, below)
                elif below is not None:  # (a subgraph's node without a step: no boundary)
                    parts += await self._subgraph_steps(event.trace_id, ns, below)
                    parts += await self._steps(event.trace_id, below, ns)
            elif event.type in (TURN_COMPLETED, PAUSED, ERROR):
                parts += await self._subgraph_steps(event.trace_id, "", None)
                parts += await self._steps(event.trace_id, None)
                parts += await self._end(event)
            parts += self._of_event(event)
            out.append(self._write(event.seq, parts))
        return b"".join(out)

    def _write(self, seq: int, parts: list[Part]) -> bytes:
        """The parts of the event ``seq`` this stream sends: its modes', after the cursor."""
        out: list[bytes] = []
        for index, (mode, name, data) in enumerate(parts):
            if mode.startswith(FLAT):
                if self.subgraphs:
                    continue
                mode = mode[len(FLAT) :]
            if mode not in self.modes or ("|" in name and not self.subgraphs):
                continue
            if self.cursor is not None and (seq, index) <= self.cursor:
                continue
            out.append(frame(name, data, f"{seq}.{index}" if self.resumable else None))
        return b"".join(out)

    def _of_event(self, event: Event) -> list[Part]:
        """The frames an event makes by itself (``messages``, ``custom``)."""
        fields = event.fields
        if event.type == TEXT_DELTA:
            self._streamed.add(str(fields.get("message_id")))
            node = str(fields.get("node") or "")
            ns = self._nodes.get(node, (None, "", ""))[2]
            return [("messages-tuple", named("messages", ns), self._message(fields))]
        if event.type == CUSTOM:
            ns = self._nodes.get(str(fields.get("node") or ""), (None, "", ""))[2]
            ns = ns if fields.get("namespace") else ""
            return [("custom", named("custom", ns), fields.get("data"))]
        return []

    def _enter(self, fields: Mapping[str, Any]) -> str:
        """A node's start noted: its checkpoint namespace, its subgraph's (returned: ""
        for the top level)."""
        node = str(fields.get("node") or "")
        task_id = fields.get("task_id")
        ns = ""
        names = fields.get("namespace")
        if names and isinstance(names, list):
            # its parent node's namespace: by the parent span, else (a span between them:
            # a subgraph invoked inside a node) the latest start of its enclosing node;
            # else its names alone (frames named so; no checkpoints read for them)
            ns = self._paths.get(str(fields.get("parent_span_id")), "")
            if not ns:
                ns = self._nodes.get(str(names[-1]), (None, "", ""))[1]
            if not ns:
                ns = "|".join(str(name) for name in names)
        own = f"{node}:{task_id}" if task_id else node
        path = f"{ns}|{own}" if ns else own
        self._paths[str(fields.get("span_id"))] = path
        self._owners[path] = (ns, fields.get("step"))
        self._nodes[node] = (fields.get("step"), path, ns)
        if ns and ns not in self._subs:
            self._subs.append(ns)
        return ns

    async def _subgraph_steps(self, trace_id: str, ns: str, below: int | None) -> list[Part]:
        """The last steps of the subgraphs run by the nodes of ``ns`` (a subgraph's
        namespace, "" the top level) whose step is before ``below`` (None: all): those
        steps are over, so are the subgraphs (deepest first)."""
        out: list[Part] = []
        for sub in self._subs:
            if sub in self._subs_done or sub not in self._owners:
                continue
            owner, step = self._owners[sub]
            if owner != ns or (below is not None and not (isinstance(step, int) and step < below)):
                continue
            self._subs_done.add(sub)
            out += await self._subgraph_steps(trace_id, sub, None)
            out += await self._steps(trace_id, None, sub)
        return out

    async def _steps(self, trace_id: str, below: int | None, ns: str = "") -> list[Part]:
        """``values`` and ``updates`` of the run's steps (in the subgraph ``ns``: its
        steps) before ``below`` (None: all of them) not made yet."""
        if ns and ":" not in ns.rsplit("|", 1)[-1]:
            return []  # a namespace without its task: its checkpoints are not known
        if ns:
            parent, snapshots = await self.checkpoints.of_subgraph(trace_id, ns)
        else:
            parent, snapshots = await self.checkpoints.of_run(trace_id)
        out: list[Part] = []
        settled = [s for s in snapshots if below is None or step_of(s) < below]
        if settled and not ns and trace_id not in self._begun:
            self._begun.add(trace_id)
            out += self._resumed_from(parent, settled[0])
        previous = parent
        for snapshot in snapshots:
            if below is not None and step_of(snapshot) >= below:
                break
            if not ns:  # read again: a pause's interrupts are new
                self._latest[trace_id] = snapshot
            made = checkpoint_id_of(snapshot)
            if made not in self._made:
                self._made.add(str(made))
                if previous is not None:
                    out += self._updates(previous, ns)
                if (snapshot.metadata or {}).get("source") == "loop":
                    out.append(("values", named("values", ns), jsonable(snapshot.values)))
            previous = snapshot
        return out

    def _resumed_from(self, parent: Any, first: Any) -> list[Part]:
        """A resumed run's first ``values``: the state it resumes from, as LangGraph sends
        it. A run resumes when it began from a checkpoint and its own first one is not an
        ``input`` checkpoint (a run with input writes one before its first node starts; a
        ``command.resume`` writes none). Told by the run's first checkpoint, so it is sent
        at the first step boundary that has one (the same one live and replayed): before
        the resumed step's ``updates`` and ``values``, after its ``messages``."""
        if parent is None or (first.metadata or {}).get("source") == "input":
            return []
        return [("values", "values", jsonable(parent.values))]

    def _updates(self, previous: Any, ns: str = "") -> list[Part]:
        """The ``updates`` (and returned messages) of the tasks of ``previous``'s step
        (in the subgraph ``ns``)."""
        out: list[Part] = []
        known = message_ids((previous.values or {}).get("messages"))
        for update in step_updates(previous.tasks):
            if "__start__" in update:
                continue
            out += self._returned_messages(update, ns, known)
            out.append(("updates", named("updates", ns), update))
        return out

    async def _end(self, event: Event) -> list[Part]:
        """A pause's interrupts, or a failure's ``error`` frame."""
        if event.type == ERROR:
            fields = event.fields
            return [
                (ALWAYS, "error", {"error": fields.get("code"), "message": fields.get("message")})
            ]
        if event.type != PAUSED:
            return []
        latest = self._latest.get(event.trace_id)
        if latest is not None:
            interrupts = [streamed_interrupt(i) for i in latest.interrupts]
        else:
            interrupts = [jsonable(i) for i in event.fields.get("interrupts", [])]
        values = jsonable(latest.values) if latest is not None else {}
        if not isinstance(values, dict):
            values = {}
        return [
            ("updates", "updates", {"__interrupt__": interrupts}),
            ("values", "values", {**values, "__interrupt__": interrupts}),
        ]

    def _message(self, fields: Mapping[str, Any]) -> list[Any]:
        """A text delta's ``[chunk, metadata]``."""
        node = str(fields.get("node") or "")
        chunk = AIMessageChunk(content=str(fields.get("delta") or ""), id=fields.get("message_id"))
        return [jsonable(chunk.model_dump()), self._metadata(node)]

    def _metadata(self, node: str) -> dict[str, Any]:
        step, path, _ = self._nodes.get(node, (None, node, ""))
        return {
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "langgraph_node": node,
            "langgraph_step": step,
            "langgraph_checkpoint_ns": path,
        }

    def _returned_messages(self, update: Mapping[str, Any], ns: str, known: set[str]) -> list[Part]:
        """The ``messages`` frames of the messages a node (of the subgraph ``ns``) returned
        that were neither streamed nor in its input (``known``: the state before its
        step). One a subgraph sent already goes to a stream without subgraphs only."""
        out: list[Part] = []
        for node, wrote in update.items():
            messages = wrote.get("messages") if isinstance(wrote, Mapping) else None
            if isinstance(messages, Mapping):
                messages = [messages]
            if not isinstance(messages, list):
                continue
            for message in messages:
                if not isinstance(message, Mapping):
                    continue
                found = message.get("id")
                if found in self._streamed or found in known:
                    continue  # streamed (sent already, chunk by chunk) or the node's input
                mode = "messages-tuple"
                if found in self._sent_in_subgraph:
                    mode = FLAT + mode
                elif ns and isinstance(found, str):
                    self._sent_in_subgraph.add(found)
                data = [message, self._metadata(node)]
                out.append((mode, named("messages", ns), data))
        return out


def named(mode: str, ns: str) -> str:
    """An event's name: ``mode``, or ``mode|ns`` for a subgraph's."""
    return f"{mode}|{ns}" if ns else mode


def message_ids(messages: Any) -> set[str]:
    """The ids of a state's ``messages`` (a list of messages or of their dicts)."""
    if not isinstance(messages, list):
        return set()
    found: set[str] = set()
    for message in messages:
        raw = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
        if isinstance(raw, str):
            found.add(raw)
    return found
