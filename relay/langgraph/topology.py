"""A compiled graph's topology, as ``graph_topology`` carries it (DESIGN.md §4).

LangGraph's own drawing (``graph.get_graph()``) is the source: its nodes and edges, in
its order. A compiled subgraph is one node here; its inner nodes appear in the events
with their ``namespace``.
"""

from __future__ import annotations

from typing import Any


def topology(graph: Any, graph_id: str) -> dict[str, Any]:
    """``{graph_id, nodes[{id, label}], edges[{source, target, conditional}]}``."""
    drawable = graph.get_graph()
    return {
        "graph_id": graph_id,
        "nodes": [{"id": n.id, "label": n.name} for n in drawable.nodes.values()],
        "edges": [{"source": e.source, "target": e.target, "conditional": bool(e.conditional)}
                  for e in drawable.edges],
    }
