"""What the mapping remembers between spans, and how much of it.

Spans are a tree and events are about turns: a node span does not carry the turn id (only
the run's root does), a tool span names no node (its parent does), and ``node_completed``
summarises the node's children. So the state keeps, per trace, the run it belongs to and,
per open span, the node it sits under. Every memory here is bounded (the limits below),
because a relay follows spans for as long as it runs.

A trace that no rule recognises yet (another instrumentation that sets its attributes only
when a span ends, as OpenInference does in-process) is followed *tentatively*: its open
spans are remembered, and what happens under spans that may still turn out to be nodes is
held (:class:`Held`), until the trace is recognised as a graph run (it becomes a run) or
its local root ends (it is forgotten).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from relay import conventions as c
from relay.events import Event
from relay.mapping.attributes import json_attr
from relay.mapping.discovery import Discovery
from relay.spans import to_ms

#: How many runs (traces) the state follows at once before it forgets the oldest.
MAX_OPEN_RUNS = 10_000
#: How many facts of children whose node is not known yet the state keeps (all runs).
MAX_ORPHANS = 10_000
#: How many traces no rule recognised yet the state follows at once (oldest forgotten).
MAX_TENTATIVE = 10_000
#: How many events one run holds while their node is not known yet (oldest dropped).
MAX_HELD = 10_000
#: How many graph topologies (their text) the state keeps read (see MappingState.topology).
MAX_TOPOLOGIES = 64


@dataclass(slots=True)
class Run:
    turn_id: str
    thread_id: str
    trace_id: str
    kind: str
    root_span_id: str | None = None
    foreign: bool = False  # turn id from the trace id: another instrumentation's run
    #: our instrumentation spans its graph (relay.graph.instrumented): any other
    #: instrumentation's spans in it (OpenInference, OpenLLMetry in-process) are plain spans
    instrumented: bool = False
    #: where the paused event says to resume: a GraphAgent's own route, else /chat/resume;
    #: None where the serving process offers none (the agent runs elsewhere)
    resume_path: str | None = "/chat/resume"
    graph_id: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)  # foreign: for the response
    failed_node: str | None = None
    paused: bool = False
    # -- foreign runs -------------------------------------------------------------------
    interrupts: list[dict[str, Any]] = field(default_factory=list)  # from paused nodes
    paused_tasks: set[str] = field(default_factory=set)  # their top-level LangGraph tasks
    discovery: Discovery | None = None  # the graph seen so far, when the agent sent none
    topology: dict[str, Any] | None = None  # the graph a foreign root named
    message: str = ""  # the user's message, from the run's input
    output: str = ""  # the answer a graph root inside the run wrote (OpenLLMetry)
    started_ns: int = 0
    paused_ns: int | None = None  # a resume: when the turn it resumes paused
    active: bool = True  # False: a tentative run (a trace no rule recognised yet)
    begun: bool = False  # its graph_topology is out
    span_ids: set[str] = field(default_factory=set)  # its open spans, in MappingState.spans
    held: list[Held] = field(default_factory=list)  # events waiting for their node
    #: LangGraph task -> the parent of the (foreign) node span that took it
    tasks: dict[str, str | None] = field(default_factory=dict)

    def event(self, type_: str, time_ns: int, fields: dict[str, Any]) -> Event:
        """An event of this run, stamped with a span's time."""
        return Event(
            type_,
            self.thread_id,
            self.turn_id,
            self.trace_id,
            (time_ns + 500) // 1000 / 1000,
            fields,
        )  # ms(time_ns), inlined


@dataclass(slots=True)
class Open:
    """An open span of a run (or of a tentative one): what it is, as far as known."""

    run: Run
    parent: str | None  # the parent span's id
    name: str  # the span's name
    start_ns: int
    node: str | None = None  # the node's name, for a node
    is_node: bool = False
    #: no rule said what it is at its start: it may turn out to be a node at its end
    maybe_node: bool = False
    firm: bool = False  # one of our nodes, or under one: nothing under it is a late node
    owner: Open | None = None  # under one of our nodes: the nearest (known for good)
    summary: dict[str, Any] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)
    task: str | None = None  # a foreign node's LangGraph task (checkpoint namespace)
    namespace: Sequence[str] = ()  # a node's enclosing nodes' names, outermost first
    tool_started: bool = False


@dataclass(slots=True)
class PausedTurn:
    """A foreign turn that paused on its thread: what a later run must show to resume it
    (one of its interrupted tasks, or a resume command as its input)."""

    turn_id: str
    tasks: set[str]
    discovery: Discovery | None
    paused_ns: int
    message: str
    topology: dict[str, Any] | None = None
    graph_id: str = ""


@dataclass(slots=True)
class Held:
    """An event (``tool_*``, ``text_delta``) of a span whose node is not known yet: it
    waits under ``anchor``, the nearest enclosing span that may still turn out to be a
    node, and gets ``fields["node"]`` when that is settled."""

    anchor: str
    type: str
    time_ns: int
    fields: dict[str, Any]


