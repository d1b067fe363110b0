"""A run's answer: the terminal event its root's end gives, and the stored answer.

Our run root says how the run ended in ``relay.turn.outcome`` and carries its answer
(``relay.turn.response``, ``relay.turn.interrupts``): ``turn_completed``, ``paused`` or
``error``, and an ``error`` that says so when such an attribute is missing (content not
captured) or cut (an attribute length limit); a ``save_message`` span then says where the
answer is stored. A run of another instrumentation carries no ChatResponse: one is built
from its nodes (noted as they end) and the output its root span reports (OpenInference
``output.value``, OpenLLMetry ``traceloop.entity.output``, GenAI
``gen_ai.output.messages``), as far as it says one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.json_depth import loads as json_loads  # too deep: a ValueError, as unreadable
from relay.mapping.attributes import json_attr
from relay.mapping.discovery import discovered
from relay.mapping.foreign_attributes import (
    GENAI_INPUT_MESSAGES,
    GENAI_OUTPUT_MESSAGES,
    OI_INPUT,
    OI_OUTPUT,
    TL_INPUT,
    TL_OUTPUT,
)
from relay.mapping.interrupts import interrupts_in
from relay.mapping.state import MappingState, Open, PausedTurn, Run, ms
from relay.spans import SpanRecord, to_ms

# -- our runs ----------------------------------------------------------------------------


#: the outcome of a run whose server stopped and handed its turn over (relay/turns/
#: run_end.py): no terminal event, the turn goes on in a recovered run
HANDED_OVER = "handed_over"

#: the words of a run that was stopped, when its root says none
_STOPPED = {
    "cancelled": "The turn was cancelled.",
    "interrupted": ev.INTERRUPTED_MESSAGE,
}


def root_end(run: Run, record: SpanRecord) -> list[Event]:
    """The terminal event of one of our runs, from its root's end attributes."""
    attrs = record.attributes
    outcome = attrs.get(c.TURN_OUTCOME)
    end = record.end_ns or record.start_ns
    if outcome == HANDED_OVER:  # its server stopped and handed the turn over: it goes on
        return []
    if outcome in ("answered", "refused"):
        response, ok = json_attr(attrs, c.TURN_RESPONSE, None)
        if not ok:
            return [_truncated(run, end, c.TURN_RESPONSE)]
        if response is None:
            return [_missing(run, end, c.TURN_RESPONSE)]
        fields: dict[str, Any] = {"response": response}
        if run.kind == "resume" and c.TURN_HUMAN_WAIT_MS in attrs:
            fields["human_wait_ms"] = attrs[c.TURN_HUMAN_WAIT_MS]
        return [run.event(ev.TURN_COMPLETED, end, fields)]
    if outcome == "paused":
        interrupts, ok = json_attr(attrs, c.TURN_INTERRUPTS, [])
        if not ok:
            return [_truncated(run, end, c.TURN_INTERRUPTS)]
        return [
            run.event(
                ev.PAUSED,
                end,
                {
                    "interrupts": interrupts,
                    "resume": _how_to_resume(run, interrupts),
                },
            )
        ]
    if outcome in ("cancelled", "interrupted"):  # asked for, or cut by its server's stop
        return [
            run.event(
                ev.ERROR,
                end,
                {
                    "code": outcome,
                    "message": str(attrs.get(c.ERROR_MESSAGE, _STOPPED[outcome])),
                    "node": attrs.get(c.ERROR_NODE),
                    "retryable": True,
                },
            )
        ]
    return [
        run.event(
            ev.ERROR,
            end,
            {
                "code": str(attrs.get(c.ERROR_CODE, "turn_failed")),
                "message": str(attrs.get(c.ERROR_MESSAGE, "The agent could not finish this turn.")),
                "node": attrs.get(c.ERROR_NODE),
                "retryable": bool(attrs.get(c.ERROR_RETRYABLE, True)),
            },
        )
    ]


