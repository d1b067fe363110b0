"""The store routes of LangGraph's Agent Server API (``/store/items``,
``/store/items/search``, ``/store/namespaces``) over the relay's LangGraph store
(relay/langgraph/store.py), framework-free: the bodies read and checked, each user kept
to their own namespaces, items in LangGraph's shapes.

Who sees what: the Agent Server leaves a store's isolation to langgraph.json's auth
handlers; its documented handler (``@auth.on.store``) allows a user the namespaces whose
first label is their identity. span-relay applies that rule itself for RELAY_AUTH users
(a JWT's or the proxy's user): a user puts, reads, deletes and searches only under
``(user_id, ...)``; a search or a namespace listing without a prefix is one under
``(user_id,)``; anything else is a ``403 forbidden_namespace``. With langgraph.json's
``auth`` its ``store`` handlers decide instead, where one does (relay/http/agent_server_store.py;
:func:`and_filters` joins a handler's search filter to the request's). A graph that keeps a
user's memories under ``(user_id, ...)`` (``config["configurable"]["user_id"]``, which
the relay sets for a run of that user) shares them with that user's frontend. Without
users (RELAY_AUTH ``none`` or ``token``) the store is everyone's, as under ``langgraph
dev``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from relay.agent_server.requests import count_of
from relay.errors import ApiError

_MAX_LABELS = 32
#: an item's longest ``ttl``: 100 years, in minutes
MAX_TTL = 52_560_000
#: the integers a store's JSON encoder (orjson) writes: signed or unsigned 64-bit
INT_RANGE = (-(2**63), 2**64 - 1)
#: a filter's key: a path of names the stores can query
FILTER_KEY = "^[A-Za-z0-9_-]{1,64}([.][A-Za-z0-9_-]{1,64}){0,15}$"
#: a filter's comparison operators (LangGraph's stores)
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_FILTER_KEY = re.compile(FILTER_KEY)


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    """The namespaces a caller may use: under ``(user_id,)``, or any (``user_id`` None)."""

    user_id: str | None

    def check(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        """``namespace`` if the caller may use it, else a 403."""
        if self.user_id is not None and namespace[:1] != (self.user_id,):
            raise ApiError(
                403,
                "forbidden_namespace",
                "Your items are under a namespace whose first label is your user id.",
            )
        return namespace

    def prefix(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        """A search's or a listing's prefix: the caller's own when none is given."""
        if not namespace and self.user_id is not None:
            return (self.user_id,)
        return self.check(namespace) if namespace else namespace


def namespace_of(
    value: Any, key: str, *, empty: bool = False, writing: bool = True
) -> tuple[str, ...]:
    """A namespace: a list of labels, none empty, none with a '.' or a NUL; ``empty``: a
    prefix, which may have none; ``writing``: an item's, whose first label is never
    ``langgraph`` (LangGraph's own)."""
    if value is None and empty:
        return ()
    if (
        not isinstance(value, list)
        or len(value) > _MAX_LABELS
        or (not value and not empty)
        or not all(isinstance(v, str) and v and "." not in v and "\x00" not in v for v in value)
    ):
        raise ApiError(
            422,
            "invalid_namespace",
            f"'{key}' must be a list of up to {_MAX_LABELS} labels, each a non-empty "
            "string without '.'.",
        )
    if value and value[0] == "langgraph" and writing and not empty:
        raise ApiError(422, "invalid_namespace", "A namespace cannot begin with 'langgraph'.")
    return tuple(value)


def dotted_namespace(value: str) -> tuple[str, ...]:
    """``GET /store/items?namespace=a.b``: the SDK joins the labels with dots."""
    return namespace_of(value.split(".") if value else [], "namespace", writing=False)


def key_of(value: Any) -> str:
    """An item's key: a string without NUL."""
    if not isinstance(value, str) or not value or "\x00" in value or len(value) > 1024:
        raise ApiError(422, "invalid_key", "'key' must be a non-empty string (up to 1024).")
    return value


