"""Facts of children: what ``node_completed`` says about the spans under a node.

A node's ``summary`` (model, tokens, documents, guardrail, tools) and ``children`` (one
line per span) are gathered as its descendants end. Spans of other instrumentations may
be recognised as a node only at their own end, after their children ended: those facts
then wait in a :class:`~relay.mapping.state.Bag` under the nearest ancestor until a node
claims them (:func:`claim`), so a late node's summary is the same as a timely one's.
"""

from __future__ import annotations

from typing import Any

from relay import conventions as c
from relay.mapping.attributes import suffix
from relay.mapping.facts import CHAT, RETRIEVAL, TOOL, Facts
from relay.mapping.foreign_attributes import GENAI_COMPLETION_TOKENS, GENAI_PROMPT_TOKENS
from relay.mapping.state import Bag, MappingState, Open, Run
from relay.spans import SpanRecord

_STATUSES = (
    "ok",
    "error",
    "paused",
    "cancelled",
    "retrying",
)  # (a tuple: no hashing of what is tested)


def status_of(record: SpanRecord, outcome_key: str | None) -> str:
    """A span's status in events: our outcome attribute when it says one, else OTel's."""
    if outcome_key is not None:
        outcome = record.attributes.get(outcome_key)
        if outcome in _STATUSES:
            return str(outcome)
    return "error" if record.status == "error" else "ok"


#: LangGraph's control-flow exceptions, by the status they give the node they leave
_PAUSES = ("GraphInterrupt", "NodeInterrupt")  # an interrupt: the run waits for a human
_HANDOFFS = ("ParentCommand",)  # Command(graph=Command.PARENT): a handoff, not a failure


def node_status(record: SpanRecord) -> str:
    """A node span's status: ``relay.node.outcome`` when it says one; else ``paused`` for
    a LangGraph interrupt and ``ok`` for a handoff to the parent graph, whether the span
    carries it as an error status or as an exception event on an OK span (OpenInference
    does the latter); else OTel's status."""
    outcome = record.attributes.get(c.NODE_OUTCOME)
    if outcome in _STATUSES:
        return str(outcome)
    handoff = False
    for event in record.events:
        if event.get("name") != "exception":
            continue
        kind = str((event.get("attributes") or {}).get("exception.type", ""))
        kind = kind.rsplit(".", 1)[-1]
        if kind in _PAUSES:
            return "paused"
        handoff = handoff or kind in _HANDOFFS
    if record.status == "error":
        message = record.status_message
        if any(name in message for name in _PAUSES):
            return "paused"
        if handoff or any(name in message for name in _HANDOFFS):
            return "ok"
        return "error"
    return "ok"


#: a model call's token counts: (the attribute, the older GenAI one, the summary's key)
_TOKEN_COUNTS = (
    (c.INPUT_TOKENS, GENAI_PROMPT_TOKENS, "input_tokens"),
    (c.OUTPUT_TOKENS, GENAI_COMPLETION_TOKENS, "output_tokens"),
)


def summarise(
    node: Open | Bag, record: SpanRecord, operation: Any, facts: Facts | None = None
) -> None:
    """Add an ended span to a node's (or a bag's) summary and children. A span of another
    instrumentation (no ``gen_ai.operation.name``) is read through its rule's facts."""
    attrs = record.attributes
    summary = node.summary
    foreign = facts is not None and c.OPERATION not in attrs
    if foreign:
        assert facts is not None
        if facts.role == CHAT:
            if facts.model is not None:
                summary["model"] = facts.model
            for value, out in (
                (facts.input_tokens, "input_tokens"),
                (facts.output_tokens, "output_tokens"),
            ):
                if value is not None:
                    summary[out] = summary.get(out, 0) + value
        elif facts.role == RETRIEVAL and facts.documents is not None:
            summary["documents"] = summary.get("documents", 0) + facts.documents
        elif facts.role == TOOL:
            summary.setdefault("tools", []).append(str(facts.name))
    elif operation == c.OP_CHAT:
        model = attrs.get(c.RESPONSE_MODEL, attrs.get(c.REQUEST_MODEL))
        if model is not None:
            summary["model"] = model
        for key, alt, out in _TOKEN_COUNTS:
            if key in attrs:
                summary[out] = summary.get(out, 0) + int(attrs[key])
            elif alt in attrs:
                summary[out] = summary.get(out, 0) + int(attrs[alt])
    elif operation == c.OP_RETRIEVAL and c.RETRIEVAL_DOCUMENTS in attrs:
        summary["documents"] = summary.get("documents", 0) + int(attrs[c.RETRIEVAL_DOCUMENTS])
    elif operation == c.OP_GUARDRAIL and c.GUARDRAIL_DECISION in attrs:
        summary["guardrail"] = {
            "name": str(attrs.get(c.GUARDRAIL_NAME, suffix(record.name))),
            "decision": attrs[c.GUARDRAIL_DECISION],
            "reason": attrs.get(c.GUARDRAIL_REASON, ""),
        }
    elif operation == c.OP_TOOL:
        name = attrs[c.TOOL_NAME] if c.TOOL_NAME in attrs else suffix(record.name)
        summary.setdefault("tools", []).append(str(name))
    # ms(), record.duration_ms and status_of(record, c.SPAN_OUTCOME), inlined: once per span
    start = record.start_ns
    end = record.end_ns
    outcome = attrs.get(c.SPAN_OUTCOME)
    node.children.append(
        {
            "span_id": record.span_id,
            "parent_span_id": record.parent_span_id,
            "name": record.name,
            "operation": operation if operation in _OPERATIONS else "other",
            "start_ts": (start + 500) // 1000 / 1000,
            "duration_ms": 0.0 if end is None else (end - start + 500) // 1000 / 1000,
            "status": str(outcome)
            if outcome in _STATUSES
            else "error"
            if record.status == "error"
            else "ok",
        }
    )


_OPERATIONS = frozenset({c.OP_CHAT, c.OP_RETRIEVAL, c.OP_GUARDRAIL, c.OP_TOOL})


def to_parent(
    state: MappingState,
    run: Run,
    record: SpanRecord,
    operation: Any,
    facts: Facts | None,
    opened: Open | None,
) -> None:
    """Facts of a span with no known node go up to its parent, to wait for a node."""
    parent_id = record.parent_span_id
    if parent_id is None or parent_id == run.root_span_id:
        return
    parent = state.spans.get(parent_id)
    target: Open | Bag = parent if parent is not None else state.orphan_bag(parent_id, run.trace_id)
    summarise(target, record, operation, facts)
    if opened is not None:
        merge(target, opened)
    waiting = state.orphans.pop(record.span_id, None)
    if waiting is not None:
        merge(target, waiting)


def claim(state: MappingState, span_id: str, node: Open) -> None:
    """A node is known now: the facts that waited for it under its span id are its own."""
    waiting = state.orphans.pop(span_id, None) if state.orphans else None
    if waiting is not None:
        merge(node, waiting)


def merge(into: Open | Bag, other: Open | Bag) -> None:
    """Add one gathering of facts to another: counts add up, tools and children extend."""
    for key, value in other.summary.items():
        if key in ("input_tokens", "output_tokens", "documents"):
            into.summary[key] = into.summary.get(key, 0) + value
        elif key == "tools":
            into.summary.setdefault("tools", []).extend(value)
        else:
            into.summary[key] = value
    into.children.extend(other.children)
