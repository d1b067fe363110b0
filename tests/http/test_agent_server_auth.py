"""langgraph.json's ``auth`` on LangGraph's Agent Server routes (relay/http/agent_server_auth.py)
on a real uvicorn: an ``auth.py`` written for these tests (owner-only threads as in
LangGraph's docs, runs refused to a read-only user, assistants filtered, each user's store
items under a namespace the handler rewrites) loaded from langgraph.json as
``serve --config`` loads it; every route allowed, refused and filtered as the Agent Server
applies those handlers, and every run the authenticated user's turn."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.cli.graph_app import create_graph_app
from relay.cli.langgraph_auth import load_project_auth
from relay.cli.langgraph_config import read_config
from tests.auth.langgraph_project import bearer, write_project
from tests.conftest import LiveServer, LiveServers, iter_frames

AUTH = """\
from langgraph_sdk import Auth

auth = Auth()

USERS = {
    "alice-token": {
        "identity": "alice",
        "permissions": ["threads:write", "threads:delete", "assistants:read", "store:write"],
    },
    "bob-token": {"identity": "bob", "permissions": ["threads:write", "store:write"]},
    "carol-token": {"identity": "carol", "permissions": []},
}


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    scheme, _, token = (authorization or "").partition(" ")
    user = USERS.get(token) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Unknown token.")
    return user


@auth.on.threads
async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> dict:
    # LangGraph's docs: stamp the owner on what is created, see only your own
    filters = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    metadata.update(filters)
    return filters


@auth.on.threads.create_run
async def create_run(ctx: Auth.types.AuthContext, value: dict) -> dict:
    if "threads:write" not in ctx.permissions:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail="Read-only users start no runs."
        )
    value.setdefault("metadata", {})["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.threads.delete
async def delete_thread(ctx: Auth.types.AuthContext, value: dict) -> bool | dict:
    if "threads:delete" not in ctx.permissions:
        return False
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def assistants(ctx: Auth.types.AuthContext, value: dict) -> dict:
    if "assistants:read" in ctx.permissions:
        return {"created_by": "system"}
    if "threads:write" in ctx.permissions:
        return {"owner": ctx.user.identity}  # matches no assistant: all hidden
    raise Auth.exceptions.HTTPException(status_code=403, detail="No assistants for you.")


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: dict) -> None:
    value["namespace"] = (ctx.user.identity, *(value.get("namespace") or ()))


@auth.on.store.put
async def put_own(ctx: Auth.types.AuthContext, value: dict) -> bool:
    if "store:write" not in ctx.permissions:
        return False
    value["namespace"] = (ctx.user.identity, *value["namespace"])
    return True


@auth.on.store.search
async def search_own(ctx: Auth.types.AuthContext, value: dict) -> dict:
    value["namespace"] = (ctx.user.identity, *(value.get("namespace") or ()))
    return {"shared": True}
"""

ALICE = bearer("alice-token")
BOB = bearer("bob-token")
CAROL = bearer("carol-token")  # no permissions: reads, never runs, sees no assistants
NOBODY = bearer("nobody's-token")
HELLO = {"messages": [{"role": "user", "content": "hello"}]}


class Api:
    """The server's Agent Server API over one httpx client: ``call(user, method, path)``."""

    def __init__(self, client: httpx.Client, url: str) -> None:
        self.client = client
        self.url = url

    def call(
        self, user: dict[str, str], method: str, path: str, json: Any = None, **kw: Any
    ) -> httpx.Response:
        return self.client.request(method, f"{self.url}{path}", headers=user, json=json, **kw)

    def thread(self, user: dict[str, str], **body: Any) -> dict[str, Any]:
        response = self.call(user, "POST", "/threads", body)
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found

    def wait(self, user: dict[str, str], thread_id: str, **body: Any) -> httpx.Response:
        body.setdefault("assistant_id", "support_agent")
        return self.call(user, "POST", f"/threads/{thread_id}/runs/wait", body)

    def stream(
        self, user: dict[str, str], thread_id: str, **body: Any
    ) -> tuple[int, list[tuple[str | None, Any]], Any]:
        """The status and, for a 200, the (event, data) of each frame; else the body."""
        body.setdefault("assistant_id", "support_agent")
        with self.client.stream(
            "POST", f"{self.url}/threads/{thread_id}/runs/stream", headers=user, json=body
        ) as response:
            if response.status_code != 200:
                return response.status_code, [], response.read() and response.json()
            return 200, [(f.event, f.json) for f in iter_frames(response)], None


