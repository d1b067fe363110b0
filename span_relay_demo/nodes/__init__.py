"""The support agent's nodes. Each is ``fn(state, config)``; :mod:`span_relay_demo.graph` wraps
them in node spans and fault injection and wires them together."""

from span_relay_demo.nodes.approval import make_human_approval
from span_relay_demo.nodes.deps import NodeDeps
from span_relay_demo.nodes.generate import make_generate
from span_relay_demo.nodes.guard import make_guardrail_post, make_guardrail_pre
from span_relay_demo.nodes.retrieve import make_retrieve_context

__all__ = [
    "NodeDeps",
    "make_generate",
    "make_guardrail_post",
    "make_guardrail_pre",
    "make_human_approval",
    "make_retrieve_context",
]
