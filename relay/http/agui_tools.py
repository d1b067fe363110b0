"""An AG-UI run's tool messages as the resume of the thread's paused turn (``POST /agui``,
relay/http/agui.py): a run whose ``role: "tool"`` messages answer the thread's pending
client-tool calls (by ``toolCallId``) answers them as ``resume[]`` entries would, with
their tokens; the answers are then checked below HTTP, as every resume's are
(relay/langgraph/client_tool_limits.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from relay.auth import User
from relay.errors import ApiError
from relay.http.parts import RelayParts
from relay.langgraph.agent import GraphAgent
from relay.langgraph.client_tools import is_client_tool_call
from relay.turns.access import may_see, may_use
from relay.turns.records import PAUSED, TurnRecord


async def agui_entries(
    relay: RelayParts,
    agent: GraphAgent,
    thread_id: str,
    messages: Sequence[Any],
    user: User | None = None,
) -> list[Any] | None:
    """The run's tool messages as ``resume[]`` entries when they answer the thread's
    pending client-tool calls (by ``toolCallId``); None when they answer none. A run
    that ends with tool messages is one that answers calls: when the turn is no longer
    paused it is the retry of the run that answered them (its entries again, so it
    attaches to that run), or a 409."""
    from ag_ui.core import ResumeEntry

    results = {
        getattr(m, "tool_call_id", None): m for m in messages if getattr(m, "role", None) == "tool"
    }
    answering = bool(messages) and getattr(messages[-1], "role", None) == "tool"
    if not results:
        return None
    latest = await relay.turns.list(thread_id, 1)
    owner = await relay.turns.thread_owner(thread_id)
    mine = latest and may_see(user, latest[0]) and may_use(user, owner)
    record = latest[0] if mine else None  # else: 404
    pending: list[tuple[str, Any]] = []
    if record is not None and record.status == PAUSED:
        pending = [(p.id, p.value) for p in await agent.pending_interrupts(record.thread_id) or []]
    elif record is not None and answering and record.resume_hash:
        pending = _answered(relay, record)
    entries = []
    for interrupt_id, value in pending:
        if not is_client_tool_call(value) or value.get("call_id") not in results:
            continue
        message = results[value.get("call_id")]
        answer: dict[str, Any] = {"token": value.get("token")}
        if getattr(message, "error", None):
            answer["error"] = str(message.error)
        else:
            answer["result"] = _content(message.content)
        entries.append(ResumeEntry(interrupt_id=interrupt_id, status="resolved", payload=answer))
    if not entries and answering and record is not None:
        raise ApiError(
            409,
            "not_paused",
            f"Thread {thread_id} waits on no client tool "
            "call that these tool messages answer; nothing to resume.",
        )
    return entries or None


def _answered(relay: RelayParts, record: TurnRecord) -> list[tuple[str, Any]]:
    """The interrupts the turn's latest resume answered: its previous run's ``paused``
    event on the bus (none when retention or a restart dropped it)."""
    try:
        reader = relay.bus.reader(record.turn_id, max(record.run_after_seq - 1, 0))
        try:
            previous = reader.take(1)
        finally:
            reader.close()
    except Exception:
        return []
    if not previous or previous[0].type != "paused":
        return []
    items = previous[0].fields.get("interrupts")
    return (
        [(str(i.get("id")), i.get("value")) for i in items if isinstance(i, Mapping)]
        if isinstance(items, list)
        else []
    )


def _content(content: Any) -> Any:
    """A tool message's content: its JSON when it is JSON, else the text."""
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content
