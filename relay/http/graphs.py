"""The served graphs (DESIGN.md §5): ``GET /graph`` (the relay's own graph),
``GET /graphs``, ``GET /graphs/{name}`` (topology and the SPA's settings: title, example
messages, routes), and the routes of each graph.

:func:`mount_agents` puts every :class:`relay.GraphAgent` on an app: ``/graphs/{name}/chat``,
``/graphs/{name}/chat/resume`` and ``/graphs/{name}/agui`` for each, and the first also
at ``/chat``, ``/chat/resume`` and ``/agui``; LangGraph's Agent Server routes
(relay/http/agent_server.py: ``/info``, ``/assistants/*``, ``/threads/*``) once per app,
over all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from relay.errors import ApiError
from relay.http.errors import error_responses
from relay.http.langgraph_auth import authorize_graph, graph_filter
from relay.http.parts import RelayParts
from relay.turns.starting import StartLocks

if TYPE_CHECKING:
    from relay.auth.langgraph_auth import LangGraphAuth
    from relay.langgraph.agent import GraphAgent


def routes_of(name: str) -> dict[str, str]:
    base = f"/graphs/{name}"
    return {"chat": f"{base}/chat", "resume": f"{base}/chat/resume", "agui": f"{base}/agui"}


class GraphTopology:
    """The route ``GET /graph``: the topology of the relay's own graph (the first
    mounted), as LangGraph's ``Auth`` (its ``assistants.read``) allows; ``404 no_graph``
    on a relay that serves none."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay

    def add_to(self, router: APIRouter, auth: Sequence[Any]) -> None:
        """Put the route on ``router``, behind the ``auth`` dependencies."""
        router.add_api_route(
            "/graph",
            self.graph,
            methods=["GET"],
            dependencies=list(auth),
            tags=["graph"],
            responses=error_responses(401, 404),
        )

    # (no docstring: it would become the operation's description in the OpenAPI document)
    async def graph(self, request: Request) -> JSONResponse:
        relay = self.relay
        missing = ApiError(404, "no_graph", "This relay serves no graph of its own.")
        if relay.topology is None:
            raise missing
        first = next(iter(relay.agents), "")
        await authorize_graph(relay.langgraph_auth, request, first, missing)
        return JSONResponse(relay.topology)


def add_graph_routes(
    router: APIRouter,
    agents: Mapping[str, GraphAgent],
    auth: Sequence[Any],
    langgraph_auth: LangGraphAuth | None = None,
) -> None:
    """``GET /graphs`` and ``GET /graphs/{name}`` over ``agents`` (read at each request:
    agents mounted after the router was made are listed too); with LangGraph's ``Auth``,
    as its ``assistants.search`` and ``assistants.read`` handlers allow."""

    @router.get("/graphs", dependencies=list(auth), tags=["graph"], responses=error_responses(401))
    async def graphs(request: Request) -> dict[str, Any]:
        allowed = await graph_filter(langgraph_auth, request, len(agents))
        listed = [
            {"name": a.name, "title": a.title, "graph_id": a.graph_id, "routes": routes_of(a.name)}
            for a in agents.values()
            if allowed(a.name)
        ]
        return {"graphs": listed, "default": listed[0]["name"] if listed else None}

    @router.get(
        "/graphs/{name}",
        dependencies=list(auth),
        tags=["graph"],
        responses=error_responses(401, 404),
    )
    async def graph_of(request: Request, name: str) -> dict[str, Any]:
        agent = agents.get(name)
        missing = ApiError(404, "unknown_graph", f"No graph named {name!r} is served here.")
        if agent is None:
            raise ApiError(
                404,
                "unknown_graph",
                f"No graph named {name!r} is served here"
                f"{'; try ' + ', '.join(agents) if agents else ''}.",
            )
        await authorize_graph(langgraph_auth, request, agent.name, missing)
        return agent.describe(routes_of(agent.name))


def mount_agents(
    app: Any, relay: RelayParts, agents: Sequence[GraphAgent], starting: StartLocks, first: bool
) -> None:
    """The run routes of ``agents`` on ``app``; ``first``: the first of them is also the
    app's ``/chat``, ``/chat/resume`` and ``/agui``. The run routes' modules are imported
    here, where a graph is served: a relay that serves none (``--relay-only``) never
    imports LangGraph or LangChain (``span-relay --help`` and ``import relay`` neither)."""
    from relay.http.agent_server import AgentServer
    from relay.http.agent_server_events import events_router
    from relay.http.agent_server_routes import agent_server_router
    from relay.http.agent_server_runs import runs_router
    from relay.http.agent_server_stateless import stateless_router
    from relay.http.agent_server_store import store_router
    from relay.http.agent_server_threads import thread_routes_router
    from relay.http.agui import agui_router
    from relay.http.chat import chat_router
    from relay.langgraph.client_tool_limits import ClientTools
    from relay.turns.admission import Admission

    dependencies = [relay.identify, relay.rate_limit, relay.require_bus]
    # LangGraph's Agent Server API: once per app, over every graph mounted on it
    server = getattr(app.state, "relay_agent_server", None)
    if server is None:
        server = app.state.relay_agent_server = AgentServer(relay)
        app.include_router(agent_server_router(server, dependencies))
        app.include_router(thread_routes_router(server))
        app.include_router(runs_router(server, dependencies))
        app.include_router(stateless_router(server, dependencies))
        app.include_router(store_router(server))
        app.include_router(events_router(server, dependencies))
    for index, agent in enumerate(agents):
        # client-executed tools: one per graph, shared by its routes (their timers, the
        # start-up sweep of the turns a stopped instance left waiting on one)
        tools = ClientTools(relay, agent, starting)
        relay.lifecycles.add(tools.sweep, tools.close)
        # what a request may start, and the start: one service for /chat and /agui
        admission = Admission(agent, relay.turns, relay.runs, starting, tools)
        relay.recoverables[agent.name] = admission  # a claimed turn of it, taken up again
        server.add(agent, admission, tools)
        prefixes = [f"/graphs/{agent.name}"] + ([""] if first and index == 0 else [])
        for prefix in prefixes:
            # the OpenAPI document lists each graph once: the first at /chat
            listed = prefix == "" or not (first and index == 0)
            app.include_router(
                chat_router(relay, agent, admission, dependencies, tools),
                prefix=prefix,
                include_in_schema=listed,
            )
            app.include_router(
                agui_router(relay, agent, admission, dependencies, tools),
                prefix=prefix,
                include_in_schema=listed,
            )
