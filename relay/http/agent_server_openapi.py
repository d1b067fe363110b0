"""OpenAPI descriptions of the Agent Server routes' bodies (relay/http/agent_server.py).

The bodies are read by hand (every bad input gets our own 4xx), which hides them from
FastAPI's schema; these fragments put them back, as precise as the checks: a body that
fits its schema is never refused for its shape (schemathesis tests the document).
"""

from __future__ import annotations

from typing import Any

from relay.agent_server.assistants import SORT_KEYS
from relay.agent_server.requests import STREAM_MODES

_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$"}
_OBJECT = {"type": "object"}
_MODE = {"type": "string", "enum": list(STREAM_MODES)}


def _body(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "additionalProperties": False, "properties": properties}
    schema.update(extra)
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema}},
        }
    }


_RUN = _body(
    {
        "assistant_id": {
            "type": "string",
            "minLength": 1,
            "description": "an assistant id, or a served graph's name",
        },
        "input": {"type": "object", "description": "the graph's own input"},
        "command": {
            "type": "object",
            "additionalProperties": False,
            "required": ["resume"],
            "properties": {"resume": {"description": "the answer to the thread's interrupt"}},
        },
        "stream_mode": {"anyOf": [_MODE, {"type": "array", "items": _MODE, "minItems": 1}]},
        "config": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"configurable": _OBJECT},
        },
        "metadata": {"type": "object", "description": "accepted, not stored"},
        "stream_subgraphs": {"type": "boolean", "description": "accepted, no subgraph events"},
        "stream_resumable": {"type": "boolean", "description": "accepted, no event ids"},
        "if_not_exists": {"type": "string", "enum": ["reject", "create"]},
        "on_disconnect": {"type": "string", "enum": ["continue", "cancel"]},
        "multitask_strategy": {"type": "string", "enum": ["reject"]},
        "durability": {"type": "string", "enum": ["sync", "async", "exit"]},
        "checkpoint": {
            "type": "object",
            "description": "the thread's latest checkpoint (a branch from an earlier one: 422)",
            "properties": {
                "checkpoint_id": {"type": "string", "minLength": 1},
                "checkpoint_ns": {"const": ""},
            },
        },
        "checkpoint_id": {"type": "string", "minLength": 1, "description": "as checkpoint"},
    },
    required=["assistant_id"],
    # input or command.resume; an empty input beside a resume (useStream's) is no input
    anyOf=[
        {"required": ["input"], "not": {"required": ["command"]}},
        {"required": ["command"], "not": {"required": ["input"]}},
        {"required": ["command"], "properties": {"input": {"maxProperties": 0}}},
    ],
)

#: a stateless run's body (relay/http/agent_server_stateless.py): a run's, on a new thread
_STATELESS = _body(
    {
        **{
            key: value
            for key, value in _RUN["requestBody"]["content"]["application/json"]["schema"][
                "properties"
            ].items()
            if key not in ("command", "checkpoint", "checkpoint_id")
        },
        "if_not_exists": {"const": "create", "description": "the run makes its thread"},
        "on_completion": {"type": "string", "enum": ["delete", "keep"]},
    },
    required=["assistant_id", "input"],
)

_CONFIG = {"type": "object", "additionalProperties": False, "properties": {"configurable": _OBJECT}}
_COMMAND = {
    "anyOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "method", "params"],
            "properties": {
                "id": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1},
                "method": {"const": "run.start"},
                "params": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["assistant_id", "input"],
                    "properties": {
                        "assistant_id": {"type": "string", "minLength": 1},
                        "input": {"type": "object", "description": "the graph's own input"},
                        "config": _CONFIG,
                        "metadata": _OBJECT,
                    },
                },
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "method", "params"],
            "properties": {
                "id": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1},
                "method": {"const": "input.respond"},
                "params": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["interrupt_id", "response"],
                    "properties": {
                        "namespace": {"type": "array", "maxItems": 0},
                        "interrupt_id": {"type": "string", "minLength": 1},
                        "response": {"description": "the answer"},
                    },
                },
            },
        },
    ]
}
#: a refused command: the protocol's error, or the relay's own (a body that is not JSON)
_COMMAND_ERROR = {
    "anyOf": [
        {
            "type": "object",
            "required": ["type", "id", "error", "message"],
            "properties": {
                "type": {"const": "error"},
                "id": {"type": ["integer", "null"]},
                "error": {"type": "string"},
                "code": {"type": "string"},
                "message": {"type": "string"},
            },
        },
        {"$ref": "#/components/schemas/ErrorBody"},
    ]
}
_CHANNELS = ["values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints"]