def _unknown(body: Mapping[str, Any], allowed: Sequence[str]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ApiError(422, "unknown_fields", f"Unknown fields: {', '.join(unknown)}.")


def _storable(value: Any, key: str, nul_free: bool) -> None:
    """A 422 for what a store cannot keep: an integer beyond 64 bits, and with
    ``nul_free`` (PostgreSQL's jsonb) a string holding NUL."""
    pending = [value]
    while pending:
        found = pending.pop()
        if isinstance(found, dict):
            pending.extend(found.values())
            pending.extend(found.keys())
        elif isinstance(found, list):
            pending.extend(found)
        elif isinstance(found, int) and not isinstance(found, bool):
            if not INT_RANGE[0] <= found <= INT_RANGE[1]:
                raise ApiError(422, "invalid_request", f"'{key}' holds an integer beyond 64 bits.")
        elif nul_free and isinstance(found, str) and "\x00" in found:
            raise ApiError(422, "invalid_request", f"'{key}' must not hold a NUL character.")


def _json_object(
    body: Mapping[str, Any], key: str, required: bool, nul_free: bool
) -> dict[str, Any] | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise ApiError(422, "invalid_request", f"'{key}' must be an object.")
    _storable(value, key, nul_free)
    return value


def _filter(body: Mapping[str, Any], nul_free: bool) -> dict[str, Any] | None:
    """A search's filter: keys the stores can query, each a value to equal or an object
    of :data:`OPERATORS`."""
    found = _json_object(body, "filter", False, nul_free)
    for key, value in (found or {}).items():
        if not _FILTER_KEY.match(key):
            raise ApiError(
                422, "invalid_filter", f"Filter key {key!r}: names of letters, digits, _ or -."
            )
        if isinstance(value, dict) and not set(value) <= set(OPERATORS):
            raise ApiError(
                422, "invalid_filter", f"Filter {key!r}: the operators are {', '.join(OPERATORS)}."
            )
    return found


@dataclasses.dataclass(slots=True)
class PutItem:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    index: Any
    ttl: float | None


def put_item(body: Mapping[str, Any], nul_free: bool) -> PutItem:
    """The body of ``PUT /store/items`` (``nul_free``: a store on PostgreSQL, whose
    ``jsonb`` holds no NUL character: a value with one is a 422)."""
    _unknown(body, ("namespace", "key", "value", "index", "ttl"))
    index = body.get("index")
    if (
        index is not None
        and index is not False
        and (not isinstance(index, list) or not all(isinstance(i, str) and i for i in index))
    ):
        raise ApiError(422, "invalid_request", "'index' must be false or a list of fields.")
    ttl = body.get("ttl")
    if ttl is not None and (
        isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL
    ):
        raise ApiError(
            422, "invalid_request", f"'ttl' must be minutes, more than 0, at most {MAX_TTL}."
        )
    value = _json_object(body, "value", True, nul_free) or {}
    return PutItem(
        namespace=namespace_of(body.get("namespace"), "namespace"),
        key=key_of(body.get("key")),
        value=value,
        index=index,
        ttl=float(ttl) if ttl is not None else None,
    )


def delete_item(body: Mapping[str, Any]) -> tuple[tuple[str, ...], str]:
    """The body of ``DELETE /store/items``: the namespace and key."""
    _unknown(body, ("namespace", "key"))
    return namespace_of(body.get("namespace"), "namespace"), key_of(body.get("key"))


@dataclasses.dataclass(slots=True)
class SearchItems:
    prefix: tuple[str, ...]
    filter: dict[str, Any] | None
    limit: int
    offset: int
    query: str | None
    refresh_ttl: bool | None


def search_items(body: Mapping[str, Any], nul_free: bool) -> SearchItems:
    """The body of ``POST /store/items/search`` (``nul_free`` as for :func:`put_item`)."""
    _unknown(body, ("namespace_prefix", "filter", "limit", "offset", "query", "refresh_ttl"))
    query = body.get("query")
    if query is not None and (not isinstance(query, str) or "\x00" in query):
        raise ApiError(422, "invalid_request", "'query' must be a string.")
    refresh = body.get("refresh_ttl")
    if refresh is not None and not isinstance(refresh, bool):
        raise ApiError(422, "invalid_request", "'refresh_ttl' must be true or false.")
    return SearchItems(
        prefix=namespace_of(body.get("namespace_prefix"), "namespace_prefix", empty=True),
        filter=_filter(body, nul_free),
        limit=count_of(body, "limit", 10, 1, 1000),
        offset=count_of(body, "offset", 0, 0, 1_000_000),
        query=query or None,
        refresh_ttl=refresh,
    )


@dataclasses.dataclass(slots=True)
class ListNamespaces:
    prefix: tuple[str, ...]
    suffix: tuple[str, ...]
    max_depth: int | None
    limit: int
    offset: int


def list_namespaces(body: Mapping[str, Any]) -> ListNamespaces:
    """The body of ``POST /store/namespaces``."""
    _unknown(body, ("prefix", "suffix", "max_depth", "limit", "offset"))
    depth = body.get("max_depth")
    return ListNamespaces(
        prefix=namespace_of(body.get("prefix"), "prefix", empty=True),
        suffix=namespace_of(body.get("suffix"), "suffix", empty=True),
        max_depth=None if depth is None else count_of(body, "max_depth", 1, 1, _MAX_LABELS),
        limit=count_of(body, "limit", 100, 1, 1000),
        offset=count_of(body, "offset", 0, 0, 1_000_000),
    )


def item_json(item: Any) -> dict[str, Any]:
    """A store ``Item`` (or ``SearchItem``) as LangGraph's server sends it."""
    found: dict[str, Any] = item.dict()
    return found


def checked_filter(found: Any, nul_free: bool) -> dict[str, Any] | None:
    """A filter from elsewhere (an auth handler's) checked as a search's own is."""
    return _filter({"filter": found}, nul_free)


def and_filters(
    asked: Mapping[str, Any] | None, required: Mapping[str, Any]
) -> dict[str, Any] | None:
    """A search's own filter (``asked``) AND an auth handler's (``required``) as one
    store filter; None when no item can pass both (two different ``$eq`` on one key). Two
    different operands of another operator on one key: a ValueError (the caller refuses)."""
    merged: dict[str, Any] = dict(asked or {})
    for key, wanted in required.items():
        if key not in merged:
            merged[key] = wanted
            continue
        have = merged[key]
        operators = dict(have) if isinstance(have, dict) else {"$eq": have}
        more = wanted if isinstance(wanted, dict) else {"$eq": wanted}
        for operator, operand in more.items():
            if operator in operators and operators[operator] != operand:
                if operator == "$eq":
                    return None
                raise ValueError(f"two different {operator} on {key!r}")
            operators[operator] = operand
        merged[key] = operators
    return merged
