"""build_graph(): the compiled support agent (DESIGN.md §8).

    guardrail_pre ─┬─> retrieve_context ─> generate ─┬─> guardrail_post ─> END
                   └──────(refused)──────────^  ^    ├─> human_approval ─^
                                                └────┴── browser_tool (the person's browser)

The library's :class:`relay.GraphAgent` opens every node's span
(relay/langgraph/instrument.py); a node honours the fault-injection header
(:func:`span_relay_demo.faults.with_faults`) inside that span, so a fault looks like what
it imitates.
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from span_relay_demo.faults import with_faults
from span_relay_demo.nodes import (
    NodeDeps,
    make_generate,
    make_guardrail_post,
    make_guardrail_pre,
    make_human_approval,
    make_retrieve_context,
)
from span_relay_demo.nodes.browser import browser_tool
from span_relay_demo.nodes.generate import route_after_generate
from span_relay_demo.nodes.guard import route_after_guardrail
from span_relay_demo.state import SupportState

GRAPH_ID = "support_agent"


def build_graph(
    deps: NodeDeps, checkpointer: BaseCheckpointSaver | None = None
) -> CompiledStateGraph:
    builder = StateGraph(SupportState)
    nodes = {
        "guardrail_pre": make_guardrail_pre(deps),
        "retrieve_context": make_retrieve_context(deps),
        "generate": make_generate(deps),
        "human_approval": make_human_approval(deps),
        "browser_tool": browser_tool,
        "guardrail_post": make_guardrail_post(deps),
    }
    for name, fn in nodes.items():
        builder.add_node(name, with_faults(name, fn))
    builder.add_edge(START, "guardrail_pre")
    builder.add_conditional_edges(
        "guardrail_pre", route_after_guardrail, ["retrieve_context", "generate"]
    )
    builder.add_edge("retrieve_context", "generate")
    builder.add_conditional_edges(
        "generate", route_after_generate, ["human_approval", "browser_tool", "guardrail_post"]
    )
    builder.add_edge("browser_tool", "generate")
    builder.add_edge("human_approval", "guardrail_post")
    builder.add_edge("guardrail_post", END)
    return builder.compile(checkpointer=checkpointer, name=GRAPH_ID)