@pytest.fixture
def api(
    tmp_path: Path, app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client
) -> Iterator[Api]:
    config = write_project(tmp_path / "project", AUTH)
    graphs = read_config(config).graphs
    auth = load_project_auth(config)
    app = create_graph_app(graphs, app_env, base=config.parent, auth=auth)
    server: LiveServer = live_servers.start(app)
    yield Api(client, server.url)


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()["error"]
    return response.status_code, body["code"], body["message"]


def missing(response: httpx.Response) -> bool:
    """A 404: what the Agent Server answers for a thread a filter does not match."""
    return response.status_code == 404 and response.json()["error"]["code"] == "unknown_thread"


#: (method, path, body) of every Agent Server route that asks who is asking
ROUTES: list[tuple[str, str, Any]] = [
    ("POST", "/assistants/search", {}),
    ("GET", "/assistants/support_agent", None),
    ("GET", "/assistants/support_agent/graph", None),
    ("GET", "/assistants/support_agent/schemas", None),
    ("POST", "/threads", {}),
    ("POST", "/threads/search", {}),
    ("POST", "/threads/count", {}),
    ("GET", "/threads/t-1", None),
    ("PATCH", "/threads/t-1", {"metadata": {}}),
    ("DELETE", "/threads/t-1", None),
    ("GET", "/threads/t-1/state", None),
    ("POST", "/threads/t-1/history", {}),
    ("POST", "/threads/t-1/runs/stream", {"assistant_id": "support_agent", "input": HELLO}),
    ("POST", "/threads/t-1/runs/wait", {"assistant_id": "support_agent", "input": HELLO}),
    ("POST", "/threads/t-1/runs", {"assistant_id": "support_agent", "input": HELLO}),
    ("GET", "/threads/t-1/runs", None),
    ("GET", "/threads/t-1/runs/r-1", None),
    ("GET", "/threads/t-1/runs/r-1/join", None),
    ("GET", "/threads/t-1/runs/r-1/stream", None),
    ("POST", "/threads/t-1/runs/r-1/cancel", None),
    ("POST", "/threads/t-1/commands", {"id": 1, "method": "run.start", "params": {}}),
    ("POST", "/threads/t-1/stream/events", {}),
    ("PUT", "/store/items", {"namespace": ["n"], "key": "k", "value": {}}),
    ("GET", "/store/items?namespace=n&key=k", None),
    ("DELETE", "/store/items", {"namespace": ["n"], "key": "k"}),
    ("POST", "/store/items/search", {"namespace_prefix": []}),
    ("POST", "/store/namespaces", {}),
]


def test_every_agent_server_route_asks_who_is_asking(api: Api) -> None:
    for method, path, body in ROUTES:
        for user in ({}, NOBODY):
            response = api.call(user, method, path, body)
            assert error_of(response) == (401, "unauthorized", "Unknown token."), (method, path)
            assert response.headers["www-authenticate"].startswith("Bearer")


