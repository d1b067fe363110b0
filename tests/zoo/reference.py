"""What LangGraph itself says about a run, to hold a relay's events against.

- :func:`topology`: the compiled graph's nodes and edges from ``get_graph()``, in the
  shape of ``relay.langgraph.topology.topology()`` (what ``graph_topology`` carries).
- :func:`updates` / :func:`resume`: one ``astream(stream_mode="updates",
  subgraphs=True)`` pass, as ``(namespace, node)`` pairs in stream order, namespaces
  without their task ids (``("review:1f2e…",)`` becomes ``("review",)``), and the
  interrupts it stopped on, kept apart from the nodes.
- :func:`drive`: a whole :class:`tests.zoo.graphs.Case` turn (run, then resume).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, StateSnapshot

from tests.zoo.graphs import Case, Graph

Namespace = tuple[str, ...]
INTERRUPT = "__interrupt__"


def topology(graph: Graph) -> dict[str, Any]:
    """The compiled graph's nodes and edges, as ``relay.langgraph.topology.topology()``
    gives them."""
    drawable = graph.get_graph()
    return {
        "graph_id": graph.name,
        "nodes": [{"id": n.id, "label": n.name} for n in drawable.nodes.values()],
        "edges": [
            {"source": e.source, "target": e.target, "conditional": e.conditional}
            for e in drawable.edges
        ],
    }


def strip_task_ids(namespace: Namespace) -> Namespace:
    """``("sub:abc123", "inner:def456")`` -> ``("sub", "inner")`` (node names have no
    ``:``, LangGraph reserves it)."""
    return tuple(part.partition(":")[0] for part in namespace)


@dataclass
class Updates:
    """One stream pass: every node update in order, and the interrupts it paused on."""

    nodes: list[tuple[Namespace, str]] = field(default_factory=list)
    interrupts: list[tuple[Namespace, Any]] = field(default_factory=list)
    """``(namespace, Interrupt.value)`` for each ``__interrupt__`` entry."""

    @property
    def interrupted(self) -> bool:
        return bool(self.interrupts)


async def updates(graph: Graph, graph_input: Any, config: RunnableConfig) -> Updates:
    """Run ``graph_input`` (a dict, or a ``Command``) and record what the stream says."""
    seen = Updates()
    async for item in graph.astream(graph_input, config, stream_mode="updates", subgraphs=True):
        namespace, chunk = cast(tuple[Namespace, dict[str, Any]], item)
        ns = strip_task_ids(namespace)
        for key, value in chunk.items():
            if key == INTERRUPT:
                seen.interrupts.extend((ns, i.value) for i in value)
            else:
                seen.nodes.append((ns, key))
    return seen


async def resume(graph: Graph, value: Any, config: RunnableConfig) -> Updates:
    """Resume a paused thread with ``Command(resume=value)``, recorded as :func:`updates`."""
    return await updates(graph, Command(resume=value), config)


@dataclass
class Turn:
    """A case's turn under LangGraph alone: the first pass, the resume (if it paused)
    and the thread's state at the end."""

    first: Updates
    resumed: Updates | None
    state: StateSnapshot

    @property
    def nodes(self) -> list[tuple[Namespace, str]]:
        """Every node update of the turn, first pass then resume."""
        return self.first.nodes + (self.resumed.nodes if self.resumed else [])


async def drive(graph: Graph, case: Case, config: RunnableConfig) -> Turn:
    """Run ``case`` on ``graph`` (built with a checkpointer), resuming once if it paused."""
    first = await updates(graph, case.input(), config)
    resumed = await resume(graph, case.resume, config) if first.interrupted else None
    return Turn(first, resumed, await graph.aget_state(config))
