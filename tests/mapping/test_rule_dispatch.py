"""The rule table keyed by what identifies a span (relay/mapping/rules.py ``classify``)
gives what trying every row in order gives: the first row that matches."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from relay import conventions as c
from relay.mapping.rules import OI_KIND, OI_METADATA, RULES, TL_ASSOC, TL_KIND, classify
from relay.spans import SpanRecord

_VALUES: dict[str, list[Any]] = {
    c.TURN_ID: ["t1"],
    c.NODE_NAME: ["plan"],
    c.OPERATION: [
        c.OP_TOOL,
        c.OP_CHAT,
        c.OP_RETRIEVAL,
        c.OP_GUARDRAIL,
        c.OP_INVOKE_AGENT,
        "other",
        7,
        c.OP_INVOKE_WORKFLOW,
        c.OP_INVOKE_NODE,
    ],
    TL_KIND: ["workflow", "agent", "task", "tool", "unknown"],
    OI_KIND: ["LLM", "RETRIEVER", "TOOL", "GUARDRAIL", "CHAIN", "AGENT", "EMBEDDING"],
    OI_METADATA: [
        json.dumps({"langgraph_node": "plan", "langgraph_checkpoint_ns": "plan:1"}),
        json.dumps({"ls_integration": "langgraph"}),
        "{}",
        "not json",
    ],
    TL_ASSOC + "langgraph_node": ["plan", "other"],
    c.TOOL_NAME: ["search"],
    "unrelated": [["a", "b"], 1.5],
}
_NAMES = ["plan", "LangGraph", "execute_tool search", "node plan", "invoke_node plan"]


def _in_order(record: SpanRecord) -> Any:
    for rule in RULES:
        facts = rule.match(record.attributes, record.name)
        if facts is not None:
            return facts
    return None


@settings(max_examples=600, deadline=None)
# spans several keys point to: the table's order decides (a GenAI invoke_agent that is also
# an OpenInference chain is the chain; a GenAI tool that is an OpenLLMetry task is the tool)
@example({c.OPERATION: 4, OI_KIND: 4}, "LangGraph")
@example({c.OPERATION: 0, TL_KIND: 2}, "plan")
@example({OI_KIND: 4, OI_METADATA: 0}, "plan")
@example({TL_KIND: 0, OI_KIND: 5, c.OPERATION: 4}, "LangGraph")
@given(
    st.dictionaries(st.sampled_from(sorted(_VALUES)), st.integers(0, 8), max_size=5),
    st.sampled_from(_NAMES),
)
def test_keyed_dispatch_equals_the_table_in_order(picks: dict[str, int], name: str) -> None:
    attrs = {key: _VALUES[key][i % len(_VALUES[key])] for key, i in picks.items()}
    record = SpanRecord("0" * 32, "1" * 16, None, name, 1, None, attrs)
    assert classify(record) == _in_order(record)


def test_every_row_is_reachable_by_its_key() -> None:
    for rule in RULES:
        assert rule.key, rule.when
