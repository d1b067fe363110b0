"""The support agent's nodes. Each is ``fn(state, config)``; :mod:`agent.graph` wraps
them in node spans and fault injection and wires them together."""

from agent.nodes.approval import make_human_approval
from agent.nodes.deps import NodeDeps
from agent.nodes.generate import make_generate
from agent.nodes.guard import make_guardrail_post, make_guardrail_pre
from agent.nodes.retrieve import make_retrieve_context

__all__ = [
    "NodeDeps",
    "make_generate",
    "make_guardrail_post",
    "make_guardrail_pre",
    "make_human_approval",
    "make_retrieve_context",
]
