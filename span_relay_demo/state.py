"""The graph's state: one turn's working memory, checkpointed per thread."""

from __future__ import annotations

from typing import Any, TypedDict


class SupportState(TypedDict, total=False):
    turn_id: str
    message: str
    verdict: str  # allow | block
    block_reason: str
    passages: list[dict[str, Any]]
    answer: str
    citations: list[dict[str, Any]]
    proposed_tool: dict[str, Any] | None  # {"name", "args", "id"}
    refused: bool
    tool_outcome: str | None  # approved | rejected | refused (not the user's order)
    client_call: dict[str, Any] | None  # a browser-side tool to run: {"name", "args", "id"}
    client_result: dict[str, Any] | None  # its call and the browser's answer ("content")


def fresh_turn(turn_id: str, message: str) -> SupportState:
    """The input of a new turn: resets everything the previous turn of the thread left."""
    return SupportState(
        turn_id=turn_id,
        message=message,
        verdict="",
        block_reason="",
        passages=[],
        answer="",
        citations=[],
        proposed_tool=None,
        refused=False,
        tool_outcome=None,
        client_call=None,
        client_result=None,
    )
