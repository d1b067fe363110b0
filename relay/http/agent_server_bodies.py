"""OpenAPI descriptions of the bodies of the Agent Server's thread and store routes
(relay/http/agent_server_threads.py, relay/http/agent_server_store.py), as precise as
their checks (relay/agent_server/threads.py, relay/agent_server/store_items.py): a body
that fits its schema is never refused for its shape."""

from __future__ import annotations

from typing import Any

from relay.agent_server.store_items import FILTER_KEY, INT_RANGE, MAX_TTL, OPERATORS
from relay.agent_server.threads import FIELDS, SORT_BY, STATUSES

_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$"}
_OBJECT = {"type": "object"}
#: a namespace label: not empty, no '.' (the SDK joins a namespace with dots in a query)
_LABEL = {"type": "string", "pattern": "^[^.\\x00]{1,256}$"}
_NAMESPACE = {"type": "array", "items": _LABEL, "maxItems": 32}
#: an item's namespace: at least one label, none ``langgraph`` (LangGraph's own root)
_ITEM_NAMESPACE = {
    "type": "array",
    "items": {"type": "string", "pattern": "^(?!langgraph$)[^.\\x00]{1,256}$"},
    "minItems": 1,
    "maxItems": 32,
}
_KEY = {"type": "string", "pattern": "^[^\\x00]{1,1024}$"}
#: JSON a store keeps (integers within 64 bits, strings without NUL, which PostgreSQL's
#: jsonb refuses), to ``depth`` levels of nesting
_TEXT = {"type": "string", "pattern": "^[^\\x00]*$"}
_SCALARS: list[dict[str, Any]] = [
    _TEXT,
    {"type": "integer", "minimum": INT_RANGE[0], "maximum": INT_RANGE[1]},
    {"type": "number", "minimum": -1e300, "maximum": 1e300},
    {"type": "boolean"},
    {"type": "null"},
]


def _json(depth: int) -> dict[str, Any]:
    """A JSON value to ``depth`` levels of arrays and objects."""
    if depth == 0:
        return {"anyOf": _SCALARS}
    inner = _json(depth - 1)
    return {
        "anyOf": [
            *_SCALARS,
            {"type": "array", "items": inner},
            {"type": "object", "propertyNames": _TEXT, "additionalProperties": inner},
        ]
    }


#: an item's value: an object of JSON (documented to 4 levels; deeper is taken too)
_VALUE = {"type": "object", "propertyNames": _TEXT, "additionalProperties": _json(3)}
#: a search's filter: keys the stores can query, each a value to equal or an object of
#: LangGraph's comparison operators
_FILTER = {
    "type": "object",
    "propertyNames": {"pattern": FILTER_KEY},
    "additionalProperties": {
        "anyOf": [
            *_SCALARS,
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {op: {"anyOf": _SCALARS} for op in OPERATORS},
            },
        ]
    },
}
_STATUS = {"type": "string", "enum": list(STATUSES)}


def _body(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "additionalProperties": False, "properties": properties}
    schema.update(extra)
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema}},
        }
    }


BODIES: dict[str, dict[str, Any]] = {
    "search_threads": _body(
        {
            "metadata": _OBJECT,
            "ids": {"type": "array", "items": _ID, "maxItems": 1000},
            "status": _STATUS,
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
            "offset": {"type": "integer", "minimum": 0, "maximum": 1000000},
            "sort_by": {"type": "string", "enum": list(SORT_BY)},
            "sort_order": {"type": "string", "enum": ["asc", "desc"]},
            "select": {
                "type": "array",
                "items": {"type": "string", "enum": list(FIELDS)},
                "minItems": 1,
            },
        }
    ),
    "count_threads": _body({"metadata": _OBJECT, "status": _STATUS}),
    "patch_thread": _body({"metadata": _OBJECT}, required=["metadata"]),
    "put_item": _body(
        {
            "namespace": _ITEM_NAMESPACE,
            "key": _KEY,
            "value": _VALUE,
            "ttl": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": MAX_TTL,
                "description": "minutes (with langgraph.json's store.ttl)",
            },
            "index": {
                "anyOf": [
                    {"type": "boolean", "enum": [False]},
                    {"type": "array", "items": {"type": "string", "minLength": 1}},
                ]
            },
        },
        required=["namespace", "key", "value"],
    ),
    "delete_item": _body(
        {"namespace": _ITEM_NAMESPACE, "key": _KEY}, required=["namespace", "key"]
    ),
    "search_items": _body(
        {
            "namespace_prefix": _NAMESPACE,
            "filter": _FILTER,
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
            "offset": {"type": "integer", "minimum": 0, "maximum": 1000000},
            "query": {"type": "string", "pattern": "^[^\\x00]{0,10000}$"},
            "refresh_ttl": {"type": "boolean"},
        }
    ),
    "list_namespaces": _body(
        {
            "prefix": _NAMESPACE,
            "suffix": _NAMESPACE,
            "max_depth": {"type": "integer", "minimum": 1, "maximum": 32},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
            "offset": {"type": "integer", "minimum": 0, "maximum": 1000000},
        }
    ),
}