AGENT_SERVER_OPENAPI: dict[str, dict[str, Any]] = {
    "search": _body(
        {
            "graph_id": {"type": "string"},
            "name": {"type": "string"},
            "metadata": _OBJECT,
            "limit": {"type": "integer", "minimum": 0, "maximum": 1000},
            "offset": {"type": "integer", "minimum": 0, "maximum": 1000000},
            "sort_by": {"type": "string", "enum": list(SORT_KEYS)},
            "sort_order": {"type": "string", "enum": ["asc", "desc"]},
            "select": {"type": "array", "items": {"type": "string"}},
        }
    ),
    "create_thread": _body(
        {
            "thread_id": _ID,
            "metadata": {"type": "object", "description": "the thread's metadata"},
            "if_exists": {"type": "string", "enum": ["raise", "do_nothing"]},
        }
    ),
    "history": _body(
        {
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
            "before": {"type": "object", "description": "a checkpoint: its checkpoint_id"},
            "metadata": {"type": "object", "description": "checkpoint metadata to match"},
        }
    ),
    "run_stream": {
        **_RUN,
        "responses": {
            "200": {
                "description": "LangGraph's run stream (SSE): metadata, then the stream modes",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        },
    },
    "run_wait": {
        **_RUN,
        "responses": {
            "200": {
                "description": "The thread's values at the run's end (with __interrupt__ "
                "when it paused), or {__error__: {error, message}}",
                "content": {"application/json": {"schema": _OBJECT}},
            }
        },
    },
    "stateless_stream": {
        **_STATELESS,
        "responses": {
            "200": {
                "description": "LangGraph's run stream (SSE), as /threads/{id}/runs/stream",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        },
    },
    "stateless_wait": {
        **_STATELESS,
        "responses": {
            "200": {
                "description": "The values at the run's end, as /threads/{id}/runs/wait",
                "content": {"application/json": {"schema": _OBJECT}},
            }
        },
    },
    "stateless_create": {
        **_STATELESS,
        "responses": {
            "200": {
                "description": "The run (LangGraph's Run), at once",
                "content": {"application/json": {"schema": _OBJECT}},
            }
        },
    },
    "commands": {
        "requestBody": {"required": True, "content": {"application/json": {"schema": _COMMAND}}},
        "responses": {
            "200": {
                "description": "{type: success, id, result: {run_id}}",
                "content": {"application/json": {"schema": _OBJECT}},
            },
            **{
                str(code): {
                    "description": reason,
                    "content": {"application/json": {"schema": _COMMAND_ERROR}},
                }
                for code, reason in (
                    (404, "No such thread, assistant or run waiting for input"),
                    (409, "The thread has a run going"),
                    (422, "Not a command this server runs, or a bad one"),
                )
            },
        },
    },
    "stream_events": {
        **_body(
            {
                "channels": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string", "enum": [*_CHANNELS, "tasks", "custom"]},
                },
                "namespaces": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "string"}},
                },
                "depth": {"type": "integer", "minimum": 0, "maximum": 1000},
                "since": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1},
            },
            required=["channels"],
        ),
        "responses": {
            "200": {
                "description": "The thread's events (SSE), each with its seq as id",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        },
    },
}
