"""The defaults of :class:`relay.GraphAgent`'s hooks, for graphs on ``MessagesState``
(prebuilt agents, supervisors, swarms, deep agents) (DESIGN.md §2).

- ``input_of(message, record)``: the graph's input for the user's message;
- ``answer_of(values)``: the answer's text, from the graph's output (any shape:
  :func:`default_answer`);
- ``citations_of(values)``: the answer's sources, ``[{...}]``;
- ``status_of(values)``: ``answered``, or ``refused`` for a graph that says so;
- ``waiting_of(interrupts)``: what the answer says while the turn waits on a person.

:func:`input_keys` reads a graph's input keys (its input JSON schema), so that a graph
whose input has no ``messages`` is not handed the default ``input_of``'s
``{"messages": [...]}`` (which it would drop, answering nothing).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any


def default_input(message: str, record: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": message}]}


def input_keys(graph: Any) -> list[str] | None:
    """The keys of a compiled graph's input: the properties of its input JSON schema, else
    the channels of its builder's input schema; None when the input is not an object or
    cannot be read."""
    try:
        schema = graph.get_input_jsonschema()
    except Exception:  # a schema pydantic cannot read (typing.TypedDict before 3.12)
        schema = None
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(properties, Mapping):
        return [str(key) for key in properties]
    builder = getattr(graph, "builder", None)
    channels = getattr(builder, "schemas", {}).get(getattr(builder, "input_schema", None))
    return [str(key) for key in channels] if isinstance(channels, Mapping) else None


def default_answer(values: Any) -> str:
    """The answer's text, for every shape a graph's output takes:

    - a string (a functional-API ``@entrypoint`` that returns one): itself;
    - a dict: its ``answer`` when that is text, else the text of the last AI message
      of its ``messages``;
    - a message (LangChain's, or its dict form): its text; a list of messages: the text
      of the last AI message;
    - a pydantic model or a dataclass: its JSON (compact, as pydantic writes it);
    - anything else (None, a dict with neither key): ``""``.
    """
    if isinstance(values, str):
        return values
    if _is_message(values):
        return message_text(values)
    if isinstance(values, Mapping):
        answer = values.get("answer")
        if isinstance(answer, str):
            return answer
        return _last_ai_text(values.get("messages"))
    if isinstance(values, Sequence):
        return _last_ai_text(values)
    dumped = _model_json(values)
    return dumped if dumped is not None else ""


def _last_ai_text(messages: Any) -> str:
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        return ""
    for message in reversed(messages):
        if _role(message) in ("ai", "assistant"):
            text = message_text(message)
            if text:
                return text
    return ""


def _is_message(value: Any) -> bool:
    """A LangChain message, or its dict form ``{"role"|"type", "content"}``."""
    if isinstance(value, Mapping):
        return (
            "content" in value
            and ("role" in value or "type" in value)
            and ("messages" not in value and "answer" not in value)
        )
    return isinstance(getattr(value, "type", None), str) and hasattr(value, "content")


def _model_json(value: Any) -> str | None:
    """A pydantic model's or a dataclass's JSON; None for anything else."""
    dump = getattr(value, "model_dump_json", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return str(dump())
        except Exception:  # a model pydantic cannot serialize: no answer, not a failure
            return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return json.dumps(
                dataclasses.asdict(value), ensure_ascii=False, separators=(",", ":"), default=str
            )
        except Exception:
            return None
    return None


def default_citations(values: Any) -> list[dict[str, Any]]:
    cited = values.get("citations") if isinstance(values, Mapping) else None
    return [dict(c) for c in cited if isinstance(c, Mapping)] if isinstance(cited, list) else []


def default_status(values: Any) -> str:
    return "answered"


def default_waiting(interrupts: list[dict[str, Any]]) -> str:
    values = [i.get("value") for i in interrupts]
    names = [
        str(v.get("name"))
        for v in values
        if isinstance(v, Mapping) and v.get("type") == "client_tool"
    ]
    if names and len(names) == len(values):  # client-executed tools (client_tools.py)
        return f"Waiting for the client to run {', '.join(names)}."
    return "Waiting for a person to answer."


def message_text(message: Any) -> str:
    """The text of a LangChain message, or of its dict form (``content`` a string or a
    list of content blocks)."""
    content = (
        message.get("content")
        if isinstance(message, Mapping)
        else getattr(message, "content", None)
    )
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block.get("text", "")
            if isinstance(block, Mapping)
            else block
            if isinstance(block, str)
            else ""
            for block in content
        )
    return ""


def _role(message: Any) -> str | None:
    if isinstance(message, Mapping):
        role = message.get("role") or message.get("type")
        return str(role) if role is not None else None
    return getattr(message, "type", None)
