"""generate: the model call. Answers from the passages, proposes a tool, or refuses."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig

from relay import child_span
from relay import conventions as c
from span_relay_demo.faults import TransientModelError, fault_for
from span_relay_demo.nodes.deps import NodeDeps
from span_relay_demo.state import SupportState
from span_relay_demo.tools.local_time import local_time
from span_relay_demo.tools.refund import issue_refund

SYSTEM = (
    "You are the support assistant of Larkspur Goods, a small online shop. Answer only "
    "from the context passages, cite them by their [id], and be brief. To refund an "
    "order, call issue_refund; a person approves it before it runs. For the person's own "
    "date or time, call local_time (their browser answers it)."
)

REFUSALS = {
    "prompt_injection": "I can't help with that request. I can answer questions about "
    "orders, shipping, returns and refunds.",
    "off_topic": "That is outside what I can help with here. I can answer questions about "
    "orders, shipping, returns and refunds.",
}
DEFAULT_REFUSAL = "I can't help with that request."


PARTIAL_MARK = " [This answer was cut short: the model stopped responding.]"
MAX_ATTEMPTS = 3
BACKOFF_S = 0.2


def is_transient(exc: BaseException) -> bool:
    """Errors worth a retry: the connection, a timeout, rate limits, a 5xx."""
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    name = type(exc).__name__
    return name in (
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
    )


def make_generate(deps: NodeDeps):
    model = deps.model.model.bind_tools([issue_refund, local_time])

    async def generate(state: SupportState, config: RunnableConfig) -> dict[str, Any]:
        if state.get("verdict") == "block":
            reason = state.get("block_reason", "")
            return {
                "answer": REFUSALS.get(reason, DEFAULT_REFUSAL),
                "refused": True,
                "citations": [],
            }
        passages = state.get("passages") or []
        context = "\n".join(f"[{p['doc_id']}] {p['title']}\n{p['text']}" for p in passages)
        messages: list[BaseMessage] = [
            SystemMessage(SYSTEM),
            HumanMessage(f"{state['message']}\n\nContext:\n{context}"),
        ]
        messages += _client_exchange(state.get("client_result"))
        fault = fault_for("generate", config)
        failures_left = fault.count if fault and fault.kind == "transient" else 0
        cut_after = fault.count if fault and fault.kind == "cut" else None
        written: list[str] = []  # text already streamed to the person
        reply: AIMessageChunk | None = None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with child_span(
                    deps.tracer,
                    f"chat {deps.model.name}",
                    c.OP_CHAT,
                    {
                        c.PROVIDER: deps.model.provider,
                        c.REQUEST_MODEL: deps.model.name,
                        "relay.model.attempt": attempt,
                    },
                ) as span:
                    if failures_left:
                        failures_left -= 1
                        raise TransientModelError("injected transient model failure")
                    reply = None
                    async for chunk in model.astream(messages):
                        assert isinstance(chunk, AIMessageChunk)
                        reply = chunk if reply is None else reply + chunk
                        if isinstance(chunk.content, str) and chunk.content:
                            if cut_after is not None and len(written) >= cut_after:
                                raise TransientModelError("injected cut in the model stream")
                            deps.span_events(span, c.DELTA_EVENT, {c.DELTA_TEXT: chunk.content})
                            written.append(chunk.content)
                    assert reply is not None
                    usage = reply.usage_metadata or {}
                    span.set_attribute(c.INPUT_TOKENS, int(usage.get("input_tokens", 0)))
                    span.set_attribute(c.OUTPUT_TOKENS, int(usage.get("output_tokens", 0)))
                    model_name = (reply.response_metadata or {}).get("model_name")
                    if model_name:
                        span.set_attribute(c.RESPONSE_MODEL, str(model_name))
                break
            except Exception as exc:
                if written:
                    # text already reached the person: a retry would write it twice. End
                    # with what exists, marked partial (a partial answer beats an error).
                    return {
                        "answer": "".join(written) + PARTIAL_MARK,
                        "proposed_tool": None,
                        "citations": _citations(passages, "".join(written)),
                    }
                # retry a transient failure only while nothing has happened that a retry
                # would repeat: no tool has run in this turn and no text was streamed
                if (
                    attempt == MAX_ATTEMPTS
                    or not is_transient(exc)
                    or state.get("tool_outcome") is not None
                ):
                    raise
                await asyncio.sleep(BACKOFF_S * 2 ** (attempt - 1))
        assert reply is not None
        refund_calls = [t for t in reply.tool_calls if t["name"] == "issue_refund"]
        if refund_calls:
            call = refund_calls[0]
            return {
                "proposed_tool": {
                    "name": call["name"],
                    "args": dict(call["args"]),
                    "id": call.get("id") or "call_0",
                }
            }
        browser_calls = [t for t in reply.tool_calls if t["name"] == local_time.name]
        if browser_calls and not state.get("client_result"):
            call = browser_calls[0]
            return {
                "client_call": {
                    "name": call["name"],
                    "args": dict(call["args"]),
                    "id": call.get("id") or "call_local_time",
                }
            }
        answer = str(reply.content)
        return {
            "answer": answer,
            "proposed_tool": None,  # a browser tool's answer cites none
            "citations": [] if state.get("client_result") else _citations(passages, answer),
        }

    return generate


def _citations(passages: list[dict[str, Any]], answer: str) -> list[dict[str, Any]]:
    cited = [p for p in passages if f"[{p['doc_id']}]" in answer] or passages
    return [{"doc_id": p["doc_id"], "title": p["title"]} for p in cited]


def _client_exchange(result: dict[str, Any] | None) -> list[BaseMessage]:
    """The browser tool's call and answer, for the model's second pass."""
    if not result:
        return []
    return [
        AIMessage(
            content="",
            tool_calls=[
                {
                    "name": result["name"],
                    "args": result.get("args") or {},
                    "id": result["id"],
                    "type": "tool_call",
                }
            ],
        ),
        ToolMessage(
            content=str(result.get("content", "")), tool_call_id=result["id"], name=result["name"]
        ),
    ]


def route_after_generate(state: SupportState) -> str:
    """A proposed side effect waits for a human; a browser-side tool goes to the browser;
    everything else is checked and sent."""
    if state.get("proposed_tool"):
        return "human_approval"
    return "browser_tool" if state.get("client_call") else "guardrail_post"
