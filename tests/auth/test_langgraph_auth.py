"""langgraph.json's ``auth`` on a real uvicorn: LangGraph's own ``Auth`` (real
langgraph_sdk, loaded from the project's ``auth.py`` as ``serve --config`` loads it)
decides who is asking on every route and what they may do, with the ``@auth.on`` handler
LangGraph would call (tests/auth/langgraph_project.py has the project)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from relay.cli.graph_app import create_graph_app
from relay.cli.langgraph_auth import load_project_auth
from relay.cli.langgraph_config import read_config
from relay.settings import ConfigError
from tests.auth.langgraph_project import bearer, write_project
from tests.auth.ownership import (
    alices_turns,
    assert_all_reachable,
    assert_none_reachable,
    listed,
)
from tests.conftest import LiveServer, LiveServers

ALICE = bearer("alice-token")
BOB = bearer("bob-token")
CAROL = bearer("carol-token")  # no "write": reads, never runs
EVE = bearer("eve-token")  # her reads are filtered to graph "other"
MALLORY = bearer("mallory-token")  # her reads are filtered on metadata the relay lacks

#: (method, path, request kwargs) of every route that asks who is asking
PROTECTED = [
    ("GET", "/graphs", {}),
    ("GET", "/graphs/support_agent", {}),
    ("GET", "/graph", {}),
    ("GET", "/turns", {}),
    ("GET", "/turns", {"headers": {"Accept": "text/event-stream"}}),
    ("GET", "/turns/0123456789abcdef0123456789abcdef", {}),
    ("GET", "/turns/0123456789abcdef0123456789abcdef/events", {}),
    ("POST", "/turns/0123456789abcdef0123456789abcdef/cancel", {}),
    ("POST", "/chat", {"json": {"message": "hi"}}),
    ("POST", "/graphs/other/chat", {"json": {"message": "hi"}}),
    ("POST", "/chat/resume", {"json": {"thread_id": "t", "turn_id": "u", "resume": 1}}),
    ("POST", "/agui", {"json": {"threadId": "t", "runId": "r", "messages": []}}),
    ("POST", "/imports", {"json": {"resourceSpans": []}}),
    ("POST", "/messages/m-1/feedback", {"json": {"rating": "up"}}),
]


@pytest.fixture
def lg_server(
    tmp_path: Path, app_env: dict[str, str], live_servers: LiveServers
) -> Callable[..., LiveServer]:
    def make(**overrides: str) -> LiveServer:
        config = write_project(tmp_path / "project")
        graphs = read_config(config).graphs
        auth = load_project_auth(config)
        app = create_graph_app(graphs, {**app_env, **overrides}, base=config.parent, auth=auth)
        return live_servers.start(app)

    return make


def test_unauthenticated_is_a_401_on_every_protected_route(
    lg_server: Callable[..., LiveServer], client: httpx.Client
) -> None:
    url = lg_server().url
    for method, path, kwargs in PROTECTED:
        for headers in ({}, bearer("nobody's-token")):
            response = client.request(
                method,
                f"{url}{path}",
                **{**kwargs, "headers": {**kwargs.get("headers", {}), **headers}},
            )
            assert response.status_code == 401, (method, path, response.text)
            assert response.json() == {
                "error": {
                    "code": "unauthorized",
                    "message": "Unknown token: send Authorization: Bearer <your token>.",
                }
            }
            assert response.headers["www-authenticate"].startswith("Bearer")
    # what every mode leaves public stays public; the SPA learns to ask for a token
    for path in ("/healthz", "/readyz", "/"):
        assert client.get(f"{url}{path}").status_code == 200, path
    assert client.get(f"{url}/config").json()["auth"] == "langgraph"
    assert client.get(f"{url}/config").json()["auth_required"] is True


def test_alices_turns_and_threads_are_invisible_to_bob(
    lg_server: Callable[..., LiveServer], client: httpx.Client
) -> None:
    url = lg_server().url
    turns = alices_turns(client, url, ALICE)
    assert_none_reachable(client, url, BOB, turns)
    assert_all_reachable(client, url, ALICE, turns)
    # the run acts as its user, with the keys a graph under the Agent Server reads
    who = client.post(f"{url}/chat", headers=ALICE, json={"message": "Who am I?"}).json()
    assert who["answer"] == "You are alice (alice, alice, ['write'], alice).", who
    own = client.post(f"{url}/chat", headers=BOB, json={"message": "mine"}).json()
    assert listed(client, url, BOB) == {own["turn_id"]}
    assert client.get(f"{url}/turns/{own['turn_id']}", headers=ALICE).status_code == 404


def test_a_handler_that_refuses_create_run_is_a_403(
    lg_server: Callable[..., LiveServer], client: httpx.Client
) -> None:
    url = lg_server().url
    for path, body in (
        ("/chat", {"message": "hi"}),
        ("/graphs/other/chat", {"message": "hi"}),
        (
            "/agui",
            {
                "threadId": "carols-thread",
                "runId": "r-1",
                "state": {},
                "messages": [{"id": "m1", "role": "user", "content": "hi"}],
                "tools": [],
                "context": [],
                "forwardedProps": {},
            },
        ),
    ):
        refused = client.post(f"{url}{path}", headers=CAROL, json=body)
        assert refused.status_code == 403, (path, refused.text)
        assert refused.json() == {
            "error": {"code": "forbidden", "message": "Read-only users start no runs."}
        }
    # nothing ran: she has no turn, and may still read (her listing is empty, not refused)
    assert listed(client, url, CAROL) == set()
    # the most specific handler decides: assistants.search is allowed, assistants.read
    # falls to the global deny-by-default handler
    assert [g["name"] for g in client.get(f"{url}/graphs", headers=CAROL).json()["graphs"]] == [
        "support_agent",
        "other",
    ]
    denied = client.get(f"{url}/graphs/other", headers=CAROL)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"
    assert client.get(f"{url}/graph", headers=CAROL).status_code == 403


def test_a_filter_hides_what_it_does_not_match(
    lg_server: Callable[..., LiveServer], client: httpx.Client
) -> None:
    url = lg_server().url
    # eve's reads are filtered to graph "other": her own turn on support_agent is hidden
    first = client.post(f"{url}/chat", headers=EVE, json={"message": "one"}).json()
    assert first["status"] == "answered"
    hidden = client.get(f"{url}/turns/{first['turn_id']}", headers=EVE)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "unknown_turn"
    assert client.get(f"{url}/turns/{first['turn_id']}/events", headers=EVE).status_code == 404
    # ... though create_run's filter ({"owner": "eve"}) lets her continue her own thread
    again = client.post(
        f"{url}/chat", headers=EVE, json={"message": "two", "thread_id": first["thread_id"]}
    )
    assert again.status_code == 200 and again.json()["status"] == "answered"
    other = client.post(f"{url}/graphs/other/chat", headers=EVE, json={"message": "three"}).json()
    assert client.get(f"{url}/turns/{other['turn_id']}", headers=EVE).status_code == 200
    assert listed(client, url, EVE) == {other["turn_id"]}
    assert listed(client, url, EVE, thread_id=first["thread_id"]) == set()
    assert listed(client, url, EVE, thread_id=other["thread_id"]) == {other["turn_id"]}
    # create_run's filter on someone else's thread: as if it did not exist
    alices = client.post(f"{url}/chat", headers=ALICE, json={"message": "hers"}).json()
    taken = client.post(
        f"{url}/chat", headers=EVE, json={"message": "x", "thread_id": alices["thread_id"]}
    )
    assert taken.status_code == 404 and taken.json()["error"]["code"] == "unknown_thread"


def test_a_filter_the_relay_cannot_apply_fails_closed(
    lg_server: Callable[..., LiveServer], client: httpx.Client
) -> None:
    url = lg_server().url
    own = client.post(f"{url}/chat", headers=MALLORY, json={"message": "mine"}).json()
    assert own["status"] == "answered"  # create and create_run filter on the owner: kept
    for path in ("/turns", f"/turns/{own['turn_id']}", f"/turns/{own['turn_id']}/events"):
        refused = client.get(f"{url}{path}", headers=MALLORY)
        assert refused.status_code == 500, (path, refused.text)
        error = refused.json()["error"]
        assert error["code"] == "auth_filter_unsupported"
        assert "'tenant'" in error["message"]


def test_relay_auth_and_langgraph_auth_together_refuse_to_start(
    tmp_path: Path, app_env: dict[str, str]
) -> None:
    config = write_project(tmp_path / "project")
    graphs = read_config(config).graphs
    auth = load_project_auth(config)
    with pytest.raises(ConfigError, match="RELAY_AUTH=token and LangGraph's auth"):
        create_graph_app(
            graphs,
            {**app_env, "RELAY_AUTH": "token", "RELAY_API_TOKEN": "t" * 20},
            base=config.parent,
            auth=auth,
        )


def test_the_library_path_takes_an_auth_and_gives_its_handler_what_it_asks_for(
    app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client, tmp_path: Path
) -> None:
    from fastapi import FastAPI
    from langgraph_sdk import Auth
    from starlette.requests import Request

    from relay import GraphAgent, Relay
    from tests.auth.langgraph_project import GRAPH

    (tmp_path / "lib_graph.py").write_text(GRAPH)
    spec = importlib.util.spec_from_file_location("lib_graph", tmp_path / "lib_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seen: list[dict[str, object]] = []
    auth = Auth()

    @auth.authenticate
    async def authenticate(
        request: Request,
        method: str,
        path: str,
        path_params: dict[str, str],
        query_params: dict[str, str],
        headers: dict[bytes, bytes],
        authorization: str | None,
        body: dict[str, object] | None,
    ) -> str:
        seen.append(
            {
                "request": isinstance(request, Request),
                "method": method,
                "path": path,
                "path_params": path_params,
                "query_params": query_params,
                "header": headers.get(b"x-user"),
                "authorization": authorization,
                "body": body,
            }
        )
        if b"x-user" not in headers:
            raise Auth.exceptions.HTTPException(401, "Say who you are in X-User.")
        return headers[b"x-user"].decode()

    relay = Relay.from_env(app_env, auth=auth)  # the three lines, with an auth
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(module.make_graph(), name="lib"))
    url = live_servers.start(app).url

    refused = client.post(f"{url}/chat?x=1", json={"message": "hi"})
    assert refused.status_code == 401
    assert refused.json()["error"] == {
        "code": "unauthorized",
        "message": "Say who you are in X-User.",
    }
    answered = client.post(
        f"{url}/chat?x=1",
        headers={"X-User": "zoe", "Authorization": "Basic eg=="},
        json={"message": "hi"},
    )
    assert answered.status_code == 200 and answered.json()["answer"] == "You asked: hi"
    assert seen[-1] == {
        "request": True,
        "method": "POST",
        "path": "/chat",
        "path_params": {},
        "query_params": {"x": "1"},
        "header": b"zoe",
        "authorization": "Basic eg==",
        "body": {"message": "hi"},
    }
    turn = answered.json()["turn_id"]
    assert client.get(f"{url}/turns/{turn}", headers={"X-User": "zoe"}).status_code == 200
    assert seen[-1]["path_params"] == {"turn_id": turn}
    assert client.get(f"{url}/turns/{turn}", headers={"X-User": "yan"}).status_code == 404
    # no handler of @auth.on at all: every user may do everything with their own turns
    assert listed(client, url, {"X-User": "zoe"}) == {turn}
    with pytest.raises(ConfigError, match="not a langgraph_sdk\\.Auth"):
        Relay.from_env(app_env, auth=object())


def test_the_receiver_keeps_its_own_credential(tmp_path: Path, app_env: dict[str, str]) -> None:
    config = write_project(tmp_path / "project")
    graphs = read_config(config).graphs
    auth = load_project_auth(config)
    with pytest.raises(ConfigError, match="OTLP receiver on needs RELAY_API_TOKEN"):
        create_graph_app(
            graphs, {**app_env, "RELAY_OTLP_HTTP": "true"}, base=config.parent, auth=auth
        )


def test_the_entrys_openapi_and_disable_studio_auth(
    tmp_path: Path, app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client
) -> None:
    scheme = {"BearerAuth": {"type": "http", "scheme": "bearer"}}
    config = write_project(
        tmp_path / "project",
        entry={
            "path": "./src/agent/auth.py:auth",
            "disable_studio_auth": True,  # no Studio here: nothing to disable
            "openapi": {"securitySchemes": scheme, "security": [{"BearerAuth": []}]},
        },
    )
    graphs = read_config(config).graphs
    app = create_graph_app(graphs, app_env, base=config.parent, auth=load_project_auth(config))
    url = live_servers.start(app).url
    assert client.get(f"{url}/openapi.json").status_code == 401  # behind the API's auth
    document = client.get(f"{url}/openapi.json", headers=bearer("alice-token")).json()
    assert document["components"]["securitySchemes"] == scheme
    assert document["security"] == [{"BearerAuth": []}]
    assert client.post(f"{url}/chat", json={"message": "hi"}).status_code == 401


def test_thread_metadata_the_relay_cannot_keep(
    app_env: dict[str, str],
    live_servers: LiveServers,
    client: httpx.Client,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A create handler's owner must be the user (else 500, never kept otherwise); another
    key is dropped with one warning, and a filter on it then fails closed."""
    from fastapi import FastAPI
    from langgraph_sdk import Auth

    from relay import GraphAgent, Relay
    from tests.auth.langgraph_project import GRAPH

    (tmp_path / "meta_graph.py").write_text(GRAPH)
    spec = importlib.util.spec_from_file_location("meta_graph", tmp_path / "meta_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    auth = Auth()

    @auth.authenticate
    async def authenticate(authorization: str | None) -> str:
        if not authorization:
            raise Auth.exceptions.HTTPException(401, "Who?")
        return authorization.removeprefix("Bearer ")

    @auth.on.threads.create
    async def stamp(ctx: Auth.types.AuthContext, value: dict[str, object]) -> None:
        metadata = value.setdefault("metadata", {})
        assert isinstance(metadata, dict)
        metadata["owner"] = "team-7" if ctx.user.identity == "teamster" else ctx.user.identity
        metadata["org"] = "acme"

    relay = Relay.from_env(app_env, auth=auth)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(module.make_graph(), name="meta"))
    url = live_servers.start(app).url

    refused = client.post(f"{url}/chat", headers=bearer("teamster"), json={"message": "hi"})
    assert refused.status_code == 500, refused.text
    assert refused.json()["error"]["code"] == "auth_metadata_unsupported"
    assert listed(client, url, bearer("teamster")) == set()  # nothing ran
    with caplog.at_level("WARNING", logger="relay.auth"):
        for _ in range(2):
            answered = client.post(f"{url}/chat", headers=bearer("zoe"), json={"message": "hi"})
            assert answered.status_code == 200, answered.text
    warned = [r.getMessage() for r in caplog.records if "'org'" in r.getMessage()]
    assert len(warned) == 1 and "matches no thread" in warned[0]
