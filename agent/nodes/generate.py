"""generate: the model call. Answers from the passages, proposes a tool, or refuses."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

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
        with child_span(deps.tracer, f"chat {deps.model.name}", c.OP_CHAT, {
            c.PROVIDER: deps.model.provider,
            c.REQUEST_MODEL: deps.model.name,
        }) as span:
            reply = await model.ainvoke(messages)
            assert isinstance(reply, AIMessage)
            usage = reply.usage_metadata or {}
            span.set_attribute(c.INPUT_TOKENS, int(usage.get("input_tokens", 0)))
            span.set_attribute(c.OUTPUT_TOKENS, int(usage.get("output_tokens", 0)))
            model_name = (reply.response_metadata or {}).get("model_name")
            if model_name:
                span.set_attribute(c.RESPONSE_MODEL, str(model_name))
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
