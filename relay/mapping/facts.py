"""What the mapping knows of one span: its role and the :class:`Facts` read from it.

A span is a run root, a graph node, a tool, a model call, a retrieval or a guardrail (the
roles below), or none of them. The rule table (:mod:`relay.mapping.rules`) and the
placement reader (:func:`relay.mapping.foreign_attributes.placement`) both give a
:class:`Facts`; the engine and the modules around it read one. Nothing here reads a span.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay import conventions as c

# -- roles --------------------------------------------------------------------------------

ROOT = "root"
NODE = "node"
TOOL = "tool"
CHAT = "chat"
RETRIEVAL = "retrieval"
GUARDRAIL = "guardrail"

#: the GenAI operation a role stands for, for spans of other instrumentations
ROLE_OPERATION = {
    CHAT: c.OP_CHAT,
    RETRIEVAL: c.OP_RETRIEVAL,
    GUARDRAIL: c.OP_GUARDRAIL,
    TOOL: c.OP_TOOL,
}


@dataclass(slots=True)
class Facts:
    """What one rule (or the placement reader) read from one span."""

    role: str
    source: str
    name: str | None = None  # node, tool or agent name
    step: Any = None
    task_id: Any = None
    task: str | None = None  # the LangGraph task (checkpoint ns) of a node
    call_id: Any = None
    model: Any = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    documents: int | None = None
    thread_id: str | None = None
    langgraph_node: str | None = None  # the node a span runs in (from its metadata)
    activates: bool = False  # may begin a foreign run
    graph_id: str | None = None
    topology: dict[str, Any] | None = None
