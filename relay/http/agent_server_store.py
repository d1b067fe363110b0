"""The store routes of LangGraph's Agent Server API (issue 34) over the relay's LangGraph
store (relay/langgraph/store.py; a served graph's own, when every graph was compiled with
one): ``PUT /store/items`` (204), ``GET /store/items?namespace=a.b&key=k`` (the item, or
``null`` when there is none, as LangGraph answers: the SDKs' ``get_item`` gives None),
``DELETE /store/items`` (204), ``POST /store/items/search`` (``{"items": [...]}``, each
with its ``score``), ``POST /store/namespaces`` (``{"namespaces": [[...]]}``).
Which namespaces a user may use: relay/agent_server/store_items.py.

With langgraph.json's ``auth``, each route calls the Agent Server's ``store`` handler
(``@auth.on.store``, or ``@auth.on.store.put``, ``get``, ``search``, ``delete``,
``list_namespaces``, or a global one) with the Agent Server's value: it may refuse
(``403``, or its own status), rewrite ``value["namespace"]`` (the route uses the namespace
it leaves, checked again), and for a search return a filter, ANDed with the request's own.
Where a handler decides, the namespaces are the handlers' to guard, as on the Agent
Server; where none does (no store, action or global handler), the relay keeps each user
under ``(identity, ...)`` as for its own users, never open.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from relay.agent_server.store_items import (
    Scope,
    and_filters,
    checked_filter,
    delete_item,
    dotted_namespace,
    item_json,
    key_of,
    list_namespaces,
    namespace_of,
    put_item,
    search_items,
)
from relay.errors import ApiError
from relay.http.agent_server import AgentServer
from relay.http.agent_server_bodies import BODIES
from relay.http.errors import error_responses
from relay.http.identity import user_of
from relay.http.requests import read_json_object

#: ``GET /store/items``'s namespace: labels joined by dots (none empty)
_DOTTED = "^[^.\\x00]{1,256}([.][^.\\x00]{1,256}){0,31}$"


def _store(server: AgentServer) -> Any:
    """The store the routes use: the relay's, else the first served graph's own."""
    if server.relay.graph_store is not None:
        return server.relay.graph_store
    for served in server.graphs.values():
        own = getattr(served.agent.graph, "store", None)
        if own is not None:
            return own
    raise ApiError(503, "no_store", "No LangGraph store is open (the app is not started).")


def _nul_free(store: Any) -> bool:
    """Whether the store's values may not hold NUL (PostgreSQL's jsonb)."""
    return type(store).__module__.startswith("langgraph.store.postgres")


@contextlib.contextmanager
def _refused_as_422() -> Iterator[None]:
    """What the store itself refuses (a filter key it cannot query, an operator it does
    not know: a ``ValueError``) as a 422 that says why."""
    try:
        yield
    except ValueError as exc:
        raise ApiError(422, "invalid_request", " ".join(str(exc).split())[:300]) from None


def _scope(request: Request) -> Scope:
    user = user_of(request)
    return Scope(user.id if user is not None and user.id else None)


class _StoreAuth:
    """The store's handlers of langgraph.json's ``auth`` for one request (see the module
    docstring): whether one decides an action, and its answer."""

    def __init__(self, server: AgentServer, request: Request) -> None:
        self.server = server
        self.request = request

    def decides(self, action: str) -> bool:
        return self.server.auth.has_store_handler(action)

    def scope(self, action: str) -> Scope:
        """The relay's own namespace rule, unless a handler decides ``action``."""
        return Scope(None) if self.decides(action) else _scope(self.request)

    async def ask(self, action: str, value: dict[str, Any]) -> dict[str, Any] | None:
        """The handler's answer on ``value`` (which it may change): its filter or None."""
        if not self.decides(action):
            return None
        return await self.server.authorize(self.request, "store", action, value)


def _labels(namespace: Any) -> Any:
    """A namespace a handler left (a tuple, a list, None) as the body's list."""
    return list(namespace) if isinstance(namespace, tuple | list) else namespace


def _handler_filter(server: AgentServer, found: Any, nul_free: bool) -> dict[str, Any] | None:
    """A store handler's search filter, checked as a request's (else a ``500``)."""
    try:
        return checked_filter(found, nul_free)
    except ApiError as exc:
        raise ApiError(
            500,
            "auth_filter_unsupported",
            f"The store handler returned a filter the store cannot apply: {exc.message}",
        ) from None


