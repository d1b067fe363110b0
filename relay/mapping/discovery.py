"""A discovered topology: the graph of a run whose agent sent none, as its nodes run.

A foreign run (OpenInference, OpenLLMetry without workflow attributes, a Node.js agent)
often names no nodes or edges up front. Its ``graph_topology`` then says
``discovered: true`` with the nodes seen so far, and each time a top-level node or edge
is first seen a ``graph_discovered`` event (the whole graph discovered so far) goes out
right before that node's ``node_started``. Edges are the order the nodes ran in: a node
that starts follows the nodes that completed since the previous start (or, when none
did, the same nodes its parallel sibling followed); the first follows ``__start__``, and
the last ones lead to ``__end__`` when the run ends. A paused node is not a predecessor:
the resumed run takes up the same graph and runs that node again.

One line gives the real graph instead: the agent's root span carries
``relay.graph.topology`` (docs/events.md, "Topology").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relay import events as ev
from relay.events import Event

START_NODE = "__start__"
END_NODE = "__end__"


@dataclass(slots=True)
class Discovery:
    graph_id: str = ""
    nodes: list[str] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    frontier: list[str] = field(default_factory=list)  # completed since the last start
    before: list[str] = field(default_factory=lambda: [START_NODE])  # the last start's
    completed: bool = False  # a node completed since the last start

    def topology(self) -> dict[str, Any]:
        return {
            "graph_id": self.graph_id,
            "nodes": [{"id": n, "label": n} for n in self.nodes],
            "edges": [{"source": s, "target": t, "conditional": False} for s, t in self.edges],
            "discovered": True,
        }

    def started(self, node: str) -> bool:
        """A top-level node started; True when that adds a node or an edge."""
        if self.completed:
            self.before = self.frontier
            self.frontier = []
            self.completed = False
        grew = self._add(START_NODE) if not self.nodes else False
        grew = self._add(node) or grew
        for source in self.before:
            grew = self._edge(source, node) or grew
        return grew

    def finished(self, node: str, status: str) -> None:
        if status == "paused":
            return
        if node not in self.frontier:
            self.frontier.append(node)
        self.completed = True

    def ended(self) -> bool:
        """The run ended (not paused): its last nodes lead to ``__end__``."""
        if not self.nodes:
            return False
        last = self.frontier if self.completed else self.before
        grew = self._add(END_NODE)
        for source in last:
            grew = self._edge(source, END_NODE) or grew
        return grew

    def _add(self, node: str) -> bool:
        if node in self.nodes:
            return False
        self.nodes.append(node)
        return True

    def _edge(self, source: str, target: str) -> bool:
        if (source, target) in self.edges:
            return False
        self.edges.append((source, target))
        return True


def discovered(discovery: Discovery, make: Any, time_ns: int) -> Event:
    """The ``graph_discovered`` event of the graph so far (``make``: the run's event)."""
    return make(ev.GRAPH_DISCOVERED, time_ns, discovery.topology())


def node_discovered(run: Any, opened: Any) -> list[Event]:
    """A ``graph_discovered`` when this top-level node (an open node span of ``run``)
    adds to the run's discovered graph; else nothing."""
    discovery = run.discovery
    if (
        discovery is None
        or opened.namespace
        or not opened.node
        or not discovery.started(opened.node)
    ):
        return []
    return [discovered(discovery, run.event, opened.start_ns)]
