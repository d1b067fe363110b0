"""generate: the model call. Answers from the passages, proposes a tool, or refuses."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from agent.faults import TransientModelError, fault_for
from agent.nodes.deps import NodeDeps
from agent.state import SupportState
from agent.tools.refund import issue_refund
from agent.tracing import child_span
from relay import conventions as c

SYSTEM = (
    "You are the support assistant of Larkspur Goods, a small online shop. Answer only "
    "from the context passages, cite them by their [id], and be brief. To refund an "
    "order, call issue_refund; a person approves it before it runs."
)

REFUSALS = {
    "prompt_injection": "I can't help with that request. I can answer questions about "
                        "orders, shipping, returns and refunds.",
    "off_topic": "That is outside what I can help with here. I can answer questions about "
                 "orders, shipping, returns and refunds.",
}
DEFAULT_REFUSAL = "I can't help with that request."


MAX_ATTEMPTS = 3
BACKOFF_S = 0.2


def is_transient(exc: BaseException) -> bool:
    """Errors worth a retry: the connection, a timeout, rate limits, a 5xx."""
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    name = type(exc).__name__
    return name in ("APIConnectionError", "APITimeoutError", "RateLimitError",
                    "InternalServerError", "ServiceUnavailableError")


def make_generate(deps: NodeDeps):
    model = deps.model.model.bind_tools([issue_refund])

    async def generate(state: SupportState, config: RunnableConfig) -> dict[str, Any]:
        if state.get("verdict") == "block":
            reason = state.get("block_reason", "")
            return {"answer": REFUSALS.get(reason, DEFAULT_REFUSAL), "refused": True,
                    "citations": []}
        passages = state.get("passages") or []
        context = "\n".join(f"[{p['doc_id']}] {p['title']}\n{p['text']}" for p in passages)
        messages = [SystemMessage(SYSTEM),
                    HumanMessage(f"{state['message']}\n\nContext:\n{context}")]
        fault = fault_for("generate", config)
        failures_left = fault.count if fault and fault.kind == "transient" else 0
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with child_span(deps.tracer, f"chat {deps.model.name}", c.OP_CHAT, {
                    c.PROVIDER: deps.model.provider,
                    c.REQUEST_MODEL: deps.model.name,
                    "relay.model.attempt": attempt,
                }) as span:
                    if failures_left:
                        failures_left -= 1
                        raise TransientModelError("injected transient model failure")
                    reply = await model.ainvoke(messages)
                    assert isinstance(reply, AIMessage)
                    usage = reply.usage_metadata or {}
                    span.set_attribute(c.INPUT_TOKENS, int(usage.get("input_tokens", 0)))
                    span.set_attribute(c.OUTPUT_TOKENS, int(usage.get("output_tokens", 0)))
                    model_name = (reply.response_metadata or {}).get("model_name")
                    if model_name:
                        span.set_attribute(c.RESPONSE_MODEL, str(model_name))
                break
            except Exception as exc:
                # retry a transient failure only while nothing has happened that a retry
                # would repeat: no tool has run in this turn (and no text was streamed)
                if (attempt == MAX_ATTEMPTS or not is_transient(exc)
                        or state.get("tool_outcome") is not None):
                    raise
                await asyncio.sleep(BACKOFF_S * 2 ** (attempt - 1))
        refund_calls = [t for t in reply.tool_calls if t["name"] == "issue_refund"]
        if refund_calls:
            call = refund_calls[0]
            return {"proposed_tool": {"name": call["name"], "args": dict(call["args"]),
                                      "id": call.get("id") or "call_0"}}
        answer = str(reply.content)
        cited = [p for p in passages if f"[{p['doc_id']}]" in answer] or passages
        return {"answer": answer, "proposed_tool": None,
                "citations": [{"doc_id": p["doc_id"], "title": p["title"]} for p in cited]}

    return generate


def route_after_generate(state: SupportState) -> str:
    """A proposed side effect waits for a human; everything else is checked and sent."""
    return "human_approval" if state.get("proposed_tool") else "guardrail_post"
