"""ChatResponse: the JSON answer of a run, and ``turn_completed.response``.

One serializer for both paths, so the JSON body and the stream's payload cannot drift.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from relay.events import dumps

STATUSES = ("answered", "refused", "paused", "error", "cancelled", "interrupted")


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
