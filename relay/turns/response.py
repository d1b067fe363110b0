"""ChatResponse: the JSON answer of a run, and ``turn_completed.response``.

One serializer for both paths, so the JSON body and the stream's payload cannot drift.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from relay.conventions import CLIENT_TOOL
from relay.events import dumps

STATUSES = ("answered", "refused", "paused", "error", "cancelled", "interrupted")


def client_tool_calls(interrupts: Sequence[Any]) -> list[Mapping[str, Any]]:
    """The values of a pause's interrupts (``[{"id", "value"}]``) that ask the client to
    run a tool (``type`` ``client_tool``)."""
    return [
        value
        for item in interrupts
        if isinstance(item, Mapping)
        and isinstance(value := item.get("value"), Mapping)
        and value.get("type") == CLIENT_TOOL
    ]


def round_of(call: Mapping[str, Any]) -> int:
    """A client-tool call's ``round`` (the how-manieth client-tool pause of its turn), 0
    when it has none that reads as a number."""
    try:
        return int(call.get("round") or 0)
    except (TypeError, ValueError):
        return 0


def client_tool_round(interrupts: Sequence[Any]) -> int:
    """The highest ``round`` among a pause's client-tool calls (interrupt values of type
    ``client_tool``), 0 when it waits on none: the turn's count of client-tool rounds."""
    return max((round_of(call) for call in client_tool_calls(interrupts)), default=0)


@dataclass(slots=True)
class ChatResponse:
    thread_id: str
    turn_id: str
    trace_id: str
    status: str
    answer: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown ChatResponse status {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "turn_id": self.turn_id,
            "trace_id": self.trace_id,
            "status": self.status,
            "answer": self.answer,
            "citations": list(self.citations),
            "interrupts": list(self.interrupts),
            "nodes": list(self.nodes),
        }

    def to_json(self) -> str:
        return dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatResponse:
        return cls(
            thread_id=data["thread_id"],
            turn_id=data["turn_id"],
            trace_id=data["trace_id"],
            status=data["status"],
            answer=data.get("answer", ""),
            citations=list(data.get("citations", [])),
            interrupts=list(data.get("interrupts", [])),
            nodes=list(data.get("nodes", [])),
        )

    @classmethod
    def from_json(cls, text: str) -> ChatResponse:
        return cls.from_dict(json.loads(text))
