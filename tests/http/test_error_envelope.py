"""Every error in one shape, ``{"error": {"code", "message"}}``, on a real uvicorn: the 404
of an unknown route and of an unknown graph, the 405 of a wrong method, an app's own
``HTTPException``, FastAPI's validation errors, an unhandled exception; and ``/docs`` and
``/redoc`` whose assets the relay serves itself (the browser side: tests/browser/
test_docs_offline.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import PlainTextResponse
from langgraph.graph import MessagesState, StateGraph

from relay import GraphAgent, Relay
from tests.conftest import LiveServer, LiveServers


def _error(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert set(r.json()) == {"error"}, r.text
    error = r.json()["error"]
    assert error["code"] == code, error
    assert error["message"].endswith("."), error
    return str(error["message"])


@pytest.mark.parametrize("path", ["/nowhere", "/turns/t1/nowhere", "/graphs/support_agent/nowhere"])
def test_an_unknown_route_is_404_in_the_envelope(server: LiveServer, path: str) -> None:
    message = _error(httpx.get(f"{server.url}{path}"), 404, "not_found")
    assert "/openapi.json" in message


@pytest.mark.parametrize("route", ["chat", "chat/resume", "agui"])
def test_an_unknown_graph_is_named(server: LiveServer, route: str) -> None:
    r = httpx.post(f"{server.url}/graphs/nope/{route}", json={"message": "hi"})
    message = _error(r, 404, "unknown_graph")
    assert "'nope'" in message and "support_agent" in message
    message = _error(httpx.get(f"{server.url}/graphs/nope"), 404, "unknown_graph")
    assert "support_agent" in message


def test_a_wrong_method_is_405_with_allow(server: LiveServer) -> None:
    r = httpx.get(f"{server.url}/chat")
    message = _error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"
    assert "GET" in message and "POST" in message
    _error(httpx.delete(f"{server.url}/turns"), 405, "method_not_allowed")


def test_a_bad_query_is_422_in_the_envelope(server: LiveServer) -> None:
    message = _error(httpx.get(f"{server.url}/turns?limit=many"), 422, "invalid_request")
    assert "limit" in message


# -- a user's own app, mounted -----------------------------------------------------------


def _users_app(
    app_env: dict[str, str], live_servers: LiveServers, **fastapi: Any
) -> tuple[FastAPI, Callable[[], LiveServer]]:
    relay = Relay.from_env(app_env)
    app = FastAPI(title="Acme", lifespan=relay.lifespan, **fastapi)
    graph = StateGraph(MessagesState).add_node("reply", lambda s: {}).set_entry_point("reply")

    @app.get("/acme/orders/{order}")
    async def order(order: str, size: int = Query(1)) -> dict[str, Any]:
        if order == "gone":
            raise HTTPException(410, "That order was archived")
        if order == "boom":
            raise RuntimeError("a bug in the user's route")
        return {"order": order, "size": size}

    def start() -> LiveServer:
        relay.mount(app, GraphAgent(graph.compile(), name="acme"))
        return live_servers.start(app)

    return app, start


def test_a_users_app_gets_the_envelope_too(
    app_env: dict[str, str], live_servers: LiveServers
) -> None:
    _, start = _users_app(app_env, live_servers)
    url = start().url
    message = _error(httpx.get(f"{url}/acme/orders/gone"), 410, "gone")
    assert message == "That order was archived."
    assert "size" in _error(httpx.get(f"{url}/acme/orders/1?size=x"), 422, "invalid_request")
    _error(httpx.get(f"{url}/acme/nowhere"), 404, "not_found")
    message = _error(httpx.get(f"{url}/acme/orders/boom"), 500, "internal_error")
    assert "bug" not in message  # the log has why; the answer does not
    assert httpx.get(f"{url}/acme/orders/7").json() == {"order": "7", "size": 1}


def test_a_handler_the_app_set_itself_is_kept(
    app_env: dict[str, str], live_servers: LiveServers
) -> None:
    app, start = _users_app(app_env, live_servers)

    async def mine(request: Any, exc: Exception) -> PlainTextResponse:
        return PlainTextResponse("the app's own", status_code=418)

    app.add_exception_handler(HTTPException, mine)
    url = start().url
    r = httpx.get(f"{url}/acme/orders/gone")
    assert (r.status_code, r.text) == (418, "the app's own")
    # the relay's own errors keep the envelope
    _error(httpx.post(f"{url}/chat", json={}), 422, "invalid_message")


# -- /docs and /redoc offline ------------------------------------------------------------


def test_the_docs_pages_load_nothing_from_elsewhere(
    app_env: dict[str, str], live_servers: LiveServers
) -> None:
    _, start = _users_app(app_env, live_servers)
    url = start().url
    for page, assets in (
        (
            "/docs",
            [
                "swagger-ui-bundle.js",
                "swagger-ui.css",
                "favicon.png",
                "relay-docs.js",
                "relay-docs.css",
            ],
        ),
        ("/redoc", ["redoc.standalone.js", "favicon.png", "relay-docs.js", "relay-docs.css"]),
    ):
        r = httpx.get(f"{url}{page}")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        html = r.text
        assert "cdn.jsdelivr.net" not in html and "fonts.googleapis.com" not in html
        sources = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sources and all(s.startswith("/docs-assets/") for s in sources), sources
        assert sorted(s.rsplit("/", 1)[1] for s in sources) == sorted(assets)
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp
        assert "script-src 'self'" in csp and "'unsafe-eval'" not in csp
    # the assets, from the installed fastapi-offline package (and the relay's own two)
    from importlib import resources

    own = resources.files("relay.http") / "docs_assets"
    for name in ("relay-docs.js", "relay-docs.css"):
        r = httpx.get(f"{url}/docs-assets/{name}")
        assert r.status_code == 200 and r.content == (own / name).read_bytes()

    shipped = resources.files("fastapi_offline") / "static"
    for name, kind in (
        ("swagger-ui-bundle.js", "text/javascript"),
        ("swagger-ui.css", "text/css"),
        ("redoc.standalone.js", "text/javascript"),
        ("favicon.png", "image/png"),
    ):
        r = httpx.get(f"{url}/docs-assets/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
        assert r.content == (shipped / name).read_bytes()
    _error(httpx.get(f"{url}/docs-assets/..%2Fcore.py"), 404, "not_found")
    _error(httpx.get(f"{url}/docs-assets/core.py"), 404, "unknown_asset")


def test_docs_switched_off_stay_off(app_env: dict[str, str], live_servers: LiveServers) -> None:
    _, start = _users_app(app_env, live_servers, docs_url=None, redoc_url="/api/redoc")
    url = start().url
    _error(httpx.get(f"{url}/docs"), 404, "not_found")
    r = httpx.get(f"{url}/api/redoc")
    assert r.status_code == 200 and "/docs-assets/redoc.standalone.js" in r.text


def test_the_relay_only_app_has_offline_docs(
    app_env: dict[str, str], live_servers: LiveServers
) -> None:
    from relay.cli.relay_only import create_relay_app

    url = live_servers.start(create_relay_app(app_env)).url
    html = httpx.get(f"{url}/docs").text
    assert "/docs-assets/swagger-ui-bundle.js" in html and "cdn." not in html
