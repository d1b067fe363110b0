"""The store routes of LangGraph's Agent Server API (issue 34) over the relay's LangGraph
store (relay/langgraph/store.py; a served graph's own, when every graph was compiled with
one): ``PUT /store/items`` (204), ``GET /store/items?namespace=a.b&key=k`` (the item, or
404), ``DELETE /store/items`` (204), ``POST /store/items/search`` (``{"items": [...]}``,
each with its ``score``), ``POST /store/namespaces`` (``{"namespaces": [[...]]}``).
Which namespaces a user may use: relay/agent_server/store_items.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from relay.agent_server.store_items import (
    Scope,
    delete_item,
    dotted_namespace,
    item_json,
    key_of,
    list_namespaces,
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
        server.check_auth()
        store = _store(server)
        item = put_item(await read_json_object(request, limit), _nul_free(store))
        namespace = _scope(request).check(item.namespace)
        extra: dict[str, Any] = {} if item.ttl is None else {"ttl": item.ttl}
        try:
            with _refused_as_422():
                await store.aput(namespace, item.key, item.value, index=item.index, **extra)
        except NotImplementedError:
            raise ApiError(
                422, "unsupported_field", "'ttl' needs langgraph.json's store.ttl."
            ) from None
        return Response(status_code=204)

    @router.get("/store/items", dependencies=reads, responses=error_responses(401, 403, 404, 422))
    async def get(
        request: Request,
        key: str = Query(..., pattern="^[^\\x00]{1,1024}$"),
        namespace: str = Query(..., pattern=_DOTTED),
        refresh_ttl: bool | None = None,
    ) -> dict[str, Any]:
        """An item by namespace (its labels joined by dots) and key."""
        server.check_auth()
        store = _store(server)
        found_namespace = _scope(request).check(dotted_namespace(namespace))
        found = await store.aget(found_namespace, key_of(key), refresh_ttl=refresh_ttl)
        if found is None:
            raise ApiError(404, "unknown_item", f"No item {key!r} in {namespace!r}.")
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
        server.check_auth()
        store = _store(server)
        namespace, key = delete_item(await read_json_object(request, limit))
        await store.adelete(_scope(request).check(namespace), key)
        return Response(status_code=204)

    @router.post(
        "/store/items/search",
        dependencies=reads,
        responses=error_responses(401, 403, 422),
        openapi_extra=BODIES["search_items"],
    )
    async def search(request: Request) -> dict[str, Any]:
        """Items under a namespace prefix, by ``filter`` and (semantic) ``query``."""
        server.check_auth()
        store = _store(server)
        asked = search_items(await read_json_object(request, limit), _nul_free(store))
        with _refused_as_422():
            found = await store.asearch(
                _scope(request).prefix(asked.prefix),
                query=asked.query,
                filter=asked.filter,
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
        server.check_auth()
        store = _store(server)
        asked = list_namespaces(await read_json_object(request, limit))
        found = await store.alist_namespaces(
            prefix=_scope(request).prefix(asked.prefix) or None,
            suffix=asked.suffix or None,
            max_depth=asked.max_depth,
            limit=asked.limit,
            offset=asked.offset,
        )
        return {"namespaces": [list(n) for n in found]}

    return router
