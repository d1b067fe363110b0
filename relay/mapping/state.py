"""What the mapping remembers between spans, and how much of it.

Spans are a tree and events are about turns: a node span does not carry the turn id (only
the run's root does), a tool span names no node (its parent does), and ``node_completed``
summarises the node's children. So the state keeps, per trace, the run it belongs to and,
per open span, the node it sits under. Every memory here is bounded (the limits below),
because a relay follows spans for as long as it runs.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from relay.events import Event

#: How many runs (traces) the state follows at once before it forgets the oldest.
MAX_OPEN_RUNS = 10_000
#: How many facts of children whose node is not known yet the state keeps (all runs).
MAX_ORPHANS = 10_000


@dataclass(slots=True)
class Run:
    turn_id: str
    thread_id: str
    trace_id: str
    kind: str
    root_span_id: str | None = None
    foreign: bool = False  # turn id from the trace id: another instrumentation's run
    nodes: list[dict[str, Any]] = field(default_factory=list)  # foreign: for the response
    failed_node: str | None = None
    paused: bool = False

    def event(self, type_: str, time_ns: int, fields: dict[str, Any]) -> Event:
        """An event of this run, stamped with a span's time."""
        return Event(type_, self.thread_id, self.turn_id, self.trace_id, ms(time_ns), fields)


@dataclass(slots=True)
class Open:
    """An open span under a run: which node it belongs to, if any."""

    run: Run
    node_span_id: str | None  # the enclosing node span (itself, for a node)
    node: str | None
    is_node: bool = False
    summary: dict[str, Any] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)
    task: str | None = None  # a foreign node's LangGraph task
    tool_started: bool = False


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
    #: span_id -> facts of its ended descendants, while no enclosing node is known
    orphans: OrderedDict[str, Bag] = field(default_factory=OrderedDict)
    #: foreign runs that ended: their late spans map to nothing
    ended: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def remember(self, run: Run) -> None:
        """Follow a new run; past MAX_OPEN_RUNS the oldest is forgotten."""
        self.runs[run.trace_id] = run
        while len(self.runs) > MAX_OPEN_RUNS:
            self.forget_run(next(iter(self.runs)))

    def forget_run(self, trace_id: str) -> None:
        self.runs.pop(trace_id, None)
        stale = [sid for sid, o in self.spans.items() if o.run.trace_id == trace_id]
        for sid in stale:
            del self.spans[sid]
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
    """A span time (epoch ns) as an event's ``ts`` (epoch ms)."""
    return round(time_ns / 1e6, 3)
