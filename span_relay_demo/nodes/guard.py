"""guardrail_pre and guardrail_post: rule checks recorded on ``apply_guardrail`` spans."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from relay import child_span
from relay import conventions as c
from span_relay_demo.guardrails import check_input, check_output
from span_relay_demo.nodes.deps import NodeDeps
from span_relay_demo.state import SupportState


def make_guardrail_pre(deps: NodeDeps):
    def guardrail_pre(state: SupportState, config: RunnableConfig) -> dict[str, Any]:
        with child_span(
            deps.tracer,
            "apply_guardrail input_policy",
            c.OP_GUARDRAIL,
            {c.GUARDRAIL_NAME: "input_policy"},
        ) as span:
            decision = check_input(state["message"])
            span.set_attribute(c.GUARDRAIL_DECISION, decision.decision)
            span.set_attribute(c.GUARDRAIL_REASON, decision.reason)
        return {"verdict": decision.decision, "block_reason": decision.reason}

    return guardrail_pre


def make_guardrail_post(deps: NodeDeps):
    def guardrail_post(state: SupportState, config: RunnableConfig) -> dict[str, Any]:
        with child_span(
            deps.tracer,
            "apply_guardrail output_policy",
            c.OP_GUARDRAIL,
            {c.GUARDRAIL_NAME: "output_policy"},
        ) as span:
            decision = check_output(state.get("answer", ""))
            span.set_attribute(c.GUARDRAIL_DECISION, decision.decision)
            span.set_attribute(c.GUARDRAIL_REASON, decision.reason)
        if decision.decision == "redact" and decision.text is not None:
            return {"answer": decision.text}
        return {}

    return guardrail_post


def route_after_guardrail(state: SupportState) -> str:
    """Blocked messages skip retrieval: generate writes the refusal."""
    return "generate" if state.get("verdict") == "block" else "retrieve_context"
