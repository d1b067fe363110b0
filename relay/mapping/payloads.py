"""The type fields of the node and tool events, from a span and what the mapping knows.

``node_started`` / ``node_completed`` carry the node's ``namespace`` (its enclosing
nodes' names, outermost first); a node's status comes from
:func:`~relay.mapping.summary.node_status` (a LangGraph interrupt is ``paused``, a handoff
``ok``). ``tool_*`` carry the tool's node as the mapping knows it when they go out.
"""

from __future__ import annotations

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

_OUTCOMES = frozenset({"ok", "error", "paused", "cancelled"})
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
    return Event(
        ev.NODE_COMPLETED,
        run.thread_id,
        run.turn_id,
        run.trace_id,
        ((end or record.start_ns) + 500) // 1000 / 1000,
        {
            "node": opened.node,
            "span_id": record.span_id,
            "namespace": list(opened.namespace),
            "status": status,
            # record.duration_ms, inlined
            "duration_ms": 0.0 if end is None else (end - record.start_ns + 500) // 1000 / 1000,
            "summary": opened.summary,
            "children": opened.children,
        },
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
    if record.attributes.get(c.TOOL_CLIENT):  # a client-executed tool: what it is asked
        fields["client"] = True
        try:
            fields["args"] = json_loads(str(record.attributes.get(c.TOOL_CALL_ARGUMENTS)))
        except ValueError:
            fields["args"] = {}
    return fields


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
