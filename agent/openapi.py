"""OpenAPI descriptions of the run endpoints.

The bodies are parsed by hand (so that every bad input gets our own 4xx error, not a
framework's), which hides them from FastAPI's schema; these fragments put them back, so
the OpenAPI document describes the real contract (and schemathesis can test it).
"""

from __future__ import annotations

from typing import Any

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["code", "message"],
                             "properties": {"code": {"type": "string"},
                                            "message": {"type": "string"}}}},
}
_RESPONSE = {
    "type": "object",
    "required": ["thread_id", "turn_id", "trace_id", "status", "answer", "citations",
                 "interrupts", "nodes"],
    "properties": {
        "thread_id": {"type": "string"}, "turn_id": {"type": "string"},
        "trace_id": {"type": "string"},
        "status": {"type": "string", "enum": ["answered", "refused", "paused", "error",
                                              "cancelled", "interrupted"]},
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
        "200": {"description": "The ChatResponse, or the run's event stream",
                "content": {"application/json": {"schema": _RESPONSE},
                            "text/event-stream": {"schema": {"type": "string"}},
                            "application/x-ndjson": {"schema": {"type": "string"}}}},
        "202": {"description": "Started in the background (Prefer: respond-async)",
                "content": {"application/json": {"schema": {"type": "object"}}}},
        **{code: {"description": text, **error} for code, text in (
            ("400", "Malformed body"), ("401", "Missing or wrong bearer token"),
            ("404", "Unknown turn"), ("406", "Unacceptable Accept"),
            ("409", "Conflict with the turn's or thread's state"),
            ("413", "Body too large"), ("422", "Invalid field"),
            ("429", "Rate limited"))},
    }


CHAT_OPENAPI: dict[str, Any] = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["message"],
        "properties": {"message": {"type": "string", "minLength": 1, "pattern": r"\S"},
                       "thread_id": {"anyOf": [_ID, {"type": "null"}]},
                       "turn_id": {"anyOf": [{"type": "string", "format": "uuid"},
                                             {"type": "null"}]}},
    }}}},
    "responses": _responses(),
}

RESUME_OPENAPI: dict[str, Any] = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["thread_id", "turn_id", "resume"],
        "properties": {"thread_id": _ID, "turn_id": _ID, "resume": {}},
    }}}},
    "responses": _responses(),
}