def store_router(server: AgentServer) -> APIRouter:
    """The routes (see the module docstring)."""
    router = APIRouter(tags=["langgraph"])
    reads = [Depends(server.relay.identify)]
    limit = server.relay.settings.max_body_bytes

    @router.put(
        "/store/items",
        dependencies=reads,
        status_code=204,
        responses=error_responses(401, 403, 422),
        openapi_extra=BODIES["put_item"],
    )
    async def put(request: Request) -> Response:
        """Store an item (LangGraph's ``store.put_item``)."""
        store = _store(server)
        item = put_item(await read_json_object(request, limit), _nul_free(store))
        auth = _StoreAuth(server, request)
        if auth.decides("put"):
            value = dataclasses.asdict(item)
            await auth.ask("put", value)
            value["namespace"] = _labels(value.get("namespace"))
            item = put_item(value, _nul_free(store))
        namespace = auth.scope("put").check(item.namespace)
        extra: dict[str, Any] = {} if item.ttl is None else {"ttl": item.ttl}
        try:
            with _refused_as_422():
                await store.aput(namespace, item.key, item.value, index=item.index, **extra)
        except NotImplementedError:
            raise ApiError(
                422, "unsupported_field", "'ttl' needs langgraph.json's store.ttl."
            ) from None
        return Response(status_code=204)

    @router.get("/store/items", dependencies=reads, responses=error_responses(401, 403, 422))
    async def get(
        request: Request,
        key: str = Query(..., pattern="^[^\\x00]{1,1024}$"),
        namespace: str = Query(..., pattern=_DOTTED),
        refresh_ttl: bool | None = None,
    ) -> dict[str, Any] | None:
        """An item by namespace (its labels joined by dots) and key; ``null`` when there
        is none (LangGraph's answer, which its SDKs read as None)."""
        store = _store(server)
        auth = _StoreAuth(server, request)
        asked = {"namespace": dotted_namespace(namespace), "key": key, "refresh_ttl": refresh_ttl}
        await auth.ask("get", asked)
        found_namespace = auth.scope("get").check(
            namespace_of(_labels(asked.get("namespace")), "namespace", writing=False)
        )
        found = await store.aget(
            found_namespace, key_of(asked.get("key")), refresh_ttl=asked.get("refresh_ttl")
        )
        if found is None:
            return None
        return item_json(found)

    @router.delete(
        "/store/items",
        dependencies=reads,
        status_code=204,
        responses=error_responses(401, 403, 422),
        openapi_extra=BODIES["delete_item"],
    )
    async def delete(request: Request) -> Response:
        """Delete an item (nothing to delete is no error, as in LangGraph)."""
        store = _store(server)
        namespace, key = delete_item(await read_json_object(request, limit))
        auth = _StoreAuth(server, request)
        if auth.decides("delete"):
            value: dict[str, Any] = {"namespace": namespace, "key": key}
            await auth.ask("delete", value)
            namespace, key = delete_item(
                {"namespace": _labels(value.get("namespace")), "key": value.get("key")}
            )
        await store.adelete(auth.scope("delete").check(namespace), key)
        return Response(status_code=204)

    @router.post(
        "/store/items/search",
        dependencies=reads,
        responses=error_responses(401, 403, 422),
        openapi_extra=BODIES["search_items"],
    )
    async def search(request: Request) -> dict[str, Any]:
        """Items under a namespace prefix, by ``filter`` and (semantic) ``query``."""
        store = _store(server)
        nul_free = _nul_free(store)
        asked = search_items(await read_json_object(request, limit), nul_free)
        auth = _StoreAuth(server, request)
        item_filter = asked.filter
        if auth.decides("search"):
            value = {
                "namespace": asked.prefix,
                "filter": asked.filter,
                "limit": asked.limit,
                "offset": asked.offset,
                "query": asked.query,
                "refresh_ttl": asked.refresh_ttl,
            }
            required = _handler_filter(server, await auth.ask("search", value), nul_free)
            prefix = _labels(value.pop("namespace", None))
            asked = search_items({**value, "namespace_prefix": prefix}, nul_free)
            item_filter = asked.filter
            if required:
                try:
                    item_filter = and_filters(asked.filter, required)
                except ValueError as exc:
                    raise ApiError(
                        500,
                        "auth_filter_unsupported",
                        f"The store handler's filter and the search's: {exc}; refused.",
                    ) from None
                if item_filter is None:  # no item passes both
                    return {"items": []}
        with _refused_as_422():
            found = await store.asearch(
                auth.scope("search").prefix(asked.prefix),
                query=asked.query,
                filter=item_filter,
                limit=asked.limit,
                offset=asked.offset,
                refresh_ttl=asked.refresh_ttl,
            )
        return {"items": [item_json(item) for item in found]}

    @router.post(
        "/store/namespaces",
        dependencies=reads,
        responses=error_responses(401, 403, 422),
        openapi_extra=BODIES["list_namespaces"],
    )
    async def namespaces(request: Request) -> dict[str, Any]:
        """The namespaces under ``prefix`` (and ending in ``suffix``)."""
        store = _store(server)
        asked = list_namespaces(await read_json_object(request, limit))
        auth = _StoreAuth(server, request)
        if auth.decides("list_namespaces"):
            value = {
                "namespace": asked.prefix or None,
                "suffix": asked.suffix or None,
                "max_depth": asked.max_depth,
                "limit": asked.limit,
                "offset": asked.offset,
            }
            await auth.ask("list_namespaces", value)
            prefix = _labels(value.pop("namespace", None))
            asked = list_namespaces({**value, "prefix": prefix})
        found = await store.alist_namespaces(
            prefix=auth.scope("list_namespaces").prefix(asked.prefix) or None,
            suffix=asked.suffix or None,
            max_depth=asked.max_depth,
            limit=asked.limit,
            offset=asked.offset,
        )
        return {"namespaces": [list(n) for n in found]}

    return router
