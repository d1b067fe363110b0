"""The served graphs as LangGraph assistants: one assistant per graph, as ``langgraph dev``
and the Agent Server register them (``Assistants.put(uuid5(NAMESPACE_GRAPH, graph_id),
graph_id=graph_id, name=graph_id, metadata={"created_by": "system"})``).

An assistant is found by its id (any UUID spelling) or by its graph's name, as LangGraph's
routes allow (``get_assistant_id``). Assistants are not stored: they are the graphs this
process serves, so ``version`` is 1 and there are no other versions.
"""

from __future__ import annotations

import datetime
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from relay.agent_server.jsonable import jsonable
from relay.agent_server.requests import count_of
from relay.errors import ApiError

#: LangGraph's namespace of default assistant ids (langgraph_api.graph.NAMESPACE_GRAPH)
NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
#: the metadata of an assistant LangGraph registers for a graph
SYSTEM_METADATA = {"created_by": "system"}
#: what ``POST /assistants/search`` may sort by, as LangGraph's API does
SORT_KEYS = ("assistant_id", "graph_id", "name", "created_at", "updated_at")
SEARCH_FIELDS = frozenset(
    ("graph_id", "name", "metadata", "limit", "offset", "sort_by", "sort_order", "select")
)


class Served(Protocol):
    """What an assistant is made of (:class:`relay.langgraph.agent.GraphAgent`)."""

    @property
    def name(self) -> str: ...

    @property
    def graph_id(self) -> str: ...

    @property
    def description(self) -> str | None: ...

    @property
    def graph(self) -> Any: ...


def assistant_id_of(graph_id: str) -> str:
    """The default assistant id of a graph, as LangGraph makes it."""
    return str(uuid.uuid5(NAMESPACE_GRAPH, graph_id))


def assistant_of(agent: Served, created_at: datetime.datetime) -> dict[str, Any]:
    """The ``Assistant`` of a served graph (langgraph_sdk.schema.Assistant)."""
    stamp = created_at.isoformat()
    return {
        "assistant_id": assistant_id_of(agent.graph_id),
        "graph_id": agent.graph_id,
        "config": {},
        "context": {},
        "created_at": stamp,
        "updated_at": stamp,
        "metadata": dict(SYSTEM_METADATA),
        "version": 1,
        "name": agent.graph_id,
        "description": agent.description,
    }


def find(agents: Iterable[Served], assistant_id: str) -> Served | None:
    """The graph an assistant id (any UUID spelling) or a graph's name names."""
    listed = list(agents)
    for agent in listed:
        if agent.graph_id == assistant_id:
            return agent
    try:
        wanted = str(uuid.UUID(assistant_id))
    except ValueError:
        return None
    for agent in listed:
        if assistant_id_of(agent.graph_id) == wanted:
            return agent
    return None


def _text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise ApiError(422, "invalid_request", f"'{key}' must be a string.")
    return value


def search_filter(body: Mapping[str, Any]) -> tuple[Callable[[dict[str, Any]], bool], slice]:
    """``POST /assistants/search``'s body as a test of an assistant and the page to
    answer: ``graph_id`` exactly, ``name`` as a case-insensitive part of the name,
    every ``metadata`` key equal; ``limit`` (default 10, at most 1000) from ``offset``.
    Unknown fields or ill-typed ones are a 422."""
    unknown = sorted(set(body) - SEARCH_FIELDS)
    if unknown:
        raise ApiError(422, "unknown_fields", f"Unknown fields: {', '.join(unknown)}.")
    graph_id = _text(body, "graph_id")
    name = _text(body, "name")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ApiError(422, "invalid_request", "'metadata' must be an object.")
    sort_by = _text(body, "sort_by")
    if sort_by is not None and sort_by not in SORT_KEYS:
        raise ApiError(422, "invalid_request", f"'sort_by' must be one of {', '.join(SORT_KEYS)}.")
    if _text(body, "sort_order") not in (None, "asc", "desc"):
        raise ApiError(422, "invalid_request", "'sort_order' must be 'asc' or 'desc'.")
    select = body.get("select")
    if select is not None and (
        not isinstance(select, list) or not all(isinstance(s, str) for s in select)
    ):
        raise ApiError(422, "invalid_request", "'select' must be a list of field names.")
    limit = count_of(body, "limit", 10, 0, 1000)
    offset = count_of(body, "offset", 0, 0, 1_000_000)

    def matches(assistant: dict[str, Any]) -> bool:
        if graph_id is not None and assistant["graph_id"] != graph_id:
            return False
        if name is not None and name.lower() not in assistant["name"].lower():
            return False
        held = assistant["metadata"]
        return all(key in held and held[key] == value for key, value in metadata.items())

    return matches, slice(offset, offset + limit)


def graph_json(graph: Any, xray: int | bool) -> dict[str, Any]:
    """The graph's drawable form, ``graph.get_graph(xray=...).to_json()``, as LangGraph's
    ``GET /assistants/{id}/graph`` answers it."""
    drawn = graph.get_graph(xray=xray).to_json()
    result = jsonable(drawn)
    assert isinstance(result, dict)
    return result


def _schema(read: Callable[[], Any]) -> dict[str, Any] | None:
    """A JSON schema the graph gives, or None where it has none (or cannot say)."""
    try:
        with warnings.catch_warnings():  # LangGraph 1.x: config schemas are deprecated
            warnings.simplefilter("ignore")
            found = read()
    except Exception:  # a graph whose types pydantic cannot describe: no schema
        return None
    return jsonable(found) if isinstance(found, dict) else None


def schemas_of(agent: Served) -> dict[str, Any]:
    """``GET /assistants/{id}/schemas``: the graph's input, output, state, config and
    context JSON schemas (langgraph_sdk.schema.GraphSchema); the state's is the graph's
    output schema (every channel a client reads back)."""
    graph = agent.graph
    context = getattr(graph, "get_context_jsonschema", None)
    return {
        "graph_id": agent.graph_id,
        "input_schema": _schema(graph.get_input_jsonschema),
        "output_schema": _schema(graph.get_output_jsonschema),
        "state_schema": _schema(graph.get_output_jsonschema),
        "config_schema": _schema(graph.get_config_jsonschema),
        "context_schema": _schema(context) if callable(context) else None,
    }
