"""``/docs`` and ``/redoc`` of a relay with a token, in a real Chromium: the page asks for
the token when ``/openapi.json`` answers 401, shows the API once it is given (and again
after a reload: the tab keeps it, the SPA's own way), and Swagger UI's "Try it out"
sends it; a tab that gave its token to the SPA sees the docs at once. No request leaves
127.0.0.1, and the CSP reports nothing (relay/http/docs.py, relay-docs.js).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from tests.browser.test_docs_offline import VIOLATIONS_JS
from tests.conftest import LiveServer

pytestmark = pytest.mark.browser

TOKEN = "docs-token-of-the-browser-test"


@pytest.fixture(scope="module")
def token_relay(tmp_path_factory: pytest.TempPathFactory, chromium_path: str) -> Iterator[str]:
    """The demo relay with RELAY_API_TOKEN, in a real uvicorn; its base URL."""
    from span_relay_demo.app import create_app

    data = tmp_path_factory.mktemp("docs-auth")
    app = create_app(
        {
            "RELAY_DATA_DIR": str(data),
            "OTEL_TRACES_EXPORTER": "none",
            "RELAY_API_TOKEN": TOKEN,
        }
    )
    server = LiveServer(app).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def page(browser: Any, token_relay: str) -> Iterator[Any]:
    """A page that can reach 127.0.0.1 only (``page.left``: what tried to leave) and
    records the requests it sent (``page.sent``: url, Authorization)."""
    context = browser.new_context(base_url=token_relay, viewport={"width": 1280, "height": 900})
    left: list[str] = []
    sent: list[tuple[str, str | None]] = []

    def route(r: Any) -> None:
        if urlparse(r.request.url).hostname == "127.0.0.1":
            sent.append((r.request.url, r.request.headers.get("authorization")))
            r.continue_()
        else:
            left.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.add_init_script(VIOLATIONS_JS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.left = left
    page.sent = sent
    yield page
    context.close()
    assert not errors, f"page errors: {errors}"


def test_swagger_ui_asks_for_the_token_then_uses_it(
    page: Any, token_relay: str, shot: Any, artifacts: Path
) -> None:
    response = page.goto("/docs")
    assert response is not None and response.status == 200
    note = page.locator("#relay-docs-note")
    expect(note).to_contain_text("Authorization: Bearer")
    token = page.get_by_label("Bearer token")
    expect(token).to_be_visible()
    expect(page.locator(".opblock-summary-path")).to_have_count(0)
    shot(page, "docs-token-asked")
    # a wrong token: refused, asked again
    token.fill("not-the-token")
    page.get_by_role("button", name="Show the API").click()
    expect(note).to_contain_text("That token was not accepted")
    expect(token).to_be_visible()
    # the right one: the API is shown, the form gone
    token.fill(TOKEN)
    page.get_by_role("button", name="Show the API").click()
    paths = page.locator(".opblock-summary-path")
    expect(paths.filter(has_text="/chat/resume")).to_have_count(1)
    expect(token).to_be_hidden()
    expect(note).to_be_hidden()
    # "Try it out" on a route that needs the token: it is sent, the answer is 200
    page.locator(".opblock-get .opblock-summary-path", has_text=re.compile(r"^/turns$")).click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    expect(page.locator(".live-responses-table tr.response .response-col_status")).to_have_text(
        "200"
    )
    tried = [auth for url, auth in page.sent if urlparse(url).path == "/turns"]
    assert tried == [f"Bearer {TOKEN}"], page.sent
    shot(page, "docs-token-given")
    # a reload keeps it (this tab's sessionStorage): no question asked
    page.reload()
    expect(paths.filter(has_text="/chat/resume")).to_have_count(1)
    expect(token).to_be_hidden()
    assert page.left == []
    assert page.evaluate("window.__csp") == []


def test_redoc_shows_the_api_to_a_tab_signed_in_on_the_spa(page: Any) -> None:
    page.goto("/")
    page.evaluate(f"sessionStorage.setItem('span-relay-token', {TOKEN!r})")  # the SPA's key
    response = page.goto("/redoc")
    assert response is not None and response.status == 200
    page.get_by_role("menuitem", name="chat").first.click()
    expect(page.get_by_role("menuitem", name="Start a turn of support_agent")).to_be_visible()
    expect(page.get_by_label("Bearer token")).to_be_hidden()
    assert page.left == []
    blocked = page.evaluate("window.__csp")
    assert all("cdn.redoc.ly" in v for v in blocked), blocked
