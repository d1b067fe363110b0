"""``/docs`` and ``/redoc`` offline, in a real Chromium (relay/http/docs.py).

The app is a user's own ``FastAPI()`` given to ``relay.mount`` (with a route of its own),
served by a real uvicorn on 127.0.0.1. Every request the page makes to anything but
127.0.0.1 is aborted and recorded (Playwright's route abort), so a page that needed a CDN
would stay blank and the test would name the URL. The pages run under the CSP the relay
sends with them: every violation the browser reports is collected (console and
``securitypolicyviolation``) and must be none, except ReDoc's one attribution logo from
cdn.redoc.ly, which the CSP is there to block.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from fastapi import FastAPI
from langgraph.graph import MessagesState, StateGraph
from playwright.sync_api import expect

from relay import GraphAgent, Relay
from tests.conftest import LiveServer

pytestmark = pytest.mark.browser

VIOLATIONS_JS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


@pytest.fixture(scope="module")
def users_app(tmp_path_factory: pytest.TempPathFactory, chromium_path: str) -> Iterator[str]:
    """A user's FastAPI app with a graph mounted, in a real uvicorn; its base URL."""
    data = tmp_path_factory.mktemp("docs-data")
    relay = Relay.from_env({"RELAY_DATA_DIR": str(data), "OTEL_TRACES_EXPORTER": "none"})
    graph = StateGraph(MessagesState).add_node("reply", lambda s: {}).set_entry_point("reply")
    app = FastAPI(title="Acme support", lifespan=relay.lifespan)

    @app.get("/acme/orders", tags=["acme"], summary="The user's own route")
    async def orders() -> dict[str, Any]:
        return {"orders": []}

    relay.mount(app, GraphAgent(graph.compile(), name="support"))
    server = LiveServer(app).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def offline_page(browser: Any, users_app: str) -> Iterator[Any]:
    """A page that can reach 127.0.0.1 only; ``page.left`` lists what tried to leave,
    ``page.console_csp`` the CSP reports of the console."""
    context = browser.new_context(base_url=users_app, viewport={"width": 1280, "height": 900})
    left: list[str] = []

    def route(r: Any) -> None:
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            left.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.add_init_script(VIOLATIONS_JS)
    errors: list[str] = []
    console_csp: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda m: console_csp.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.left = left
    page.console_csp = console_csp
    yield page
    context.close()
    assert not errors, f"page errors: {errors}"


def test_swagger_ui_renders_the_relays_operations_offline(
    offline_page: Any, shot: Any, artifacts: Path
) -> None:
    page = offline_page
    response = page.goto("/docs")
    assert response is not None and response.status == 200
    csp = response.headers["content-security-policy"]
    assert "'unsafe-inline'" not in csp and "script-src 'self';" in csp  # no inline script
    paths = page.locator(".opblock-summary-path")
    expect(paths.filter(has_text="/chat/resume")).to_have_count(1)
    listed = set(paths.all_inner_texts())
    for path in ("/chat", "/chat/resume", "/agui", "/turns/{turn_id}/events", "/acme/orders"):
        assert path in listed, listed
    # try one operation: the request goes to this origin, and its answer is shown
    page.locator(".opblock-summary-path", has_text="/healthz").click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    expect(page.locator(".live-responses-table tr.response .response-col_status")).to_have_text(
        "200"
    )
    shot(page, "docs-swagger-offline")
    assert page.left == []
    assert page.evaluate("window.__csp") == []
    assert page.console_csp == []


def test_redoc_renders_the_relays_operations_offline(offline_page: Any, shot: Any) -> None:
    page = offline_page
    response = page.goto("/redoc")
    assert response is not None and response.status == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    expect(page.get_by_role("heading", name="Acme support")).to_be_visible()
    page.get_by_role("menuitem", name="chat").click()
    expect(page.get_by_role("menuitem", name="Start a turn of support")).to_be_visible()
    shot(page, "docs-redoc-offline")
    assert page.left == []
    blocked = page.evaluate("window.__csp")
    assert all("cdn.redoc.ly" in v for v in blocked), blocked
