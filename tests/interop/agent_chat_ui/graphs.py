"""The graph agent-chat-ui's interrupt card is shown on, in plain LangGraph (nothing of
span-relay): on ``MessagesState``, as agent-chat-ui sends its input, a model's tool call
that a human reviews before it runs. The interrupt's value is the shape LangChain's
human-in-the-loop middleware writes (``action_requests`` and ``review_configs``), which
agent-chat-ui draws as its review card; its answer is ``{"decisions": [...]}``, which the
card sends back as ``command.resume``."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

EMAIL = {"to": "ana@example.com", "subject": "Your refund", "body": "It is on its way."}
SENT = "The refund email is sent to ana@example.com."
NOT_SENT = "I did not send the email."


def propose(state: MessagesState) -> dict[str, Any]:
    call = {"name": "send_email", "args": EMAIL, "id": "call_send_email", "type": "tool_call"}
    return {"messages": [AIMessage(content="I will email Ana.", tool_calls=[call])]}


def ask_reviewer(state: MessagesState) -> dict[str, Any]:
    answer = interrupt(
        {
            "action_requests": [
                {"name": "send_email", "args": EMAIL, "description": "Send this email?"}
            ],
            "review_configs": [
                {"action_name": "send_email", "allowed_decisions": ["approve", "reject"]}
            ],
        }
    )
    decisions = answer.get("decisions", []) if isinstance(answer, dict) else []
    approved = bool(decisions) and decisions[0].get("type") == "approve"
    result = "sent" if approved else "rejected by the reviewer"
    return {
        "messages": [
            ToolMessage(content=result, tool_call_id="call_send_email", name="send_email"),
            AIMessage(content=SENT if approved else NOT_SENT),
        ]
    }


def review_graph() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("propose", propose)
    builder.add_node("review", ask_reviewer)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", "review")
    builder.add_edge("review", END)
    return builder.compile()


#: what langgraph.json serves (compiled without a checkpointer: the server brings its own)
review = review_graph()
