"""human_approval: pause for a person (LangGraph ``interrupt``), then run the tool or not.

LangGraph runs this node again from the top when the turn resumes, with ``interrupt``
returning the person's answer; everything before it is free of side effects, and the
refund itself is idempotent on the turn id. The refund acts as the turn's user
(``config["configurable"]["user"]``): an order that is not theirs is refused with an
answer, before anyone is asked to approve it, and again by the ledger itself.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from relay import child_span
from relay import conventions as c
from span_relay_demo.nodes.deps import NodeDeps
from span_relay_demo.state import SupportState
from span_relay_demo.tools.refund import GUEST, NotYourOrder

TOOL_LABELS = {"issue_refund": "Issuing refund"}


def approval_request(proposed: dict[str, Any]) -> dict[str, Any]:
    return {"type": "approval", "tool": proposed["name"], "args": proposed["args"]}


def user_of(config: RunnableConfig) -> str:
    """The id of the user the turn acts for; the guest when requests have no users."""
    user = (config.get("configurable") or {}).get("user")
    return str(user["id"]) if isinstance(user, dict) and user.get("id") else GUEST


def not_yours(order_id: str) -> dict[str, Any]:
    return {
        "tool_outcome": "refused",
        "citations": [],
        "refused": True,
        "answer": f"I can't refund order {order_id}: it is not one of your orders. "
        "Check the order number, or sign in as the person who placed it.",
    }


def make_human_approval(deps: NodeDeps):
    async def human_approval(state: SupportState, config: RunnableConfig) -> dict[str, Any]:
        proposed = state["proposed_tool"] or {}
        user_id = user_of(config)
        order = str(proposed.get("args", {}).get("order_id"))
        if await asyncio.to_thread(deps.ledger.owner_of, order) != user_id:
            return not_yours(order)  # nobody is asked to approve what would be refused
        answer = interrupt(approval_request(proposed))
        approved = bool(answer.get("approved")) if isinstance(answer, dict) else False
        comment = str(answer.get("comment") or "") if isinstance(answer, dict) else ""
        args = proposed.get("args", {})
        order_id = str(args.get("order_id"))
        amount = float(args.get("amount", 0))
        if not approved:
            reason = f" Reviewer's note: {comment}" if comment else ""
            return {
                "tool_outcome": "rejected",
                "citations": [],
                "answer": f"I did not issue the refund of ${amount:.2f} on order "
                f"{order_id}: it was not approved.{reason}",
            }
        with child_span(
            deps.tracer,
            f"execute_tool {proposed['name']}",
            c.OP_TOOL,
            {
                c.TOOL_NAME: proposed["name"],
                c.TOOL_CALL_ID: proposed.get("id", ""),
                c.TOOL_CALL_ARGUMENTS: json.dumps(args, sort_keys=True),
                c.TOOL_LABEL: TOOL_LABELS.get(proposed["name"], f"Running {proposed['name']}"),
            },
        ):
            async with asyncio.timeout(deps.tool_timeout_s):  # never swallows a cancel
                try:
                    refund = await asyncio.to_thread(
                        deps.ledger.issue, order_id, amount, state["turn_id"], user_id
                    )
                except NotYourOrder:
                    return not_yours(order_id)
        return {
            "tool_outcome": "approved",
            "citations": [],
            "answer": f"Done: I refunded ${refund.amount:.2f} on order {refund.order_id} "
            f"(refund {refund.refund_id}). It reaches the original payment "
            "method within 5 business days.",
        }

    return human_approval
