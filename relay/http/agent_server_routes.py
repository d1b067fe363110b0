"""The routes of relay/http/agent_server.py's :class:`AgentServer` (its module docstring
says what each serves): ``GET /info``, the assistants, ``POST /threads``, a thread, its
state and history, ``POST /threads/{thread_id}/runs/stream`` and ``/runs/wait``. The
service (lookups, authorization, admission, streams, results) stays there; these are the
plain functions that read a request and call it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import JSONResponse, Response

from relay.agent_server.assistants import assistant_of, graph_json, schemas_of, search_filter
from relay.http.agent_server import FLAGS, AgentServer
from relay.http.agent_server_openapi import AGENT_SERVER_OPENAPI
from relay.http.errors import error_responses
from relay.http.identity import user_of
from relay.http.requests import read_json_object
from relay.version import __version__


def agent_server_router(server: AgentServer, dependencies: list[Any]) -> APIRouter:
    """The routes (see the module docstring) over ``server``'s graphs."""
    router = APIRouter(tags=["langgraph"])
    relay = server.relay
    reads = [Depends(relay.identify)]
    runs = [Depends(d) for d in dependencies]
    settings = relay.settings
    docs = AGENT_SERVER_OPENAPI

    @router.get("/info", dependencies=reads, responses=error_responses(401))
    async def info() -> dict[str, Any]:
        """What this server is: LangGraph's ``GET /info``."""
        from langgraph.version import __version__ as langgraph_version

        return {
            "version": __version__,
            "langgraph_py_version": langgraph_version,
            "flags": dict(FLAGS),
            "metadata": {"server": "span-relay"},
        }

    @router.post(
        "/assistants/search",
        dependencies=reads,
        responses=error_responses(401, 403, 422),
        openapi_extra=docs["search"],
    )
    async def search(request: Request) -> Response:
        body = await read_json_object(request, settings.max_body_bytes)
        matches, page = search_filter(body)
        value = {
            "graph_id": body.get("graph_id"),
            "metadata": body.get("metadata") or {},
            "limit": page.stop - page.start,
            "offset": page.start,
        }
        filters = await server.authorize(request, "assistants", "search", value)
        listed = [assistant_of(s.agent, server.created_at) for s in server.graphs.values()]
        found = [a for a in listed if matches(a) and server.auth.passes(filters, a["metadata"])]
        return JSONResponse(found[page])

    @router.get(
        "/assistants/{assistant_id}", dependencies=reads, responses=error_responses(401, 403, 404)
    )
    async def assistant(request: Request, assistant_id: str) -> dict[str, Any]:
        served = await server.authorized_assistant(request, assistant_id)
        return assistant_of(served.agent, server.created_at)

    @router.get(
        "/assistants/{assistant_id}/graph",
        dependencies=reads,
        responses=error_responses(401, 403, 404, 422),
    )
    async def graph_of(
        request: Request,
        assistant_id: str,
        xray: str = Query("false", pattern="^(true|false|[0-9]{1,2})$"),
    ) -> dict[str, Any]:
        depth: int | bool = xray == "true" if xray in ("true", "false") else int(xray)
        served = await server.authorized_assistant(request, assistant_id)
        return graph_json(served.agent.graph, depth)

    @router.get(
        "/assistants/{assistant_id}/schemas",
        dependencies=reads,
        responses=error_responses(401, 403, 404),
    )
    async def schemas(request: Request, assistant_id: str) -> dict[str, Any]:
        return schemas_of((await server.authorized_assistant(request, assistant_id)).agent)

    @router.post(
        "/threads",
        dependencies=reads,
        responses=error_responses(401, 403, 409, 422),
        openapi_extra=docs["create_thread"],
    )
    async def create_thread(request: Request) -> dict[str, Any]:
        body = await read_json_object(request, settings.max_body_bytes)
        return await server.create_thread(request, body)

    @router.get(
        "/threads/{thread_id}", dependencies=reads, responses=error_responses(401, 403, 404)
    )
    async def thread(request: Request, thread_id: str) -> dict[str, Any]:
        await server.authorized_thread(request, thread_id, "read")
        return await server.thread(thread_id, user_of(request))

    @router.get(
        "/threads/{thread_id}/state", dependencies=reads, responses=error_responses(401, 403, 404)
    )
    async def state(request: Request, thread_id: str) -> dict[str, Any]:
        await server.authorized_thread(request, thread_id, "read")
        return await server.state(thread_id, user_of(request))

    @router.post(
        "/threads/{thread_id}/history",
        dependencies=reads,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=docs["history"],
    )
    async def history(request: Request, thread_id: str) -> Response:
        body = await read_json_object(request, settings.max_body_bytes)
        await server.authorized_thread(request, thread_id, "read")
        return JSONResponse(await server.history(thread_id, user_of(request), body))

    @router.post(
        "/threads/{thread_id}/runs/stream",
        dependencies=runs,
        responses=error_responses(401, 403, 404, 409, 422),
        openapi_extra=docs["run_stream"],
    )
    async def run_stream(request: Request, thread_id: str) -> Response:
        return await server.stream(request, thread_id)

    @router.post(
        "/threads/{thread_id}/runs/wait",
        dependencies=runs,
        responses=error_responses(401, 403, 404, 409, 422),
        openapi_extra=docs["run_wait"],
    )
    async def run_wait(request: Request, thread_id: str) -> Response:
        return await server.wait(request, thread_id)

    return router