def test_threads_are_their_owners_as_the_handlers_say(api: Api) -> None:
    made = api.thread(ALICE, metadata={"topic": "tea"})
    thread_id = made["thread_id"]
    # threads.create's handler stamped the owner into the metadata it was given
    assert made["metadata"] == {"topic": "tea", "owner": "alice"}
    assert api.call(ALICE, "GET", f"/threads/{thread_id}").json()["metadata"] == made["metadata"]
    bobs = api.thread(BOB)
    assert bobs["metadata"] == {"owner": "bob"}

    # threads.read / update: a thread the filter does not match does not exist (404)
    for method, path, body in [
        ("GET", f"/threads/{thread_id}", None),
        ("GET", f"/threads/{thread_id}/state", None),
        ("POST", f"/threads/{thread_id}/history", {}),
        ("PATCH", f"/threads/{thread_id}", {"metadata": {"topic": "coffee"}}),
    ]:
        assert missing(api.call(BOB, method, path, body)), (method, path)
        assert api.call(ALICE, method, path, body).status_code == 200, (method, path)
    assert api.call(ALICE, "GET", f"/threads/{thread_id}").json()["metadata"] == {
        "topic": "coffee",
        "owner": "alice",
    }
    # threads.create of an id the filter does not match: a 409, as the Agent Server says
    taken = api.call(BOB, "POST", "/threads", {"thread_id": thread_id, "if_exists": "do_nothing"})
    assert taken.status_code == 409

    # threads.search (and count): each user lists their own
    def listed(user: dict[str, str]) -> set[str]:
        return {t["thread_id"] for t in api.call(user, "POST", "/threads/search", {}).json()}

    assert listed(ALICE) == {thread_id}
    assert listed(BOB) == {bobs["thread_id"]}
    assert api.call(ALICE, "POST", "/threads/count", {}).json() == 1
    assert listed(CAROL) == set() and api.call(CAROL, "POST", "/threads/count", {}).json() == 0
    # the update handler stamps the owner on the metadata it is given, as on create:
    # a patch does not give the thread away
    patched = api.call(ALICE, "PATCH", f"/threads/{thread_id}", {"metadata": {"owner": "bob"}})
    assert patched.json()["metadata"] == {"topic": "coffee", "owner": "alice"}
    assert missing(api.call(BOB, "GET", f"/threads/{thread_id}"))


def test_delete_is_refused_or_filtered(api: Api) -> None:
    alices = api.thread(ALICE)["thread_id"]
    bobs = api.thread(BOB)["thread_id"]
    # threads.delete said no (bob has no threads:delete): 403, whatever the thread
    for thread_id in (bobs, alices):
        refused = api.call(BOB, "DELETE", f"/threads/{thread_id}")
        status, code, message = error_of(refused)
        assert (status, code) == (403, "forbidden")
        assert message.endswith("handler of threads.delete said no."), message
    # alice may delete, but only what her filter matches
    assert missing(api.call(ALICE, "DELETE", f"/threads/{bobs}"))
    assert api.call(BOB, "GET", f"/threads/{bobs}").status_code == 200
    assert api.call(ALICE, "DELETE", f"/threads/{alices}").status_code == 204
    assert missing(api.call(ALICE, "GET", f"/threads/{alices}"))


def test_runs_are_create_run_of_their_thread_and_their_users_turns(api: Api) -> None:
    thread_id = api.thread(ALICE)["thread_id"]
    # threads.create_run: a read-only user starts no run (the handler's own 403)
    refused = api.wait(CAROL, thread_id, input=HELLO)
    assert error_of(refused) == (403, "forbidden", "Read-only users start no runs.")
    assert api.stream(CAROL, thread_id, input=HELLO)[0] == 403
    # its filter: another user's thread does not exist, for a wait or a stream
    assert missing(api.wait(BOB, thread_id, input=HELLO))
    status, _frames, body = api.stream(BOB, thread_id, input=HELLO)
    assert (status, body["error"]["code"]) == (404, "unknown_thread")

    answered = api.wait(ALICE, thread_id, input=HELLO)
    assert answered.status_code == 200, answered.text
    assert answered.json()["messages"][-1]["content"] == "You asked: hello"
    status, frames, _ = api.stream(ALICE, thread_id, input=HELLO)
    assert status == 200 and frames[0][0] == "metadata" and frames[-1][0] == "values"
    run_id = frames[0][1]["run_id"]

    # the run is alice's turn: the turn API shows it to her, to nobody else
    turn = api.call(ALICE, "GET", f"/turns/{run_id}")
    assert turn.status_code == 200 and turn.json()["thread_id"] == thread_id
    assert api.call(BOB, "GET", f"/turns/{run_id}").status_code == 404
    assert {t["turn_id"] for t in api.call(BOB, "GET", "/turns").json()["turns"]} == set()
    # and it acts as her, with the keys a graph under the Agent Server reads
    who = api.wait(ALICE, thread_id, input={"messages": [{"role": "user", "content": "Who am I?"}]})
    permissions = ["threads:write", "threads:delete", "assistants:read", "store:write"]
    assert who.json()["messages"][-1]["content"] == (
        f"You are alice (alice, alice, {permissions}, alice)."
    )


