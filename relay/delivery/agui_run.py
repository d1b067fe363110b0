"""Inside one AG-UI run: the steps, text messages and tool calls it holds open.

AG-UI brackets what our contract reports as facts: a step, a text message and a tool call
each open and close. :class:`Run` is one run's open brackets; it translates our
``node_started``/``node_completed``, ``text_delta`` and ``tool_started``/``tool_completed``
into the AG-UI events that open and close them, and closes what is left open when the run
ends (:meth:`Run.close_all`). The run itself (its start, outcome and the stream of runs)
is :class:`relay.delivery.agui.AGUIEncoder`'s.

The helpers here shape every AG-UI event dict either writes: camelCase fields, integer
epoch-ms ``timestamp``, no ``null`` (optional fields are left out).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from relay.events import dumps


def step_name(node: str, span_id: str | None, ordinal: int) -> str:
    """A step's name: unique per node instance, so repeated or parallel nodes never
    collide (``generate#b3809cdbf4db0f95``; ``generate:2`` when a span id is missing)."""
    return f"{node}#{span_id}" if span_id else f"{node}:{ordinal}"


def clean(value: Any) -> Any:
    """``value`` without any ``null``: AG-UI leaves optional fields out instead."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value if v is not None]
    return value


def timestamp(ts: Any) -> int:
    """AG-UI timestamps are integer epoch milliseconds (our ``ts`` is a float)."""
    try:
        return int(ts)
    except (TypeError, ValueError, OverflowError):
        return int(time.time() * 1000)


def agui_event(type_: str, ts: float, **fields: Any) -> dict[str, Any]:
    """One AG-UI event: its ``type``, ``timestamp`` and the fields that are not None."""
    event = {"type": type_, "timestamp": timestamp(ts)}
    event.update({k: v for k, v in fields.items() if v is not None})
    return event


def custom(name: str, ts: float, value: Any) -> dict[str, Any]:
    """A ``CUSTOM`` event named ``name`` (one of our facts AG-UI has no event for)."""
    return agui_event("CUSTOM", ts, name=name, value=clean(value))


def tool_result(call_id: str, ts: float, content: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's ``TOOL_CALL_RESULT``, ``content`` as JSON."""
    return agui_event(
        "TOOL_CALL_RESULT",
        ts,
        messageId=f"{call_id}-result",
        toolCallId=call_id,
        role="tool",
        content=dumps(clean(dict(content))),
    )


@dataclass(slots=True)
class Message:
    message_id: str
    node: str | None
    span_id: str | None
    text: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Run:
    """One AG-UI run's id and what it holds open. ``known_args``, where a method takes it:
    a tool's arguments from the approval interrupt that proposed the call, by tool name,
    for a ``tool_started`` that carries none."""

    run_id: str
    trace_id: str | None
    steps: dict[str, tuple[str, str]] = field(default_factory=dict)  # span -> (step, node)
    messages: dict[str, Message] = field(default_factory=dict)  # open, by message id
    #: the text message that got this run's latest delta (the model's last words)
    last_message: Message | None = None
    pending_results: dict[str, tuple[str, str]] = field(default_factory=dict)  # span -> call
    tool_calls: set[str] = field(default_factory=set)  # call ids started in this run
    #: results of tools that paused, held until the run's end: a client-executed tool
    #: gets none (its result is the client's to give: AG-UI's pendingToolCallIds)
    paused_results: dict[str, dict[str, Any]] = field(default_factory=dict)
    ordinal: int = 0

    def streamed_last(self) -> str | None:
        """The text of the message this run streamed last, None when it streamed none."""
        return "".join(self.last_message.text) if self.last_message is not None else None

    def close_all(self, ts: float, status: str = "cancelled") -> list[dict[str, Any]]:
        """Close what the run left open: text messages, steps, tool calls without result."""
        out = [agui_event("TEXT_MESSAGE_END", ts, messageId=m) for m in self.messages]
        self.messages.clear()
        for span_id, (step, node) in self.steps.items():
            out.append(agui_event("STEP_FINISHED", ts, stepName=step))
            out.append(
                custom(
                    "node_completed",
                    ts,
                    {"step_name": step, "node": node, "span_id": span_id, "status": status},
                )
            )
        self.steps.clear()
        for call_id, tool in self.pending_results.values():
            out.append(tool_result(call_id, ts, {"tool": tool, "status": status}))
        self.pending_results.clear()
        out += [
            tool_result(call_id, ts, content) for call_id, content in self.paused_results.items()
        ]
        self.paused_results.clear()
        return out

    def node_started(self, f: Mapping[str, Any], ts: float) -> list[dict[str, Any]]:
        node = str(f.get("node") or "node")
        span_id = f.get("span_id")
        key = str(span_id) if span_id else f"{node}:{self.ordinal + 1}"
        if key in self.steps:
            return []
        self.ordinal += 1
        step = step_name(node, str(span_id) if span_id else None, self.ordinal)
        self.steps[key] = (step, node)
        metadata = clean(
            {
                "node": node,
                "span_id": span_id,
                "parent_span_id": f.get("parent_span_id"),
                "step": f.get("step"),
                "task_id": f.get("task_id"),
                # a subgraph's node: the enclosing nodes (absent at the top)
                "namespace": f.get("namespace") or None,
            }
        )
        return [agui_event("STEP_STARTED", ts, stepName=step, metadata=metadata)]

    def node_completed(self, f: Mapping[str, Any], ts: float) -> list[dict[str, Any]]:
        node = str(f.get("node") or "node")
        span_id = f.get("span_id")
        out: list[dict[str, Any]] = []
        children = f.get("children")
        inside = (
            {str(c.get("span_id")) for c in children if isinstance(c, Mapping)}
            if isinstance(children, list) and children
            else None
        )
        for message_id, message in list(self.messages.items()):
            mine = message.span_id in inside if inside is not None else message.node == node
            if mine or (span_id and message.span_id == span_id):
                out.append(agui_event("TEXT_MESSAGE_END", ts, messageId=message_id))
                del self.messages[message_id]
        key = (
            str(span_id)
            if span_id
            else next((k for k, (_, n) in self.steps.items() if n == node), None)
        )
        opened = self.steps.pop(key, None) if key is not None else None
        if opened is not None:
            out.append(agui_event("STEP_FINISHED", ts, stepName=opened[0]))
        facts = {"step_name": opened[0] if opened else None, "node": node, "span_id": span_id}
        facts.update(
            {k: f[k] for k in ("status", "duration_ms", "summary", "children", "attempt") if k in f}
        )
        out.append(custom("node_completed", ts, facts))
        return out

    def text_delta(self, f: Mapping[str, Any], ts: float) -> list[dict[str, Any]]:
        message_id = str(f.get("message_id") or f"msg_{f.get('span_id') or self.run_id}")
        delta = f.get("delta")
        if not isinstance(delta, str):
            return []
        out: list[dict[str, Any]] = []
        message = self.messages.get(message_id)
        if message is None:
            node = f.get("node")
            span = f.get("span_id")
            message = self.messages[message_id] = Message(
                message_id, str(node) if node else None, str(span) if span else None
            )
            out.append(agui_event("TEXT_MESSAGE_START", ts, messageId=message_id, role="assistant"))
        message.text.append(delta)
        self.last_message = message
        out.append(agui_event("TEXT_MESSAGE_CONTENT", ts, messageId=message_id, delta=delta))
        return out

    def tool_started(
        self, f: Mapping[str, Any], ts: float, known_args: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        span_id = str(f.get("span_id") or "")
        tool = str(f.get("tool") or "tool")
        call_id = str(f.get("call_id") or span_id or f"{tool}-{self.ordinal}")
        if span_id in self.pending_results or call_id in self.tool_calls:
            return []
        self.tool_calls.add(call_id)
        self.pending_results[span_id or call_id] = (call_id, tool)
        args = f.get("args")
        if args is None:
            args = known_args.get(tool, {})
        metadata = clean(
            {
                "label": f.get("label"),
                "node": f.get("node"),
                "span_id": span_id,
                "args_truncated": f.get("args_truncated"),
            }
        )
        return [
            agui_event(
                "TOOL_CALL_START",
                ts,
                toolCallId=call_id,
                toolCallName=tool,
                metadata=metadata or None,
            ),
            agui_event(
                "TOOL_CALL_ARGS",
                ts,
                toolCallId=call_id,
                delta=args if isinstance(args, str) else dumps(clean(args)),
            ),
            agui_event("TOOL_CALL_END", ts, toolCallId=call_id),
        ]

    def tool_completed(
        self, f: Mapping[str, Any], ts: float, known_args: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        span_id = str(f.get("span_id") or "")
        out: list[dict[str, Any]] = []
        opened = self.pending_results.pop(span_id, None) if span_id else None
        if opened is None and f.get("call_id"):
            key = next(
                (k for k, (c, _) in self.pending_results.items() if c == f.get("call_id")), None
            )
            opened = self.pending_results.pop(key) if key is not None else None
        if opened is None:  # its start came before this stream's cursor
            out += self.tool_started(f, ts, known_args)
            opened = self.pending_results.pop(span_id or str(f.get("call_id") or ""), None)
            if opened is None:
                return out
        call_id, tool = opened
        content = {
            "tool": tool,
            "status": f.get("status", "ok"),
            "duration_ms": f.get("duration_ms"),
            "result": f.get("result"),
        }
        if content["status"] == "paused":
            self.paused_results[call_id] = content
        else:
            out.append(tool_result(call_id, ts, content))
        return out
