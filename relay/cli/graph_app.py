"""``span-relay serve --graph MODULE:ATTR`` and ``--config langgraph.json``: any graph, served.

:func:`create_graph_app` makes the app: the relay's routes, the graphs' routes, and
langgraph.json's ``http.app`` (the user's Starlette or FastAPI app) beside them. How a
graph is named and imported is relay/cli/graph_loading.py's; how langgraph.json is read,
relay/cli/langgraph_config.py's.

At start-up (:func:`create_graph_app`) every graph's module is imported: a failure is one
line naming the graph, its file and the exception. In the app's lifespan, on the server's
event loop, each factory is called (an async one awaited, a context manager entered until
shutdown), each graph becomes a :class:`relay.GraphAgent` (named by its key, else its own
name, else its module; described by its ``description``) and is mounted, the first also
at ``/chat``; then the relay starts, then the user's app's own lifespan runs.

``http.app``: its routes come **before** the relay's, as the Agent Server puts a custom
app's routes before its own: a route of the user's app with the path and method of one of
the relay's answers in its place. Its middleware wraps the whole app (outermost, as the
Agent Server applies a custom app's middleware), its exception handlers join the relay's
(the relay's own answers stay for the classes both handle), and the two apps share one
``app.state``. ``http.cors`` is the app's CORS policy (relay/http/middleware.py);
``http.configurable_headers`` picks the request headers each run sees in its
``configurable`` (relay/cli/configurable_headers.py).

``auth``, ``store`` and ``checkpointer`` (langgraph.json's sections): the ``Auth`` object
relay/cli/langgraph_auth.py loads, and the sections relay/langgraph/store.py and
checkpointer_config.py check and honour, handed to the :class:`relay.Relay`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from relay.cli.configurable_headers import header_filter
from relay.cli.graph_loading import GraphLoadError, ImportedGraph, import_graph, import_source
from relay.cli.langgraph_auth import ProjectAuth, add_openapi_security
from relay.cli.langgraph_config import GraphEntry
from relay.core import Relay
from relay.langgraph.agent import GraphAgent
from relay.langgraph.checkpointer_config import checkpointer_options
from relay.langgraph.store import store_options
from relay.settings import ConfigError
from relay.version import __version__

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def create_graph_app(
    graphs: Sequence[GraphEntry | tuple[str | None, str]],
    environ: Mapping[str, str] | None = None,
    base: Path | None = None,
    *,
    http: Mapping[str, Any] | None = None,
    auth: ProjectAuth | None = None,
    store: Mapping[str, Any] | None = None,
    checkpointer: Mapping[str, Any] | None = None,
) -> FastAPI:
    """An app serving ``graphs`` (GraphEntry, or ``(name, spec)``; a name None: the
    graph's own name, else the spec's module), the first also at ``/chat``; ``http``:
    langgraph.json's ``http`` (``app``, ``cors``, ``configurable_headers``); ``base``: the
    folder relative paths start from; ``auth``: langgraph.json's, loaded
    (relay/cli/langgraph_auth.py); ``store`` and ``checkpointer``: langgraph.json's
    sections (relay/langgraph/store.py, checkpointer_config.py)."""
    entries = [g if isinstance(g, GraphEntry) else GraphEntry(*g) for g in graphs]
    imported = [import_graph(g.spec, base, name=g.name, description=g.description) for g in entries]
    http = http or {}
    user_app = load_http_app(http["app"], base) if http.get("app") else None
    # the relay (its stores) once the imports have succeeded
    relay = Relay.from_env(
        environ,
        auth=auth.auth if auth is not None else None,
        store=store_options(store, base),
        checkpointer=checkpointer_options(checkpointer),
    )
    relay.cors = http.get("cors")
    config_of = header_filter(http.get("configurable_headers"))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[Any]:
        async with contextlib.AsyncExitStack() as stack:
            agents = []
            for graph in imported:
                try:
                    compiled = await graph.build(stack)
                except GraphLoadError as exc:
                    app.state.load_error = exc
                    raise
                agents.append(agent_of(graph, compiled, config_of))
            relay.mount(app, *agents)
            await stack.enter_async_context(relay.lifespan(app))
            state = None
            if user_app is not None:
                state = await stack.enter_async_context(user_app.router.lifespan_context(user_app))
            yield state

    app = FastAPI(title="span-relay", version=__version__, lifespan=lifespan)
    if user_app is not None:
        app.state = user_app.state  # one state for both apps' routes
    relay.mount(app)  # the turn API, the SPA, the error answers, CORS; the graphs at start
    app.add_middleware(StartupErrors)
    if user_app is not None:
        join_user_app(app, user_app)
    if auth is not None:
        add_openapi_security(app, auth.openapi)
    return app


def agent_of(
    graph: ImportedGraph,
    compiled: Any,
    config_of: Callable[[Mapping[str, str]], Mapping[str, Any]] | None = None,
) -> GraphAgent:
    """The GraphAgent of a built graph: named by its key, else its own name, else its
    module; described by its ``description``; ``config_of``: the headers a run sees."""
    own = getattr(compiled, "name", None)
    chosen = graph.name or (own if own and own != "LangGraph" else graph_name(graph.spec))
    return GraphAgent(
        compiled,
        name=_NAME.sub("_", chosen)[:64] or "graph",
        description=graph.description,
        config_of=config_of,
    )


def load_http_app(spec: str, base: Path | None) -> Any:
    """The Starlette (or FastAPI) app ``http.app`` names (``./src/agent/webapp.py:app``)."""
    from starlette.applications import Starlette

    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise ConfigError(f"http.app: write it as ./path/to/file.py:app, not {spec!r}")
    module = import_source(where, base or Path.cwd(), "http.app")
    value = getattr(module, attr, None)
    if not isinstance(value, Starlette):
        raise ConfigError(
            f"http.app ({spec}) is a {type(value).__name__}, not a Starlette or FastAPI "
            "app (its routes are mounted beside the relay's)"
        )
    return value


def join_user_app(app: FastAPI, user_app: Any) -> None:
    """``user_app``'s routes before the relay's, its middleware outermost, its exception
    handlers where the relay has none. A FastAPI app's generated documentation routes
    (its ``/openapi.json``, ``/docs``, ``/redoc``) are left out: the relay's document
    covers the user's routes too, and its pages work offline (relay/http/docs.py), where
    the user's would load Swagger UI from a CDN and describe only half the API."""
    generated = _generated_docs_paths(user_app)
    app.router.routes[:0] = [
        route for route in user_app.router.routes if getattr(route, "path", None) not in generated
    ]
    for middleware in reversed(user_app.user_middleware):
        app.user_middleware.insert(0, middleware)
    for key, handler in user_app.exception_handlers.items():
        app.exception_handlers.setdefault(key, handler)


