"""Threads as LangGraph's Agent Server API lists them (issue 34): a thread row
(relay/turns/threads.py) as a ``Thread``, the bodies of ``POST /threads/search``,
``POST /threads/count`` and ``PATCH /threads/{thread_id}`` read and checked, and the
search itself (filter, sort, page), as langgraph-api's own runtime does it:

- ``metadata``: JSONB containment (``{"a": {"b": 1}}`` matches ``{"a": {"b": 1, "c": 2}}``,
  a list matches a list holding each of its elements), as PostgreSQL's ``@>``;
- ``status``: the thread's, from its latest turn (relay/agent_server/state.py);
- ``ids``: those threads only; ``limit`` (1-1000, default 10) and ``offset``;
- ``sort_by`` ``thread_id``, ``status``, ``created_at``, ``updated_at`` (default
  ``created_at``), ``sort_order`` ``asc`` or ``desc`` (default ``desc``);
- ``select``: the fields of each thread to send (``values`` left out: no checkpoint read).

A run on a thread writes its graph's ``graph_id`` and ``assistant_id`` into the thread's
metadata (:func:`ran_on`), as langgraph-api does when it creates a run: agent-chat-ui
lists a graph's threads by searching for them.

Not served (a 422 that says so): ``values`` (a filter on the checkpointed state: one
checkpoint read per thread of the user), ``extract``. The filter runs over the threads the
user may see, read in one query; a user's threads are what one search reads.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from relay.agent_server.assistants import assistant_id_of
from relay.agent_server.requests import count_of
from relay.agent_server.state import thread_status
from relay.errors import ApiError
from relay.turns.records import TurnStore
from relay.turns.threads import ThreadRecord

#: what a search may sort by, and the statuses a thread has
SORT_BY = ("thread_id", "status", "created_at", "updated_at")
STATUSES = ("idle", "busy", "interrupted", "error")
#: the fields of a ``Thread`` (``select`` picks among them)
FIELDS = ("thread_id", "created_at", "updated_at", "metadata", "status", "values", "interrupts")
_SEARCH_KEYS = ("metadata", "values", "ids", "status", "limit", "offset", "sort_by")
_SEARCH_KEYS_MORE = ("sort_order", "select", "extract")


@dataclasses.dataclass(slots=True)
class ThreadQuery:
    """A checked search (or count: no paging, sorting or select)."""

    metadata: dict[str, Any]
    status: str | None
    ids: list[str] | None
    limit: int
    offset: int
    sort_by: str
    descending: bool
    select: tuple[str, ...]


def contains(value: Any, wanted: Any) -> bool:
    """JSONB containment (PostgreSQL's ``value @> wanted``)."""
    if isinstance(wanted, Mapping):
        return isinstance(value, Mapping) and all(
            k in value and contains(value[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        if not isinstance(value, list):
            return False
        return all(any(contains(item, w) for item in value) for w in wanted)
    if isinstance(value, bool) or isinstance(wanted, bool):
        return value is wanted
    return bool(value == wanted)


def _unknown(body: Mapping[str, Any], allowed: Sequence[str]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ApiError(422, "unknown_fields", f"Unknown fields: {', '.join(unknown)}.")


def _object(body: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(422, "invalid_request", f"'{key}' must be an object.")
    return value


def _status(body: Mapping[str, Any]) -> str | None:
    status = body.get("status")
    if status is not None and status not in STATUSES:
        raise ApiError(422, "invalid_request", f"'status' must be one of {', '.join(STATUSES)}.")
    return status


def _not_served(body: Mapping[str, Any], keys: Sequence[str]) -> None:
    for key in keys:
        if body.get(key) not in (None, {}, []):
            raise ApiError(
                422,
                "unsupported_field",
                f"'{key}' is not served here yet (it reads every thread's checkpoint).",
            )


def search_query(body: Mapping[str, Any]) -> ThreadQuery:
    """The body of ``POST /threads/search``, checked."""
    _unknown(body, (*_SEARCH_KEYS, *_SEARCH_KEYS_MORE))
    _not_served(body, ("values", "extract"))
    ids = body.get("ids")
    if ids is not None and (
        not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids)
    ):
        raise ApiError(422, "invalid_request", "'ids' must be a list of thread ids.")
    sort_by = body.get("sort_by") or "created_at"
    if sort_by not in SORT_BY:
        raise ApiError(422, "invalid_request", f"'sort_by' must be one of {', '.join(SORT_BY)}.")
    order = body.get("sort_order") or "desc"
    if not isinstance(order, str) or order.lower() not in ("asc", "desc"):
        raise ApiError(422, "invalid_request", "'sort_order' must be 'asc' or 'desc'.")
    select = body.get("select")
    if select is not None and (
        not isinstance(select, list) or not select or not all(f in FIELDS for f in select)
    ):
        raise ApiError(
            422, "invalid_request", f"'select' must be a list of fields: {', '.join(FIELDS)}."
        )
    return ThreadQuery(
        metadata=_object(body, "metadata"),
        status=_status(body),
        ids=ids,
        limit=count_of(body, "limit", 10, 1, 1000),
        offset=count_of(body, "offset", 0, 0, 1_000_000),
        sort_by=sort_by,
        descending=order.lower() == "desc",
        select=tuple(dict.fromkeys(select)) if select else FIELDS,
    )


def count_query(body: Mapping[str, Any]) -> ThreadQuery:
    """The body of ``POST /threads/count``, checked."""
    _unknown(body, ("metadata", "values", "status"))
    _not_served(body, ("values",))
    return ThreadQuery(
        metadata=_object(body, "metadata"),
        status=_status(body),
        ids=None,
        limit=0,
        offset=0,
        sort_by="created_at",
        descending=True,
        select=FIELDS,
    )


def patch_metadata(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body of ``PATCH /threads/{thread_id}``: the metadata to merge."""
    _unknown(body, ("metadata", "ttl"))
    if body.get("ttl") is not None:
        raise ApiError(422, "unsupported_field", "'ttl' is not served here yet.")
    return _object(body, "metadata")


def matching(records: Sequence[ThreadRecord], query: ThreadQuery) -> list[ThreadRecord]:
    """The records that pass the query's filters, sorted as it asks (ties by id)."""
    found = [
        r
        for r in records
        if contains(r.metadata, query.metadata)
        and (query.status is None or thread_status(r.last_status) == query.status)
    ]
    found.sort(key=lambda r: r.thread_id, reverse=query.descending)
    found.sort(key=lambda r: _sort_key(r, query.sort_by), reverse=query.descending)
    return found


def _sort_key(record: ThreadRecord, sort_by: str) -> Any:
    if sort_by == "status":
        return thread_status(record.last_status)
    if sort_by == "thread_id":
        return record.thread_id
    return record.created_at if sort_by == "created_at" else record.updated_at


def iso(epoch_ms: float) -> str:
    """Epoch ms as LangGraph's clients read a time (ISO 8601, UTC)."""
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC).isoformat()


def thread_json(
    record: ThreadRecord,
    values: Any,
    interrupts: Mapping[str, Any],
    select: Sequence[str] = FIELDS,
) -> dict[str, Any]:
    """The record as LangGraph's ``Thread`` (``select``: only those fields)."""
    full = {
        "thread_id": record.thread_id,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "metadata": record.metadata,
        "status": thread_status(record.last_status),
        "values": values,
        "interrupts": dict(interrupts),
    }
    return {k: full[k] for k in select}


async def ran_on(turns: TurnStore, thread_id: str, agent: Any) -> None:
    """A run of ``agent`` (a GraphAgent) started on the thread: its ``graph_id`` and
    ``assistant_id`` merged into the thread's metadata."""
    await turns.patch_thread(
        thread_id, {"graph_id": agent.name, "assistant_id": assistant_id_of(agent.name)}
    )
