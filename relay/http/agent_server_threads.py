"""The thread routes of LangGraph's Agent Server API beyond create and get (issue 34):
``POST /threads/search``, ``POST /threads/count``, ``PATCH /threads/{thread_id}`` and
``DELETE /threads/{thread_id}``, over the thread rows of the turn store
(relay/turns/threads.py); a user sees and changes only their own threads (and those of
no user).

``DELETE`` deletes the thread's checkpoints (``adelete_thread`` of every served graph's
checkpointer) and marks its row deleted (its metadata cleared; listed and read no more,
a ``404``); its turn records and stored spans stay, the trace of what happened
(``GET /turns/{run_id}``, replay); its id stays its owner's. A thread with a running turn
is a ``409 thread_busy``, and so is one that a run holds meanwhile (in this process, the
thread gate; across replicas, the thread lock), as the checkpointer's TTL sweeper does.
``POST /threads/{thread_id}/copy`` is not served (a copy of every checkpoint under a new
thread id).

With langgraph.json's ``auth`` (relay/http/agent_server_auth.py): search and count call
``threads.search`` (its filter hides the threads it does not match), ``PATCH``
``threads.update`` and ``DELETE`` ``threads.delete`` (a thread their filter does not match
is a ``404``), as the Agent Server does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse, Response

from relay.agent_server.threads import (
    ThreadQuery,
    count_query,
    matching,
    patch_metadata,
    search_query,
    thread_json,
)
from relay.auth import User
from relay.errors import ApiError
from relay.http.agent_server import AgentServer
from relay.http.agent_server_bodies import BODIES
from relay.http.errors import error_responses
from relay.http.identity import user_of
from relay.http.requests import read_json_object
from relay.turns.records import RUNNING
from relay.turns.threads import ThreadRecord


def _busy(thread_id: str) -> ApiError:
    return ApiError(409, "thread_busy", f"Thread {thread_id} has a run going; try again after.")


class ThreadRoutes:
    """What the routes do, over one :class:`AgentServer`'s graphs and relay."""

    def __init__(self, server: AgentServer) -> None:
        self.server = server
        self.relay = server.relay

    async def search(self, request: Request, body: dict[str, Any]) -> list[dict[str, Any]]:
        query = search_query(body)
        allowed = await self._listing(request, query.metadata, query.status, query)
        records = await self.relay.turns.threads(_user_id(user_of(request)), query.ids)
        found_records = [r for r in matching(records, query) if allowed(r)]
        page = found_records[query.offset : query.offset + query.limit]
        found = []
        for record in page:
            values: Any = None
            interrupts: dict[str, Any] = {}
            if "values" in query.select or "interrupts" in query.select:
                values, interrupts = await self.server.thread_values(record)
            found.append(thread_json(record, values, interrupts, query.select))
        return found

    async def count(self, request: Request, body: dict[str, Any]) -> int:
        query = count_query(body)
        allowed = await self._listing(request, query.metadata, query.status, None)
        records = await self.relay.turns.threads(_user_id(user_of(request)))
        return len([r for r in matching(records, query) if allowed(r)])

    async def _listing(
        self,
        request: Request,
        metadata: dict[str, Any],
        status: str | None,
        query: ThreadQuery | None,
    ) -> Callable[[ThreadRecord], bool]:
        """``threads.search``'s handler (a count is a search of no page): the threads its
        filter lets through."""
        value = {
            "metadata": metadata,
            "values": {},
            "status": status,
            "limit": query.limit if query is not None else 0,
            "offset": query.offset if query is not None else 0,
        }
        filters = await self.server.authorize(request, "threads", "search", value)
        return self.server.auth.listing(filters)

    async def patch(self, request: Request, thread_id: str, body: dict[str, Any]) -> Any:
        metadata = patch_metadata(body)
        user = user_of(request)
        value = {"thread_id": thread_id, "metadata": metadata}
        await self.server.authorized_thread(request, thread_id, "update", value)
        await self.relay.turns.patch_thread(thread_id, metadata)
        return await self.server.thread(thread_id, user)

    async def delete(self, request: Request, thread_id: str) -> None:
        record = await self.server.authorized_thread(request, thread_id, "delete")
        await self.remove(record)

    async def remove(self, record: ThreadRecord) -> None:
        """Delete the thread's checkpoints and the thread (a 409 while a run runs on it)."""
        thread_id = record.thread_id
        if record.last_status == RUNNING:
            raise _busy(thread_id)
        async with self.relay.threads.deleting(record.thread_id) as free:
            if not free:
                raise _busy(thread_id)
            held = await self.relay.turns.lock_thread(record.thread_id)
            if held is None:  # another instance runs it
                raise _busy(thread_id)
            try:
                again = await self.relay.turns.get_thread(thread_id)
                if again is not None and again.last_status == RUNNING:
                    raise _busy(thread_id)
                for saver in self._checkpointers():
                    await saver.adelete_thread(record.thread_id)
                await self.relay.turns.delete_thread(thread_id)
            finally:
                await held.release()

    def _checkpointers(self) -> list[Any]:
        """The served graphs' checkpointers, each once."""
        found: dict[int, Any] = {}
        for served in self.server.graphs.values():
            saver = getattr(served.agent.graph, "checkpointer", None)
            if saver is not None and not isinstance(saver, bool):
                found.setdefault(id(saver), saver)
        return list(found.values())


def _user_id(user: User | None) -> str | None:
    return user.id if user is not None else None


def thread_routes_router(server: AgentServer) -> APIRouter:
    """The routes (see the module docstring) over ``server``'s graphs."""
    router = APIRouter(tags=["langgraph"])
    routes = ThreadRoutes(server)
    relay = server.relay
    reads = [Depends(relay.identify)]
    limit = relay.settings.max_body_bytes

    @router.post(
        "/threads/search",
        dependencies=reads,
        responses=error_responses(401, 403, 422),
        openapi_extra=BODIES["search_threads"],
    )
    async def search_threads(request: Request) -> Response:
        """LangGraph's thread search: the caller's threads, filtered, sorted, paged."""
        body = await read_json_object(request, limit)
        return JSONResponse(await routes.search(request, body))

    @router.post(
        "/threads/count",
        dependencies=reads,
        responses=error_responses(401, 403, 422),
        openapi_extra=BODIES["count_threads"],
    )
    async def count_threads(request: Request) -> Response:
        """How many of the caller's threads match (LangGraph's ``threads.count``)."""
        body = await read_json_object(request, limit)
        return JSONResponse(await routes.count(request, body))

    @router.patch(
        "/threads/{thread_id}",
        dependencies=reads,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=BODIES["patch_thread"],
    )
    async def patch_thread(request: Request, thread_id: str) -> Response:
        """Merge metadata into the thread's; the thread after."""
        body = await read_json_object(request, limit)
        thread = await routes.patch(request, thread_id, body)
        if "return=minimal" in request.headers.get("prefer", ""):
            return Response(status_code=204)
        return JSONResponse(thread)

    @router.delete(
        "/threads/{thread_id}",
        dependencies=reads,
        status_code=204,
        responses=error_responses(401, 403, 404, 409),
    )
    async def delete_thread(request: Request, thread_id: str) -> Response:
        """Delete the thread's checkpoints and the thread (its turns and spans stay)."""
        await routes.delete(request, thread_id)
        return Response(status_code=204)

    return router
