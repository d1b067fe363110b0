"""What the nodes need, built once in the app's lifespan and passed in (no globals)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Span, Tracer

from span_relay_demo.model import ModelChoice
from span_relay_demo.retrieval import KnowledgeBase
from span_relay_demo.tools.refund import RefundLedger


@dataclass(frozen=True, slots=True)
class NodeDeps:
    tracer: Tracer
    knowledge: KnowledgeBase
    model: ModelChoice
    ledger: RefundLedger
    tool_timeout_s: float = 30.0
    #: records a span event where the UI must see it while the span runs: the relay's
    #: ``span_processor.add_event`` in the app; a plain ``span.add_event`` without a relay
    span_events: Callable[[Span, str, Mapping[str, Any]], None] = lambda span, name, attributes: (
        span.add_event(name, dict(attributes))
    )
