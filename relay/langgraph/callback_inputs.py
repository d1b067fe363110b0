"""What LangChain's callbacks hand over, read for the spans (relay/langgraph/instrument.py):
a LangGraph task's metadata (:func:`task_of`), a tool call's arguments
(:func:`tool_arguments`), a model call's token counts (:func:`usage`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from relay import conventions as c


def task_of(metadata: Mapping[str, Any] | None) -> tuple[str, str, list[str], str | None] | None:
    """(node, checkpoint ns, namespace, task id) of a LangGraph task's metadata, or None.
    ``outer:1|inner:2`` is node ``inner`` in namespace ``["outer"]``, task ``2``."""
    if not metadata:
        return None
    node = metadata.get("langgraph_node")
    ns = metadata.get("langgraph_checkpoint_ns")
    if not isinstance(node, str) or not isinstance(ns, str) or not ns:
        return None
    segments = ns.split("|")
    last = segments[-1]
    if last.split(":", 1)[0] != node:
        return None  # a runnable of the parent task, not a task of its own
    task_id = last.rsplit(":", 1)[-1] if ":" in last else None
    return node, ns, [s.split(":", 1)[0] for s in segments[:-1]], task_id


def tool_arguments(inputs: Any, input_str: str) -> dict[str, Any]:
    """A tool call's arguments as span attributes: ``gen_ai.tool.call.arguments`` (their
    JSON; a tool called with a bare string: ``{"input": ...}``), cut at
    :data:`relay.conventions.TOOL_ARGUMENTS_MAX_CHARS` with ``relay.tool.args_truncated``.
    LangChain hands over the arguments without the injected ones (state, store, the call
    id). Content: RELAY_CAPTURE_CONTENT=false keeps them from OTLP export."""
    args = inputs if isinstance(inputs, Mapping) else {"input": input_str}
    try:
        text = json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a circular structure: nothing to show
        text = "{}"
    if len(text) <= c.TOOL_ARGUMENTS_MAX_CHARS:
        return {c.TOOL_CALL_ARGUMENTS: text}
    return {c.TOOL_CALL_ARGUMENTS: text[: c.TOOL_ARGUMENTS_MAX_CHARS], c.TOOL_ARGS_TRUNCATED: True}


def usage(response: Any) -> dict[str, Any]:
    """Token counts and the model that answered, from an LLMResult."""
    found: dict[str, Any] = {}
    try:
        message = response.generations[0][0].message
    except (AttributeError, IndexError, TypeError):
        return found
    usage = getattr(message, "usage_metadata", None) or {}
    if "input_tokens" in usage:
        found[c.INPUT_TOKENS] = int(usage["input_tokens"])
    if "output_tokens" in usage:
        found[c.OUTPUT_TOKENS] = int(usage["output_tokens"])
    model = (getattr(message, "response_metadata", None) or {}).get("model_name")
    if model:
        found[c.RESPONSE_MODEL] = str(model)
    return found
