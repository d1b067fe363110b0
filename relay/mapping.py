"""Span -> events: the one mapping that the live path, the replay and the receiver share.

``map_span(state, record, ended)`` is a pure function of its inputs: the same spans fed in
the same order into a fresh :class:`MappingState` give the same events, payload for
payload. That is why a replayed turn equals the live one.

The state exists because spans are a tree and events are about turns: a node span does
not carry the turn id (only the run's root does), a tool span names no node (its parent
does), and ``node_completed`` summarises the node's children. The state remembers, per
trace, which turn it belongs to and, per open span, which node it sits under.

Recognition rules (the table the docs repeat):

- run root: ``relay.turn.id`` at start. Start -> ``graph_topology``; end -> the run's
  terminal event, from ``relay.turn.outcome``.
- graph node: ``relay.node.name`` at start -> ``node_started`` / ``node_completed``.
- tool: ``gen_ai.operation.name=execute_tool`` -> ``tool_started`` / ``tool_completed``.
- model, retrieval, guardrail: ``gen_ai.operation.name`` ``chat`` / ``retrieval`` /
  ``apply_guardrail`` -> no events of their own; their facts go into the enclosing node's
  ``summary`` and ``children``.

A span of a trace whose root the state has not seen maps to nothing.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.spans import SpanRecord

#: How many runs (traces) the state follows at once before it forgets the oldest.
MAX_OPEN_RUNS = 10_000


@dataclass(slots=True)
class _Run:
    turn_id: str
    thread_id: str
    trace_id: str
    kind: str


@dataclass(slots=True)
class _Open:
    """An open span under a run: which node it belongs to, if any."""

    run: _Run
    node_span_id: str | None  # the enclosing node span (itself, for a node)
    node: str | None
    is_node: bool = False
    summary: dict[str, Any] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class MappingState:
    """What the mapping remembers between spans. One per live relay, one per replay."""

    runs: OrderedDict[str, _Run] = field(default_factory=OrderedDict)  # trace_id -> run
    spans: dict[str, _Open] = field(default_factory=dict)  # span_id -> open span

    def forget_run(self, trace_id: str) -> None:
        self.runs.pop(trace_id, None)
        stale = [sid for sid, o in self.spans.items() if o.run.trace_id == trace_id]
        for sid in stale:
            del self.spans[sid]


def map_span(state: MappingState, record: SpanRecord, ended: bool) -> list[Event]:
    """The events for one span start (``ended=False``) or end (``ended=True``)."""
    attrs = record.attributes
    if not ended and c.TURN_ID in attrs:
        return _root_started(state, record)
    run = state.runs.get(record.trace_id)
    if run is None:
        return []
    if ended and attrs.get(c.TURN_ID) == run.turn_id:
        return _root_ended(state, run, record)
    if not ended:
        return _span_started(state, run, record)
    return _span_ended(state, run, record)


# -- run root ---------------------------------------------------------------------------

def _root_started(state: MappingState, record: SpanRecord) -> list[Event]:
    attrs = record.attributes
    run = _Run(
        turn_id=str(attrs[c.TURN_ID]),
        thread_id=str(attrs.get(c.CONVERSATION_ID, "")),
        trace_id=record.trace_id,
        kind=str(attrs.get(c.RUN_KIND, "chat")),
    )
    state.runs[record.trace_id] = run
    while len(state.runs) > MAX_OPEN_RUNS:
        state.forget_run(next(iter(state.runs)))
    topology, ok = _json_attr(attrs, c.GRAPH_TOPOLOGY, {"nodes": [], "edges": []})
    fields: dict[str, Any] = {
        "graph_id": str(attrs.get(c.GRAPH_ID, "")),
        "nodes": topology.get("nodes", []),
        "edges": topology.get("edges", []),
        "run_kind": run.kind,
    }
    if not ok:
        fields["truncated"] = True
    return [_event(ev.GRAPH_TOPOLOGY, run, record.start_ns, fields)]


def _root_ended(state: MappingState, run: _Run, record: SpanRecord) -> list[Event]:
    attrs = record.attributes
    state.forget_run(run.trace_id)
    outcome = attrs.get(c.TURN_OUTCOME)
    end = record.end_ns or record.start_ns
    if outcome in ("answered", "refused"):
        response, ok = _json_attr(attrs, c.TURN_RESPONSE, None)
        if not ok or response is None:
            return [_truncated(run, end, c.TURN_RESPONSE)]
        fields: dict[str, Any] = {"response": response}
        if run.kind == "resume" and c.TURN_HUMAN_WAIT_MS in attrs:
            fields["human_wait_ms"] = attrs[c.TURN_HUMAN_WAIT_MS]
        return [_event(ev.TURN_COMPLETED, run, end, fields)]
    if outcome == "paused":
        interrupts, ok = _json_attr(attrs, c.TURN_INTERRUPTS, [])
        if not ok:
            return [_truncated(run, end, c.TURN_INTERRUPTS)]
        return [_event(ev.PAUSED, run, end, {
            "interrupts": interrupts,
            "resume": _how_to_resume(run, interrupts),
        })]
    if outcome == "cancelled":
        return [_event(ev.ERROR, run, end, {
            "code": "cancelled",
            "message": str(attrs.get(c.ERROR_MESSAGE, "The turn was cancelled.")),
            "node": attrs.get(c.ERROR_NODE),
            "retryable": True,
        })]
    return [_event(ev.ERROR, run, end, {
        "code": str(attrs.get(c.ERROR_CODE, "turn_failed")),
        "message": str(attrs.get(c.ERROR_MESSAGE, "The agent could not finish this turn.")),
        "node": attrs.get(c.ERROR_NODE),
        "retryable": bool(attrs.get(c.ERROR_RETRYABLE, True)),
    })]


def _how_to_resume(run: _Run, interrupts: list[dict[str, Any]]) -> dict[str, Any]:
    if len(interrupts) == 1:
        value: Any = "<your answer to the interrupt>"
    else:
        value = {str(i.get("id")): "<your answer>" for i in interrupts}
    return {
        "method": "POST",
        "path": "/chat/resume",
        "body": {"thread_id": run.thread_id, "turn_id": run.turn_id, "resume": value},
    }


def _truncated(run: _Run, end_ns: int, attribute: str) -> Event:
    return _event(ev.ERROR, run, end_ns, {
        "code": "attribute_truncated",
        "message": (
            f"The span attribute {attribute} arrived cut short, probably by "
            "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT; raise or unset that limit."
        ),
        "node": None,
        "retryable": False,
    })


# -- spans under a run ------------------------------------------------------------------

def _span_started(state: MappingState, run: _Run, record: SpanRecord) -> list[Event]:
    attrs = record.attributes
    parent = state.spans.get(record.parent_span_id or "")
    node = attrs.get(c.NODE_NAME)
    if node is not None:
        state.spans[record.span_id] = _Open(run, record.span_id, str(node), is_node=True)
        return [_event(ev.NODE_STARTED, run, record.start_ns, {
            "node": str(node),
            "span_id": record.span_id,
            "parent_span_id": record.parent_span_id,
            "step": attrs.get(c.NODE_STEP),
            "task_id": attrs.get(c.NODE_TASK_ID),
        })]
    node_span_id = parent.node_span_id if parent else None
    node_name = parent.node if parent else None
    state.spans[record.span_id] = _Open(run, node_span_id, node_name)
    if attrs.get(c.OPERATION) == c.OP_TOOL:
        fields: dict[str, Any] = {
            "tool": str(attrs.get(c.TOOL_NAME, _suffix(record.name))),
            "span_id": record.span_id,
            "node": node_name,
            "call_id": attrs.get(c.TOOL_CALL_ID),
        }
        if c.TOOL_LABEL in attrs:
            fields["label"] = str(attrs[c.TOOL_LABEL])
        return [_event(ev.TOOL_STARTED, run, record.start_ns, fields)]
    return []


def _span_ended(state: MappingState, run: _Run, record: SpanRecord) -> list[Event]:
    attrs = record.attributes
    opened = state.spans.pop(record.span_id, None)
    end = record.end_ns or record.start_ns
    if opened is not None and opened.is_node:
        return [_event(ev.NODE_COMPLETED, run, end, {
            "node": opened.node,
            "span_id": record.span_id,
            "status": _status(record, c.NODE_OUTCOME),
            "duration_ms": record.duration_ms,
            "summary": opened.summary,
            "children": opened.children,
        })]
    if opened is None or opened.node_span_id is None:
        return []
    node = state.spans.get(opened.node_span_id)
    operation = attrs.get(c.OPERATION)
    if node is not None:
        _summarise(node, record, operation)
    if operation == c.OP_TOOL:
        return [_event(ev.TOOL_COMPLETED, run, end, {
            "tool": str(attrs.get(c.TOOL_NAME, _suffix(record.name))),
            "span_id": record.span_id,
            "node": opened.node,
            "call_id": attrs.get(c.TOOL_CALL_ID),
            "duration_ms": record.duration_ms,
            "status": _status(record, None),
        })]
    return []


def _summarise(node: _Open, record: SpanRecord, operation: Any) -> None:
    attrs = record.attributes
    summary = node.summary
    if operation == c.OP_CHAT:
        model = attrs.get(c.RESPONSE_MODEL, attrs.get(c.REQUEST_MODEL))
        if model is not None:
            summary["model"] = model
        for key, out in ((c.INPUT_TOKENS, "input_tokens"), (c.OUTPUT_TOKENS, "output_tokens")):
            if key in attrs:
                summary[out] = summary.get(out, 0) + int(attrs[key])
    elif operation == c.OP_RETRIEVAL and c.RETRIEVAL_DOCUMENTS in attrs:
        summary["documents"] = summary.get("documents", 0) + int(attrs[c.RETRIEVAL_DOCUMENTS])
    elif operation == c.OP_GUARDRAIL and c.GUARDRAIL_DECISION in attrs:
        summary["guardrail"] = {
            "name": str(attrs.get(c.GUARDRAIL_NAME, _suffix(record.name))),
            "decision": attrs[c.GUARDRAIL_DECISION],
            "reason": attrs.get(c.GUARDRAIL_REASON, ""),
        }
    elif operation == c.OP_TOOL:
        summary.setdefault("tools", []).append(str(attrs.get(c.TOOL_NAME, _suffix(record.name))))
    node.children.append({
        "span_id": record.span_id,
        "parent_span_id": record.parent_span_id,
        "name": record.name,
        "operation": operation if operation in _OPERATIONS else "other",
        "start_ts": _ms(record.start_ns),
        "duration_ms": record.duration_ms,
        "status": _status(record, None),
    })


_OPERATIONS = frozenset({c.OP_CHAT, c.OP_RETRIEVAL, c.OP_GUARDRAIL, c.OP_TOOL})


# -- helpers ----------------------------------------------------------------------------

def _event(type_: str, run: _Run, time_ns: int, fields: dict[str, Any]) -> Event:
    return Event(type_, run.thread_id, run.turn_id, run.trace_id, _ms(time_ns), fields)


def _ms(time_ns: int) -> float:
    return round(time_ns / 1e6, 3)


def _status(record: SpanRecord, outcome_key: str | None) -> str:
    if outcome_key is not None:
        outcome = record.attributes.get(outcome_key)
        if outcome in ("ok", "error", "paused", "cancelled"):
            return str(outcome)
    return "error" if record.status == "error" else "ok"


def _suffix(name: str) -> str:
    return name.split(" ", 1)[1] if " " in name else name


def _json_attr(attrs: Any, key: str, default: Any) -> tuple[Any, bool]:
    """A JSON-valued attribute; ``ok`` is False when it is present but cut or malformed."""
    raw = attrs.get(key)
    if raw is None:
        return default, True
    try:
        return json.loads(raw), True
    except (TypeError, ValueError):
        return default, False
