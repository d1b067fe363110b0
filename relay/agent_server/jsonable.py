"""Values as LangGraph's server writes them to its clients.

LangGraph's Agent Server serialises a graph's state with a ``default`` that dumps a
pydantic model with ``model_dump()`` (a LangChain message becomes ``{"content",
"additional_kwargs", "response_metadata", "type", "name", "id", ...}``), a dataclass as
its fields, and an ``Interrupt`` as ``{"value", "id"}``; :func:`jsonable` makes the same
plain JSON values, so that a client parses our answers as it parses LangGraph's.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from collections.abc import Mapping
from typing import Any

from langgraph.types import Interrupt, Send

#: how deep a value is followed; deeper parts are written as their text
MAX_DEPTH = 64


def interrupt_json(item: Interrupt) -> dict[str, Any]:
    """An interrupt as LangGraph's clients read it: ``{"value", "id"}``."""
    return {"value": jsonable(item.value), "id": str(item.id)}


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON values (dicts, lists, strings, numbers, booleans, None)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth >= MAX_DEPTH:
        return str(value)
    deeper = depth + 1
    if isinstance(value, Interrupt):
        return interrupt_json(value)
    if isinstance(value, Send):
        return {"node": value.node, "arg": jsonable(value.arg, deeper)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, deeper) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, deeper) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump(), deeper)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return jsonable(fields, deeper)
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value, deeper)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