def discovery_end(state: MappingState, run: Run, record: SpanRecord) -> list[Event]:
    """At one of our run roots' end: a discovered graph gets its ``__end__`` when the run
    answered; when it paused, the graph waits on the thread for the resume (which carries
    the same turn id). (A foreign run's end: :func:`foreign_end`.)"""
    discovery = run.discovery
    if discovery is None:
        return []
    outcome = record.attributes.get(c.TURN_OUTCOME)
    end = record.end_ns or record.start_ns
    if outcome == "paused":
        state.pause(run.thread_id, PausedTurn(run.turn_id, set(), discovery, end, ""))
        return []
    if outcome in ("answered", "refused") and discovery.ended():
        return [discovered(discovery, run.event, end)]
    return []


def _how_to_resume(run: Run, interrupts: list[dict[str, Any]]) -> dict[str, Any]:
    """How to resume: the route the serving process offers, or, where it offers none
    (the agent runs in another process), ``path: null`` and a ``message`` that says so."""
    if len(interrupts) == 1:
        value: Any = "<your answer to the interrupt>"
    else:
        value = {str(i.get("id")): "<your answer>" for i in interrupts}
    hint: dict[str, Any] = {
        "method": "POST" if run.resume_path else None,
        "path": run.resume_path,
        "body": {"thread_id": run.thread_id, "turn_id": run.turn_id, "resume": value},
    }
    if run.resume_path is None:
        hint["message"] = (
            "This server offers no route to resume this turn: its agent runs in another "
            "process. Resume it there (LangGraph: invoke the graph with Command(resume=...) "
            f"on thread {run.thread_id!r}); its spans continue this turn here."
        )
    return hint


def _missing(run: Run, end_ns: int, attribute: str) -> Event:
    return _unreadable(
        run,
        end_ns,
        "attribute_missing",
        f"The span attribute {attribute} is not there: the spans were probably "
        "exported with RELAY_CAPTURE_CONTENT=false, which drops the answer; the "
        "turn's outcome is in relay.turn.outcome.",
    )


def _truncated(run: Run, end_ns: int, attribute: str) -> Event:
    return _unreadable(
        run,
        end_ns,
        "attribute_truncated",
        f"The span attribute {attribute} arrived cut short, probably by "
        "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT; raise or unset that limit.",
    )


def _unreadable(run: Run, end_ns: int, code: str, message: str) -> Event:
    """The run's ``error`` when its root's answer cannot be read (not retryable)."""
    return run.event(
        ev.ERROR, end_ns, {"code": code, "message": message, "node": None, "retryable": False}
    )


def message_saved(record: SpanRecord) -> list[Event]:
    """A ``save_message`` span (a child of the run's root that ends after it) that
    succeeded: the turn's answer is stored under ``relay.message.id``. The run is over by
    then, so the span names its turn and thread itself."""
    attrs = record.attributes
    if record.status == "error" or c.MESSAGE_ID not in attrs or c.MESSAGE_TURN_ID not in attrs:
        return []
    return [
        Event(
            ev.MESSAGE_SAVED,
            str(attrs.get(c.CONVERSATION_ID, "")),
            str(attrs[c.MESSAGE_TURN_ID]),
            record.trace_id,
            ms(record.end_ns or 0),
            {"message_id": str(attrs[c.MESSAGE_ID])},
        )
    ]


# -- runs of other instrumentations ------------------------------------------------------


def foreign_node_ended(run: Run, record: SpanRecord, opened: Open, status: str) -> None:
    """A node of a foreign run ended with ``status``: note it for the run's response, its
    interrupts and the task a resume reruns (paused), and the discovered graph."""
    if status == "paused":
        run.paused = True
        known = {i["id"] for i in run.interrupts}
        found = interrupts_in(record) or [{"id": record.span_id, "value": None}]
        run.interrupts += [i for i in found if i["id"] not in known]
        if opened.task:
            run.paused_tasks.add(opened.task.split("|", 1)[0])
    elif status == "error":
        run.failed_node = opened.node
    run.nodes.append({"name": opened.node, "status": status, "duration_ms": record.duration_ms})


