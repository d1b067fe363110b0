"""A compiled graph's topology, as ``graph_topology`` carries it (DESIGN.md §4).

LangGraph's own drawing (``graph.get_graph()``) is the source: its nodes and edges, in
its order. A compiled subgraph is one node here; its inner nodes appear in the events
with their ``namespace``.
"""

from __future__ import annotations

import json
from typing import Any

from relay import conventions as c


def topology(graph: Any, graph_id: str) -> dict[str, Any]:
    """``{graph_id, nodes[{id, label}], edges[{source, target, conditional}]}``."""
    drawable = graph.get_graph()
    return {
        "graph_id": graph_id,
        "nodes": [{"id": n.id, "label": n.name} for n in drawable.nodes.values()],
        "edges": [
            {"source": e.source, "target": e.target, "conditional": bool(e.conditional)}
            for e in drawable.edges
        ],
    }


def topology_metadata(graph: Any, graph_id: str | None = None) -> dict[str, str]:
    """The one line that gives a graph run by another instrumentation its real topology
    on the relay (else it is discovered as it runs)::

        graph = graph.with_config(metadata=relay.topology_metadata(graph))

    LangGraph hands run metadata to every callback, so OpenInference writes it in each
    span's ``metadata`` and OpenLLMetry as ``traceloop.association.properties.*``; the
    relay reads ``relay.graph.topology`` (and ``relay.graph.id``) there, as on a root."""
    name = graph_id or str(getattr(graph, "name", "") or "graph")
    shape = topology(graph, name)
    return {
        c.GRAPH_ID: name,
        c.GRAPH_TOPOLOGY: json.dumps(
            {"nodes": shape["nodes"], "edges": shape["edges"]}, separators=(",", ":")
        ),
    }
