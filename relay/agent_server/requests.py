"""A run's request body (``POST /threads/{thread_id}/runs``, ``/runs/stream`` and ``/runs/wait``;
a stateless run's: relay/http/agent_server_stateless.py reads its ``on_completion``), read
and checked: what this slice of the Agent Server API serves, and a clear 422 for what it
does not (never a field silently dropped that changes what the run does).

Served: ``assistant_id``, ``input`` (the graph's own input object), ``command.resume`` (an
empty ``input`` beside it, as agent-chat-ui sends a resume, is no input; LangGraph runs the
command), ``checkpoint`` / ``checkpoint_id`` (``useStream`` with ``fetchStateHistory``
names the thread's head with each run; the route serves the thread's latest only, and a
branch from an earlier one is a 422: relay/http/agent_server.py),
``stream_mode`` (``values``, ``updates``, ``messages-tuple``, ``custom``: one or a list),
``config.configurable`` (the relay's own entries win; other ``config`` keys are a 422),
``if_not_exists`` (``reject`` or ``create``), ``on_disconnect`` (``continue``, the
default, or ``cancel``), ``multitask_strategy`` ``reject`` (the only one served:
``interrupt``, ``rollback`` and ``enqueue`` are a 422 that says so), ``metadata`` (written into the
metadata of a thread the run creates, as LangGraph does; not kept on the run),
``stream_resumable`` (the stream's frames get ``id:`` lines, which the join stream
resumes after: relay/agent_server/stream.py), ``stream_subgraphs`` (a boolean: the
stream's subgraph events too, named ``mode|namespace``). Accepted and without effect:
``durability`` (runs always save each
step: ``sync``), ``checkpoint_during``, ``strict_resume``, ``langsmith_tracer``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from relay.errors import ApiError
from relay.langgraph.hooks import message_text

#: the stream modes served, in LangGraph's spelling
STREAM_MODES = ("values", "updates", "messages-tuple", "custom")
#: fields accepted that do not change the run (see the module docstring)
_WITHOUT_EFFECT = (
    "durability",
    "checkpoint_during",
    "strict_resume",
    "langsmith_tracer",
)
#: fields of LangGraph's API that this slice does not serve: a 422 when set
_NOT_SERVED = (
    "context",
    "interrupt_before",
    "interrupt_after",
    "feedback_keys",
    "webhook",
    "on_completion",
    "after_seconds",
)
_SERVED = (
    "assistant_id",
    "input",
    "command",
    "config",
    "stream_mode",
    "if_not_exists",
    "on_disconnect",
    "multitask_strategy",
    "metadata",
    "stream_resumable",
    "checkpoint",
    "checkpoint_id",
    "stream_subgraphs",
)
KNOWN_FIELDS = frozenset((*_SERVED, *_WITHOUT_EFFECT, *_NOT_SERVED))
_MISSING = object()


@dataclasses.dataclass(slots=True)
class RunRequest:
    """A checked run request: ``resume`` is ``command.resume`` (``has_resume`` tells a
    resume of None from no resume)."""

    assistant_id: str
    graph_input: dict[str, Any] | None
    has_resume: bool
    resume: Any
    stream_modes: tuple[str, ...]
    configurable: dict[str, Any]
    create_thread: bool
    on_disconnect: str
    #: the run's ``metadata``: what a thread the run creates starts with
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: ``stream_resumable``: the run stream's frames carry ids
    resumable: bool = False
    #: the checkpoint the run asks to start from (``checkpoint.checkpoint_id`` or
    #: ``checkpoint_id``); None: the thread's latest, the only one served
    checkpoint_id: str | None = None
    #: ``stream_subgraphs``: the run stream sends the subgraphs' ``mode|ns`` events
    subgraphs: bool = False


def turn_message(graph_input: Mapping[str, Any] | None) -> str:
    """What the run's turn records as its message (the SPA's and ``GET /turns``'s "You
    said"): the text of the input's last message when the input is a ``messages`` list
    (a chat frontend's), else the input as JSON (at most 2,000 characters)."""
    messages = graph_input.get("messages") if graph_input is not None else None
    if isinstance(messages, list) and messages:
        text = message_text(messages[-1])
        if text:
            return text[:2000]
    return json.dumps(graph_input, ensure_ascii=False, default=str)[:2000]


def count_of(body: Mapping[str, Any], key: str, default: int, least: int, most: int) -> int:
    """A whole number field from ``least`` to ``most`` (JSON's ``10.0`` is 10, as JSON
    Schema's ``integer`` allows); absent or null: ``default``; else a 422."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise ApiError(
            422, "invalid_request", f"'{key}' must be an integer from {least} to {most}."
        )
    return value


def _refuse(message: str) -> ApiError:
    return ApiError(422, "invalid_run", message)


def _choice(body: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = body.get(key)
    if value is None:
        return default
    if value not in allowed:
        raise _refuse(f"'{key}' must be one of {', '.join(allowed)}.")
    return str(value)


def stream_modes_of(value: Any) -> tuple[str, ...]:
    """``stream_mode`` as a tuple of served modes (default ``values``)."""
    if value is None:
        return ("values",)
    modes = [value] if isinstance(value, str) else value
    if not isinstance(modes, list) or not modes or not all(isinstance(m, str) for m in modes):
        raise _refuse("'stream_mode' must be a stream mode or a non-empty list of them.")
    unserved = [m for m in modes if m not in STREAM_MODES]
    if unserved:
        raise ApiError(
            422,
            "unsupported_stream_mode",
            f"Stream mode {', '.join(unserved)} is not served here yet; "
            f"use {', '.join(STREAM_MODES)}.",
        )
    return tuple(dict.fromkeys(modes))


def _resume_of(body: Mapping[str, Any]) -> tuple[bool, Any]:
    command = body.get("command")
    if command is None:
        return False, None
    if not isinstance(command, dict):
        raise _refuse("'command' must be an object.")
    others = sorted(k for k, v in command.items() if k != "resume" and v is not None)
    if others:
        raise ApiError(
            422,
            "unsupported_command",
            f"command.{others[0]} is not served here yet; command.resume is.",
        )
    found = command.get("resume", _MISSING)
    return found is not _MISSING, None if found is _MISSING else found


def _configurable_of(body: Mapping[str, Any]) -> dict[str, Any]:
    config = body.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise _refuse("'config' must be an object.")
    others = sorted(k for k in config if k != "configurable")
    if others:
        raise ApiError(
            422,
            "unsupported_field",
            f"config.{others[0]} is not served here yet; config.configurable is.",
        )
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, dict):
        raise _refuse("'config.configurable' must be an object.")
    return dict(configurable)


def run_request(body: Mapping[str, Any]) -> RunRequest:
    """The run a body asks for, or a 422 that names what is wrong or not served."""
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise ApiError(422, "unknown_fields", f"Unknown fields: {', '.join(unknown)}.")
    unserved = [k for k in _NOT_SERVED if body.get(k) not in (None, {}, [])]
    if unserved:
        raise ApiError(
            422, "unsupported_field", f"'{unserved[0]}' is not served here yet; leave it out."
        )
    assistant_id = body.get("assistant_id")
    if not isinstance(assistant_id, str) or not assistant_id:
        raise _refuse("'assistant_id' is required: an assistant id or a graph's name.")
    graph_input = body.get("input")
    if graph_input is not None and not isinstance(graph_input, dict):
        raise _refuse("'input' must be an object: the graph's own input.")
    has_resume, resume = _resume_of(body)
    if has_resume and graph_input == {}:
        graph_input = None  # nothing to drop: the resume is the run's input
    if has_resume and graph_input is not None:
        raise _refuse("Send 'input' or 'command.resume', not both.")
    if not has_resume and graph_input is None:
        if body.get("checkpoint") is not None or body.get("checkpoint_id") is not None:
            raise ApiError(
                422,
                "unsupported_field",
                "A run from a checkpoint with neither 'input' nor 'command' (a regenerate: "
                "a branch) is not served here yet.",
            )
        raise _refuse("Send 'input' (the graph's input) or 'command.resume'.")
    strategy = body.get("multitask_strategy")
    if strategy is not None and strategy != "reject":
        raise ApiError(
            422,
            "unsupported_multitask_strategy",
            f"multitask_strategy {strategy!r} is not served: only 'reject' is (a run on a "
            "thread that runs one is a 409); 'interrupt', 'rollback' and 'enqueue' are not "
            "served yet.",
        )
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _refuse("'metadata' must be an object.")
    return RunRequest(
        assistant_id=assistant_id,
        graph_input=graph_input,
        has_resume=has_resume,
        resume=resume,
        stream_modes=stream_modes_of(body.get("stream_mode")),
        configurable=_configurable_of(body),
        create_thread=_choice(body, "if_not_exists", ("reject", "create"), "reject") == "create",
        on_disconnect=_choice(body, "on_disconnect", ("continue", "cancel"), "continue"),
        metadata=dict(metadata or {}),
        resumable=body.get("stream_resumable") is True,
        checkpoint_id=_checkpoint_of(body),
        subgraphs=_flag(body, "stream_subgraphs"),
    )


def _checkpoint_of(body: Mapping[str, Any]) -> str | None:
    """The checkpoint id ``checkpoint`` (an object, LangGraph's Checkpoint) names, else
    ``checkpoint_id``; None when neither does. A subgraph's checkpoint (a
    ``checkpoint_ns`` that is not empty) is a 422."""
    checkpoint = body.get("checkpoint")
    named = body.get("checkpoint_id")
    if checkpoint is not None:
        if not isinstance(checkpoint, dict):
            raise _refuse("'checkpoint' must be an object: a checkpoint of the thread.")
        if checkpoint.get("checkpoint_ns") not in (None, ""):
            raise ApiError(
                422,
                "unsupported_field",
                "'checkpoint' of a subgraph (checkpoint_ns) is not served here yet.",
            )
        inner = checkpoint.get("checkpoint_id")
        named = inner if inner is not None else named  # LangGraph's order: checkpoint wins
    if named is not None and (not isinstance(named, str) or not named):
        raise _refuse("'checkpoint_id' must be a checkpoint id.")
    return named


def _flag(body: Mapping[str, Any], name: str) -> bool:
    """A boolean field (absent or null: false); anything else is a 422."""
    found = body.get(name)
    if found is None:
        return False
    if not isinstance(found, bool):
        raise _refuse(f"'{name}' must be a boolean.")
    return found