def _generated_docs_paths(user_app: Any) -> set[str]:
    """The paths of the documentation routes FastAPI generated for ``user_app`` (none for
    a Starlette app, or for a URL the app switched off)."""
    if not isinstance(user_app, FastAPI):
        return set()
    urls = (
        user_app.openapi_url,
        user_app.docs_url,
        user_app.redoc_url,
        user_app.swagger_ui_oauth2_redirect_url if user_app.docs_url else None,
    )
    return {url for url in urls if url}


class StartupErrors:
    """ASGI middleware: a graph that cannot be built at start-up fails the lifespan with
    its one line (GraphLoadError), not the traceback Starlette would send uvicorn (which
    is logged at DEBUG)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            error = getattr(getattr(scope.get("app"), "state", None), "load_error", None)
            if message["type"] == "lifespan.startup.failed" and error is not None:
                message = {**message, "message": f"span-relay: {error}"}
            await send(message)

        await self.app(scope, receive, sending)


def graph_name(spec: str) -> str:
    """The name of a ``--graph`` spec: its module's last part (``my_pkg.agent:graph`` ->
    ``agent``, ``./src/chat.py:app`` -> ``chat``)."""
    where = spec.rpartition(":")[0]
    stem = Path(where).stem if where.endswith(".py") else where.rsplit(".", 1)[-1]
    return _NAME.sub("_", stem) or "graph"