def foreign_end(state: MappingState, run: Run, record: SpanRecord) -> list[Event]:
    """The terminal event of a foreign run: ``error`` when its root failed, ``paused``
    when a node stopped on an interrupt (the thread then waits for its resume), else a
    ``turn_completed`` whose response is built from the spans. A discovered graph gets
    its ``__end__`` first."""
    end = record.end_ns or record.start_ns
    state.note("end", run, record)
    if record.status == "error" and not run.paused:
        return [
            run.event(
                ev.ERROR,
                end,
                {
                    "code": "node_failed" if run.failed_node else "turn_failed",
                    "message": "The agent could not finish this turn.",
                    "node": run.failed_node,
                    # another process's failure, its cause unknown: no promise that
                    # sending again helps
                    "retryable": False,
                },
            )
        ]
    if run.paused:
        interrupts = run.interrupts
        state.pause(
            run.thread_id,
            PausedTurn(
                turn_id=run.turn_id,
                tasks=run.paused_tasks,
                discovery=run.discovery,
                paused_ns=end,
                message=run.message,
                topology=run.topology,
                graph_id=run.graph_id,
            ),
        )
        return [
            run.event(
                ev.PAUSED,
                end,
                {"interrupts": interrupts, "resume": _how_to_resume(run, interrupts)},
            )
        ]
    events = []
    if run.discovery is not None and run.discovery.ended():
        events.append(discovered(run.discovery, run.event, end))
    response = {
        "thread_id": run.thread_id,
        "turn_id": run.turn_id,
        "trace_id": run.trace_id,
        "status": "answered",
        "answer": answer_of(record.attributes) or run.output,
        "citations": [],
        "interrupts": [],
        "nodes": run.nodes,
    }
    fields: dict[str, Any] = {"response": response}
    if run.kind == "resume" and run.paused_ns is not None:
        fields["human_wait_ms"] = to_ms(max(0, run.started_ns - run.paused_ns))
    return [*events, run.event(ev.TURN_COMPLETED, end, fields)]


def message_of(attrs: Mapping[str, Any]) -> str:
    """The user's message in a span's input (its last user message), or ''."""
    for key in (OI_INPUT, TL_INPUT, GENAI_INPUT_MESSAGES):
        raw = attrs.get(key)
        if not isinstance(raw, str) or raw[:1] not in "{[":
            continue
        try:
            value = json_loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("inputs"), dict):
            value = value["inputs"]
        messages = value.get("messages") if isinstance(value, dict) else value
        if not isinstance(messages, list):
            continue
        for message in reversed(messages):
            if isinstance(message, dict) and _is_user(message):
                text = _answer_in(message)
                if text:
                    return text
    return ""


def _is_user(message: Mapping[str, Any]) -> bool:
    for where in (message, message.get("data"), message.get("kwargs")):
        if isinstance(where, Mapping) and (
            where.get("role") == "user" or where.get("type") == "human"
        ):
            return True
    ids = message.get("id")
    return isinstance(ids, list) and bool(ids) and ids[-1] == "HumanMessage"


def answer_of(attrs: Mapping[str, Any]) -> str:
    """The answer of a foreign run: its root's output, as far as it says one."""
    for key in (OI_OUTPUT, TL_OUTPUT, GENAI_OUTPUT_MESSAGES):
        raw = attrs.get(key)
        if raw is None:
            continue
        try:
            value: Any = json_loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return str(raw)
        found = _answer_in(value)
        if found is not None:
            return found
    return ""


def _answer_in(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("outputs"), dict):
            return _answer_in(value["outputs"])
        for key in ("answer", "output", "content"):
            if isinstance(value.get(key), str):
                return value[key]
        if isinstance(value.get("content"), list):  # content blocks
            texts = [
                b.get("text", "") if isinstance(b, dict) else str(b)
                for b in value["content"]
                if isinstance(b, dict | str)
            ]
            if any(texts):
                return "".join(texts)
        if isinstance(value.get("data"), dict):  # LangChain's message_to_dict: {type, data}
            return _answer_in(value["data"])
        messages = value.get("messages")
        if isinstance(messages, list) and messages:
            return _answer_in(messages[-1])
        parts = value.get("parts")
        if isinstance(parts, list):
            texts = [
                str(p["content"])
                for p in parts
                if isinstance(p, dict) and isinstance(p.get("content"), str)
            ]
            return "".join(texts) if texts else None
        kwargs = value.get("kwargs")
        if isinstance(kwargs, dict):
            return _answer_in(kwargs)
    if isinstance(value, list) and value:
        return _answer_in(value[-1])
    return None
