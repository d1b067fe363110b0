"""What the nodes need, built once in the app's lifespan and passed in (no globals)."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.trace import Tracer

from agent.model import ModelChoice
from agent.retrieval import KnowledgeBase
from agent.tools.refund import RefundLedger


@dataclass(frozen=True, slots=True)
class NodeDeps:
    tracer: Tracer
    knowledge: KnowledgeBase
    model: ModelChoice
    ledger: RefundLedger
    tool_timeout_s: float = 30.0