@dataclass(slots=True)
class Bag:
    """Facts of ended children waiting for their node to be recognised."""

    trace_id: str
    summary: dict[str, Any] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class MappingState:
    """What the mapping remembers between spans. One per live relay, one per replay."""

    runs: OrderedDict[str, Run] = field(default_factory=OrderedDict)  # trace_id -> run
    spans: dict[str, Open] = field(default_factory=dict)  # span_id -> open span
    #: trace_id -> tentative run: a trace no rule recognised yet
    tentative: OrderedDict[str, Run] = field(default_factory=OrderedDict)
    #: span_id -> facts of its ended descendants, while no enclosing node is known
    orphans: OrderedDict[str, Bag] = field(default_factory=OrderedDict)
    #: foreign runs that ended: their late spans map to nothing
    ended: OrderedDict[str, None] = field(default_factory=OrderedDict)
    #: thread -> its foreign turn that paused (a resume on the thread continues it)
    paused: OrderedDict[str, PausedTurn] = field(default_factory=OrderedDict)
    #: the resume route the serving process offers for a graph id (None: none); unset,
    #: a run's root says it (the in-process path: the run was started here)
    resume_route: Callable[[str], str | None] | None = None
    #: when a list: each run that begins (and each foreign run that ends) is appended
    #: ("start"/"end", run, the span), for whoever keeps the store's index and the turn
    #: records
    notes: list[tuple[str, Run, Any]] | None = None
    #: ``relay.graph.topology`` as read, by its text (see :meth:`topology`)
    topologies: dict[str, tuple[Any, bool]] = field(default_factory=dict)

    def topology(self, raw: Any) -> tuple[Any, bool]:
        """A run root's ``relay.graph.topology``, read as ``json_attr`` reads it (empty
        when absent; ``ok`` False when cut or malformed), each text once: the runs of a
        graph declare the same one, and their ``graph_topology`` events share what it
        reads (as every reader shares an event: an event is never changed once made).
        Bounded: past MAX_TOPOLOGIES texts the memo starts over."""
        if type(raw) is not str:
            return json_attr({c.GRAPH_TOPOLOGY: raw}, c.GRAPH_TOPOLOGY, {"nodes": [], "edges": []})
        read = self.topologies.get(raw)
        if read is None:
            if len(self.topologies) >= MAX_TOPOLOGIES:
                self.topologies.clear()
            read = json_attr({c.GRAPH_TOPOLOGY: raw}, c.GRAPH_TOPOLOGY, {"nodes": [], "edges": []})
            self.topologies[raw] = read
        return read

    def pause(self, thread_id: str, turn: PausedTurn) -> None:
        self.paused[thread_id] = turn
        self.paused.move_to_end(thread_id)
        while len(self.paused) > MAX_OPEN_RUNS:
            self.paused.popitem(last=False)

    def note(self, what: str, run: Run, record: Any) -> None:
        if self.notes is not None:
            self.notes.append((what, run, record))

    def remember(self, run: Run) -> None:
        """Follow a new run; past MAX_OPEN_RUNS the oldest is forgotten."""
        self.runs[run.trace_id] = run
        while len(self.runs) > MAX_OPEN_RUNS:
            self.forget_run(next(iter(self.runs)))

    def follow(self, run: Run) -> None:
        """Follow a trace tentatively; past MAX_TENTATIVE the oldest is forgotten."""
        self.tentative[run.trace_id] = run
        while len(self.tentative) > MAX_TENTATIVE:
            self.forget_run(next(iter(self.tentative)))

    def activate(self, run: Run) -> None:
        """A tentative run is recognised as a run."""
        self.tentative.pop(run.trace_id, None)
        run.active = True
        self.remember(run)

    def run_of(self, trace_id: str) -> Run | None:
        run = self.runs.get(trace_id)
        if run is None and self.tentative:
            run = self.tentative.get(trace_id)
        return run

    def open(self, span_id: str, opened: Open) -> None:
        self.spans[span_id] = opened
        opened.run.span_ids.add(span_id)

    def close(self, span_id: str) -> Open | None:
        opened = self.spans.pop(span_id, None)
        if opened is not None:
            opened.run.span_ids.discard(span_id)
        return opened

    def forget_run(self, trace_id: str) -> None:
        run = self.runs.pop(trace_id, None) or self.tentative.pop(trace_id, None)
        if run is not None:
            for sid in run.span_ids:
                self.spans.pop(sid, None)
            run.span_ids.clear()
        if self.orphans:
            for sid in [s for s, b in self.orphans.items() if b.trace_id == trace_id]:
                del self.orphans[sid]

    def end_foreign(self, trace_id: str) -> None:
        """A foreign run ended: forget it, and remember (bounded) that its trace is over,
        since its instrumentation may still export spans of it."""
        self.forget_run(trace_id)
        self.ended[trace_id] = None
        while len(self.ended) > MAX_OPEN_RUNS:
            self.ended.popitem(last=False)

    def orphan_bag(self, span_id: str, trace_id: str) -> Bag:
        """The facts waiting under ``span_id`` (a span not open here); past MAX_ORPHANS
        the oldest bag is dropped."""
        bag = self.orphans.get(span_id)
        if bag is None:
            bag = self.orphans[span_id] = Bag(trace_id)
            while len(self.orphans) > MAX_ORPHANS:
                self.orphans.popitem(last=False)
        return bag


def ms(time_ns: int) -> float:
    """A span time (epoch ns) as an event's ``ts`` (epoch ms, to the microsecond)."""
    return to_ms(time_ns)
