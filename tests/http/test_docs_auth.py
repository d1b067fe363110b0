"""``/openapi.json`` behind the API's own credential in every mode that has one
(RELAY_AUTH ``token``, ``jwt``, ``proxy``, and langgraph.json's ``auth``), on a real
uvicorn; ``/docs``, ``/redoc`` and ``/docs-assets/`` public, holding nothing of the API
(relay/http/docs.py says why; the browser side: tests/browser/test_docs_auth.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from relay.cli.graph_app import create_graph_app
from relay.cli.langgraph_auth import load_project_auth
from relay.cli.langgraph_config import read_config
from tests.auth.issuer import Issuer
from tests.auth.langgraph_project import write_project
from tests.conftest import LiveServer, LiveServers

TOKEN = "s3cret-api-token"
PROXY_SECRET = "proxy-s3cret-of-the-test"


def _served(
    mode: str, tmp_path: Path, app_env: dict[str, str], live_servers: LiveServers
) -> tuple[LiveServer, dict[str, str], str]:
    """The relay in ``mode`` on a real uvicorn, the headers of a good credential, and the
    scheme of its ``WWW-Authenticate`` challenge."""
    from span_relay_demo.app import create_app

    if mode == "token":
        app = create_app({**app_env, "RELAY_API_TOKEN": TOKEN})
        return live_servers.start(app), {"Authorization": f"Bearer {TOKEN}"}, "Bearer"
    if mode == "jwt":
        issuer = Issuer()
        env = {**app_env, **issuer.env(issuer.write_jwks(tmp_path / "jwks.json"))}
        good = {"Authorization": f"Bearer {issuer.token('alice')}"}
        return live_servers.start(create_app(env)), good, "Bearer"
    if mode == "proxy":
        env = {**app_env, "RELAY_AUTH": "proxy", "RELAY_PROXY_SECRET": PROXY_SECRET}
        good = {"X-Relay-Proxy-Secret": PROXY_SECRET, "X-Forwarded-User": "alice"}
        return live_servers.start(create_app(env)), good, "Proxy"
    assert mode == "langgraph"
    config = write_project(tmp_path / "project")
    app = create_graph_app(
        read_config(config).graphs, app_env, base=config.parent, auth=load_project_auth(config)
    )
    return live_servers.start(app), {"Authorization": "Bearer alice-token"}, "Bearer"


@pytest.fixture
def served(
    tmp_path: Path, app_env: dict[str, str], live_servers: LiveServers
) -> Callable[[str], tuple[LiveServer, dict[str, str], str]]:
    return lambda mode: _served(mode, tmp_path, app_env, live_servers)


@pytest.mark.parametrize("mode", ["token", "jwt", "proxy", "langgraph"])
def test_the_schema_needs_the_apis_credential(
    served: Callable[[str], tuple[LiveServer, dict[str, str], str]], mode: str
) -> None:
    server, good, scheme = served(mode)
    wrong = {k: "wrong" for k in good}
    for headers in ({}, wrong):
        r = httpx.get(f"{server.url}/openapi.json", headers=headers)
        assert r.status_code == 401, r.text
        assert r.headers["content-type"] == "application/json"
        assert r.json()["error"]["code"] == "unauthorized"
        assert r.headers["www-authenticate"].startswith(scheme)
        assert "/chat" not in r.text
    r = httpx.get(f"{server.url}/openapi.json", headers=good)
    assert r.status_code == 200
    assert {"/chat", "/chat/resume", "/agui"} <= set(r.json()["paths"])


def test_the_schema_is_open_without_auth(
    app_env: dict[str, str], live_servers: LiveServers
) -> None:
    from span_relay_demo.app import create_app

    server = live_servers.start(create_app(app_env))
    r = httpx.get(f"{server.url}/openapi.json")
    assert r.status_code == 200 and "/chat" in r.json()["paths"]


@pytest.mark.parametrize("mode", ["token", "langgraph"])
def test_the_pages_and_assets_are_public_and_hold_nothing_of_the_api(
    served: Callable[[str], tuple[LiveServer, dict[str, str], str]], mode: str
) -> None:
    server, _, _ = served(mode)
    for page, bundle in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        r = httpx.get(f"{server.url}{page}")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        # a shell: where the schema is and the scripts that fetch it, no operation of it
        assert "/chat" not in r.text and "/turns" not in r.text
        scripts = re.findall(r'<script src="([^"]+)"', r.text)
        assert scripts == [f"/docs-assets/{bundle}", "/docs-assets/relay-docs.js"]
        assert "<script>" not in r.text
        csp = r.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "connect-src 'self'" in csp
        for asset in re.findall(r'(?:src|href)="(/docs-assets/[^"]+)"', r.text):
            assert httpx.get(f"{server.url}{asset}").status_code == 200, asset


def test_the_schema_keeps_the_root_path_as_a_server(
    app_env: dict[str, str], live_servers: LiveServers
) -> None:
    """Behind a prefix (``root_path``), the document names it as a server, as FastAPI's
    own route does, and the pages fetch it under the prefix."""
    from span_relay_demo.app import create_app

    app = create_app({**app_env, "RELAY_API_TOKEN": TOKEN})
    app.root_path = "/relay"
    server = live_servers.start(app)
    document = httpx.get(
        f"{server.url}/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}
    ).json()
    assert document["servers"][0] == {"url": "/relay"}
    html = httpx.get(f"{server.url}/docs").text
    assert "/relay/docs-assets/relay-docs.js" in html and "/relay/openapi.json" in html
