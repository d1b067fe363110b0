"""retrieve_context: BM25 over the knowledge base, on a ``retrieval`` span."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from langchain_core.runnables import RunnableConfig

from relay import child_span
from relay import conventions as c
from span_relay_demo.nodes.deps import NodeDeps
from span_relay_demo.state import SupportState

TOP_K = 3


def make_retrieve_context(deps: NodeDeps):
    def retrieve_context(state: SupportState, config: RunnableConfig) -> dict[str, Any]:
        with child_span(
            deps.tracer,
            "retrieval knowledge_base",
            c.OP_RETRIEVAL,
            {"gen_ai.data_source.id": "knowledge_base"},
        ) as span:
            passages = deps.knowledge.search(state["message"], k=TOP_K)
            span.set_attribute(c.RETRIEVAL_DOCUMENTS, len(passages))
        return {"passages": [asdict(p) for p in passages]}

    return retrieve_context
