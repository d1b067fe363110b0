"""The type fields of the node and tool events, from a span and what the mapping knows.

``node_started`` / ``node_completed`` carry the node's ``namespace`` (its enclosing
nodes' names, outermost first); a node's status comes from
:func:`~relay.mapping.summary.node_status` (a LangGraph interrupt is ``paused``, a handoff
``ok``, an attempt LangGraph's RetryPolicy runs again ``retrying``, with its ``attempt``).
``tool_*`` carry the tool's node as the mapping knows it when they go out, ``tool_started``
the call's arguments (``args``; ``args_truncated`` when they were cut).
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.json_depth import loads as json_loads  # too deep: a ValueError, as unreadable
from relay.mapping.answers import foreign_node_ended
from relay.mapping.attributes import suffix
from relay.mapping.facts import Facts
from relay.mapping.state import Open, Run
from relay.mapping.summary import node_status, status_of
from relay.spans import SpanRecord

_OUTCOMES = frozenset({"ok", "error", "paused", "cancelled", "retrying"})
#: a node's children in start order (a key read in C: no Python call per child)
_CHILD_ORDER = itemgetter("start_ts", "span_id")


def node_started(run: Run, span_id: str, opened: Open, step: Any, task_id: Any) -> Event:
    # run.event, inlined (as in node_completed): twice per node
    return Event(
        ev.NODE_STARTED,
        run.thread_id,
        run.turn_id,
        run.trace_id,
        (opened.start_ns + 500) // 1000 / 1000,
        {
            "node": opened.node,
            "span_id": span_id,
            "parent_span_id": opened.parent,
            "step": step,
            "task_id": task_id,
            "namespace": list(opened.namespace),
        },
    )


def node_completed(run: Run, record: SpanRecord, opened: Open) -> Event:
    outcome = record.attributes.get(c.NODE_OUTCOME)  # node_status's first answer, inlined
    status = outcome if type(outcome) is str and outcome in _OUTCOMES else node_status(record)
    if run.foreign:
        foreign_node_ended(run, record, opened, status)
    if run.discovery is not None and not opened.namespace and opened.node:
        run.discovery.finished(opened.node, status)
    if opened.children:
        opened.children.sort(key=_CHILD_ORDER)
    end = record.end_ns
    fields = {
        "node": opened.node,
        "span_id": record.span_id,
        "namespace": list(opened.namespace),
        "status": status,
        # record.duration_ms, inlined
        "duration_ms": 0.0 if end is None else (end - record.start_ns + 500) // 1000 / 1000,
        "summary": opened.summary,
        "children": opened.children,
    }
    attempt = record.attributes.get(c.NODE_ATTEMPT)
    if attempt is not None or status == "retrying":  # an attempt of a node LangGraph retries
        fields["attempt"] = attempt if type(attempt) is int else 1
    return Event(
        ev.NODE_COMPLETED,
        run.thread_id,
        run.turn_id,
        run.trace_id,
        ((end or record.start_ns) + 500) // 1000 / 1000,
        fields,
    )


def tool_fields(record: SpanRecord, facts: Facts) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "tool": facts.name,
        "span_id": record.span_id,
        "node": facts.langgraph_node,  # its node's name, once that is known
        "call_id": facts.call_id,
    }
    if c.TOOL_LABEL in record.attributes:
        fields["label"] = str(record.attributes[c.TOOL_LABEL])
    if record.attributes.get(c.TOOL_IDEMPOTENT) is True:  # safe to run again
        fields["idempotent"] = True
    client = bool(record.attributes.get(c.TOOL_CLIENT))
    if client:  # a client-executed tool: what it is asked to run
        fields["client"] = True
    if c.TOOL_CALL_ARGUMENTS in record.attributes or client:
        args = _arguments(record.attributes)
        if args is not None:
            fields["args"] = args
        else:  # cut (TOOL_ARGUMENTS_MAX_CHARS, an attribute length limit) or malformed
            fields["args_truncated"] = True
            if client:
                fields["args"] = {}
    return fields


def _arguments(attrs: Any) -> Any:
    """A tool call's arguments (``gen_ai.tool.call.arguments``); None when they were cut
    or cannot be read."""
    if attrs.get(c.TOOL_ARGS_TRUNCATED):
        return None
    try:
        return json_loads(str(attrs.get(c.TOOL_CALL_ARGUMENTS)))
    except ValueError:
        return None


def tool_completed_fields(record: SpanRecord, facts: Facts | None) -> dict[str, Any]:
    attrs = record.attributes
    name = (
        facts.name
        if facts is not None and facts.name is not None
        else str(attrs[c.TOOL_NAME] if c.TOOL_NAME in attrs else suffix(record.name))
    )
    return {
        "tool": name,
        "span_id": record.span_id,
        "node": facts.langgraph_node if facts is not None else None,
        "call_id": facts.call_id if facts is not None else attrs.get(c.TOOL_CALL_ID),
        "duration_ms": record.duration_ms,
        "status": status_of(record, c.SPAN_OUTCOME),
    }


def recovery_fields(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``turn_recovered``: the turn's attempt, why its previous run stopped, and the
    checkpoint this run goes on from (None: the thread had none)."""
    resumed_from = attrs.get(c.RECOVERY_RESUMED_FROM)
    return {
        "attempt": int(attrs[c.RECOVERY_ATTEMPT]),
        "reason": str(attrs.get(c.RECOVERY_REASON, "")),
        "resumed_from": str(resumed_from) if resumed_from else None,
    }