def test_a_run_and_its_streams_are_read_and_cancelled_as_its_thread_is(api: Api) -> None:
    thread_id = api.thread(ALICE)["thread_id"]
    started = api.call(
        ALICE,
        "POST",
        f"/threads/{thread_id}/runs",
        {"assistant_id": "support_agent", "input": HELLO},
    )
    assert started.status_code == 200, started.text
    run = f"/threads/{thread_id}/runs/{started.json()['run_id']}"
    assert api.call(ALICE, "GET", f"{run}/join").json()["messages"][-1]["content"] == (
        "You asked: hello"
    )
    # threads.read: another user's thread does not exist, nor do its runs and streams
    for method, path, body in [
        ("GET", f"/threads/{thread_id}/runs", None),
        ("GET", run, None),
        ("GET", f"{run}/join", None),
        ("GET", f"{run}/stream", None),
        ("POST", f"{run}/cancel", None),  # threads.update
        ("POST", f"/threads/{thread_id}/stream/events", {"channels": ["values"]}),
    ]:
        assert missing(api.call(BOB, method, path, body)), (method, path)
    assert [r["status"] for r in api.call(ALICE, "GET", f"/threads/{thread_id}/runs").json()] == [
        "success"
    ]
    frames = api.call({**ALICE, "Last-Event-ID": "-1"}, "GET", f"{run}/stream")
    assert frames.status_code == 200 and "event: values" in frames.text
    # the newer protocol's command on another user's thread: no such thread
    refused = api.call(
        BOB,
        "POST",
        f"/threads/{thread_id}/commands",
        {
            "id": 1,
            "method": "run.start",
            "params": {"assistant_id": "support_agent", "input": HELLO},
        },
    )
    assert refused.status_code == 404, refused.text


def test_a_run_that_creates_its_thread_writes_the_handlers_metadata(api: Api) -> None:
    thread_id = str(uuid.uuid4())
    made = api.wait(
        ALICE, thread_id, input=HELLO, if_not_exists="create", metadata={"source": "test"}
    )
    assert made.status_code == 200, made.text
    metadata = api.call(ALICE, "GET", f"/threads/{thread_id}").json()["metadata"]
    assert metadata["owner"] == "alice" and metadata["source"] == "test"
    assert metadata["graph_id"] == "support_agent"
    assert missing(api.call(BOB, "GET", f"/threads/{thread_id}"))
    assert missing(api.wait(BOB, thread_id, input=HELLO, if_not_exists="create"))


def test_a_resume_is_create_run_of_its_thread(api: Api) -> None:
    thread_id = api.thread(ALICE)["thread_id"]
    paused = api.wait(
        ALICE, thread_id, input={"messages": [{"role": "user", "content": "refund order 2001"}]}
    )
    assert paused.json()["__interrupt__"][0]["value"] == {
        "question": "Refund $20.00 on order 2001?"
    }
    resume = {"command": {"resume": {"approved": True}}}
    assert missing(api.wait(BOB, thread_id, **resume))
    assert api.wait(CAROL, thread_id, **resume).status_code == 403
    done = api.wait(ALICE, thread_id, **resume)
    assert done.json()["messages"][-1]["content"] == "Done: I refunded $20.00 on order 2001."


