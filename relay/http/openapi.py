"""OpenAPI descriptions of the run endpoints (/chat, /chat/resume, /agui).

The bodies are parsed by hand (so that every bad input gets our own 4xx error, not a
framework's), which hides them from FastAPI's schema; these fragments put them back, so
the OpenAPI document describes the real contract (and schemathesis can test it).
"""

from __future__ import annotations

from typing import Any

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}
_RESPONSE = {
    "type": "object",
    "required": [
        "thread_id",
        "turn_id",
        "trace_id",
        "status",
        "answer",
        "citations",
        "interrupts",
        "nodes",
    ],
    "properties": {
        "thread_id": {"type": "string"},
        "turn_id": {"type": "string"},
        "trace_id": {"type": "string"},
        "status": {
            "type": "string",
            "enum": ["answered", "refused", "paused", "error", "cancelled", "interrupted"],
        },
        "answer": {"type": "string"},
        "citations": {"type": "array", "items": {"type": "object"}},
        "interrupts": {"type": "array", "items": {"type": "object"}},
        "nodes": {"type": "array", "items": {"type": "object"}},
    },
}
_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$"}


def _responses() -> dict[str, Any]:
    error = {"content": {"application/json": {"schema": _ERROR}}}
    return {
        "200": {
            "description": "The ChatResponse, or the run's event stream",
            "content": {
                "application/json": {"schema": _RESPONSE},
                "text/event-stream": {"schema": {"type": "string"}},
                "application/x-ndjson": {"schema": {"type": "string"}},
            },
        },
        "202": {
            "description": "Started in the background (Prefer: respond-async)",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **{
            code: {"description": text, **error}
            for code, text in (
                ("400", "Malformed body"),
                ("401", "Missing or wrong bearer token"),
                ("404", "Unknown turn"),
                ("406", "Unacceptable Accept"),
                ("409", "Conflict with the turn's or thread's state"),
                ("413", "Body too large"),
                ("415", "Not JSON (send Content-Type: application/json)"),
                ("422", "Invalid or unknown field"),
                ("429", "Rate limited"),
            )
        },
    }


CHAT_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "oneOf": [
                        {"required": ["message"], "not": {"required": ["input"]}},
                        {"required": ["input"], "not": {"required": ["message"]}},
                    ],
                    "properties": {
                        "message": {"type": "string", "minLength": 1, "pattern": r"\S"},
                        "input": {
                            "type": "object",
                            "description": "the graph's own input, instead of message",
                        },
                        "thread_id": {"anyOf": [_ID, {"type": "null"}]},
                        "turn_id": {
                            "anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]
                        },
                    },
                }
            }
        },
    },
    "responses": _responses(),
}

_RESUME_DESCRIPTION = (
    "The answer to the turn's single pending interrupt, or {interrupt_id: answer} for each. "
    'An approval: {"approved": bool, "comment"?}. A client-executed tool (an interrupt of '
    'type client_tool): {"result": <any JSON>, "token": "..."} or {"error": "...", "token": '
    '"..."}, the token from its interrupt: single use, 409 client_tool_token_stale when it '
    "answers no pending call; a result over RELAY_CLIENT_TOOL_MAX_RESULT_BYTES is 413 "
    "client_tool_result_too_large; an answer after RELAY_CLIENT_TOOL_TIMEOUT_S is 409 "
    "client_tool_timeout"
)


RESUME_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["thread_id", "turn_id", "resume"],
                    "properties": {
                        "thread_id": _ID,
                        "turn_id": _ID,
                        "resume": {
                            "description": _RESUME_DESCRIPTION,
                        },
                    },
                }
            }
        },
    },
    "responses": _responses(),
}


def _input_schema() -> dict[str, Any]:
    """``RunAgentInput``'s JSON schema, from the ``ag-ui-protocol`` models (references
    inlined), narrowed to what this endpoint takes: our thread id pattern, a run id, and
    messages that hold a user message with text (the turn's message)."""
    from ag_ui.core import RunAgentInput

    schema = RunAgentInput.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            out = {k: inline(v) for k, v in node.items() if k != "discriminator"}
            tags = [
                k
                for k, v in out.get("properties", {}).items()
                if isinstance(v, dict) and "const" in v
            ]
            if tags:  # a union's tag (a message's role, a part's type) must be sent
                out["required"] = sorted({*out.get("required", []), *tags})
            return out
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    schema = inline(schema)
    props = schema["properties"]
    props["threadId"] = {"type": "string", "pattern": _ID["pattern"]}
    props["runId"] = {"type": "string", "minLength": 1, "maxLength": 256}
    props["messages"].update(
        minItems=1,
        contains={
            "type": "object",
            "required": ["role", "content"],
            "properties": {
                "role": {"const": "user"},
                "content": {"type": "string", "pattern": r"\S"},
            },
        },
    )
    schema["description"] = (
        "AG-UI 1.0 RunAgentInput (https://ag-ui.com/spec/1.0/schema.json)"
        "; resume[] answers the thread's pending interrupts"
    )
    return schema


AGUI_OPENAPI: dict[str, Any] = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": _input_schema()}}},
    "responses": {
        "200": {
            "description": "The run's AG-UI events: SSE frames of one data line each, "
            "an AG-UI event as JSON",
            "content": {
                "text/event-stream": {
                    "schema": {
                        "type": "object",
                        "required": ["data"],
                        "properties": {
                            "data": {"type": "string", "contentMediaType": "application/json"}
                        },
                    }
                }
            },
        },
        **{
            code: {"description": text, "content": {"application/json": {"schema": _ERROR}}}
            for code, text in (
                ("400", "Malformed body"),
                ("401", "Missing or wrong bearer token"),
                ("404", "No run to resume"),
                ("406", "Unacceptable Accept"),
                ("409", "Conflict with the run's or thread's state"),
                ("413", "Body too large"),
                ("415", "Not JSON (send Content-Type: application/json)"),
                ("422", "Invalid RunAgentInput"),
                ("429", "Rate limited"),
                ("503", "Bus unavailable"),
            )
        },
    },
}