def test_a_thread_started_on_chat_is_its_users_here_too(api: Api) -> None:
    """A thread /chat started has no metadata of its own: its owner is what a filter reads."""
    answer = api.call(ALICE, "POST", "/chat", {"message": "hello"}).json()
    thread_id = answer["thread_id"]
    assert api.call(ALICE, "GET", f"/threads/{thread_id}/state").status_code == 200
    assert missing(api.call(BOB, "GET", f"/threads/{thread_id}/state"))
    assert missing(api.wait(BOB, thread_id, input=HELLO))
    assert api.wait(ALICE, thread_id, input=HELLO).status_code == 200


def test_assistants_are_read_and_searched_through_their_handler(api: Api) -> None:
    found = api.call(ALICE, "POST", "/assistants/search", {}).json()
    assert sorted(a["graph_id"] for a in found) == ["other", "support_agent"]
    assistant_id = found[0]["assistant_id"]
    for path in ("", "/graph", "/schemas"):
        assert api.call(ALICE, "GET", f"/assistants/{assistant_id}{path}").status_code == 200
        # bob's filter matches no assistant: none is there for him
        hidden = api.call(BOB, "GET", f"/assistants/{assistant_id}{path}")
        assert error_of(hidden)[:2] == (404, "unknown_assistant"), path
        refused = api.call(CAROL, "GET", f"/assistants/{assistant_id}{path}")
        assert error_of(refused) == (403, "forbidden", "No assistants for you.")
    assert api.call(BOB, "POST", "/assistants/search", {}).json() == []
    assert error_of(api.call(CAROL, "POST", "/assistants/search", {}))[0] == 403
    # yet bob runs a graph: the Agent Server does not ask assistants.read of the system's
    thread_id = api.thread(BOB)["thread_id"]
    assert api.wait(BOB, thread_id, input=HELLO).status_code == 200


def test_the_store_handlers_rewrite_refuse_and_filter(api: Api) -> None:
    def put(user: dict[str, str], key: str, value: dict[str, Any]) -> httpx.Response:
        return api.call(
            user, "PUT", "/store/items", {"namespace": ["notes"], "key": key, "value": value}
        )

    assert put(ALICE, "a", {"text": "tea", "shared": True}).status_code == 204
    assert put(ALICE, "b", {"text": "coffee", "shared": False}).status_code == 204
    assert put(BOB, "a", {"text": "bob's", "shared": True}).status_code == 204
    # store.put said no (carol has no store:write)
    refused = put(CAROL, "a", {"text": "carol's"})
    status, code, message = error_of(refused)
    assert (status, code) == (403, "forbidden")
    assert message.endswith("handler of store.put said no."), message

    # the handler rewrote each namespace under its user
    def get(user: dict[str, str], namespace: str, key: str) -> httpx.Response:
        return api.call(user, "GET", "/store/items", params={"namespace": namespace, "key": key})

    item = get(ALICE, "notes", "a").json()
    assert item["namespace"] == ["alice", "notes"] and item["value"]["text"] == "tea"
    assert get(BOB, "notes", "a").json()["value"]["text"] == "bob's"
    # bob.alice.notes: nothing there (LangGraph's 200 null, the SDKs' None)
    assert get(BOB, "alice.notes", "a").json() is None
    assert get(CAROL, "notes", "a").json() is None

    # store.search: the handler's filter ANDs with the search's own
    def search(user: dict[str, str], **body: Any) -> list[Any]:
        found = api.call(user, "POST", "/store/items/search", {"namespace_prefix": [], **body})
        assert found.status_code == 200, found.text
        return sorted(i["value"]["text"] for i in found.json()["items"])

    assert search(ALICE) == ["tea"]  # "coffee" is not shared
    assert search(ALICE, filter={"text": "coffee"}) == []
    assert search(ALICE, filter={"shared": False}) == []  # both cannot hold
    assert search(BOB) == ["bob's"]

    def namespaces(user: dict[str, str]) -> list[Any]:
        return api.call(user, "POST", "/store/namespaces", {}).json()["namespaces"]

    assert namespaces(ALICE) == [["alice", "notes"]]
    assert namespaces(BOB) == [["bob", "notes"]]
    assert namespaces(CAROL) == []

    # store.delete (the store's handler): bob's delete is of bob's item
    gone = api.call(BOB, "DELETE", "/store/items", {"namespace": ["notes"], "key": "a"})
    assert gone.status_code == 204
    assert get(BOB, "notes", "a").json() is None
    assert get(ALICE, "notes", "a").json()["value"]["text"] == "tea"


def serve_with(
    tmp_path: Path,
    app_env: dict[str, str],
    live_servers: LiveServers,
    client: httpx.Client,
    more: str,
) -> Api:
    """The tests' project with ``more`` handlers after AUTH's (AUTH's ``create_run``
    handler left out when ``more`` has its own: a key takes one)."""
    auth = AUTH
    if "@auth.on.threads.create_run" in more:
        start = auth.index("@auth.on.threads.create_run")
        auth = auth[:start] + auth[auth.index("@auth.on.threads.delete") :]
    config = write_project(tmp_path / "project", auth + more)
    app = create_graph_app(
        read_config(config).graphs, app_env, base=config.parent, auth=load_project_auth(config)
    )
    return Api(client, live_servers.start(app).url)


PROJECTS = """

@auth.on.threads.create
async def create_in_project(ctx: Auth.types.AuthContext, value: dict) -> dict:
    value.setdefault("metadata", {}).update(owner=ctx.user.identity, project="apollo")
    return {"owner": ctx.user.identity}


@auth.on(resources="threads", actions=["read", "search"])
async def read_project(ctx: Auth.types.AuthContext, value: dict) -> dict:
    return {"$and": [{"owner": ctx.user.identity}, {"project": {"$eq": "apollo"}}]}


@auth.on.threads.create_run
async def run_in_project(ctx: Auth.types.AuthContext, value: dict) -> dict:
    return {"project": "apollo"}
"""


def test_a_filter_beyond_ownership_hides_the_users_own_threads(
    tmp_path: Path, app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client
) -> None:
    """The relay keeps a thread its owner's; a read filter narrows that further."""
    api = serve_with(tmp_path, app_env, live_servers, client, PROJECTS)
    kept = api.thread(ALICE)["thread_id"]
    moved = api.thread(ALICE)
    assert moved["metadata"] == {"owner": "alice", "project": "apollo"}
    # threads.update (the resource's handler: owner only) lets her move it out
    patch = {"metadata": {"project": "gemini"}}
    assert api.call(ALICE, "PATCH", f"/threads/{moved['thread_id']}", patch).status_code == 200
    for path in ("", "/state"):
        assert api.call(ALICE, "GET", f"/threads/{kept}{path}").status_code == 200
        assert missing(api.call(ALICE, "GET", f"/threads/{moved['thread_id']}{path}")), path
    assert missing(api.call(ALICE, "POST", f"/threads/{moved['thread_id']}/history", {}))
    found = api.call(ALICE, "POST", "/threads/search", {}).json()
    assert [t["thread_id"] for t in found] == [kept]
    assert api.call(ALICE, "POST", "/threads/count", {}).json() == 1
    # threads.create_run's filter: a run on it too
    assert missing(api.wait(ALICE, moved["thread_id"], input=HELLO))
    assert api.wait(ALICE, kept, input=HELLO).status_code == 200


def test_a_filter_the_relay_cannot_apply_fails_closed(
    tmp_path: Path, app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client
) -> None:
    """An operator LangGraph does not define refuses the request, never lets it through."""
    odd = (
        "\n\n@auth.on.threads.read\n"
        "async def odd(ctx: Auth.types.AuthContext, value: dict) -> dict:\n"
        '    return {"owner": {"$regex": ".*"}}\n'
    )
    api = serve_with(tmp_path, app_env, live_servers, client, odd)
    thread_id = api.thread(ALICE)["thread_id"]
    refused = api.call(ALICE, "GET", f"/threads/{thread_id}")
    assert error_of(refused)[:2] == (500, "auth_filter_unsupported")
    assert "'$regex'" in error_of(refused)[2]
