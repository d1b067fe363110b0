"""The Agent Server API's threads and store (relay/http/agent_server_threads.py,
relay/http/agent_server_store.py), driven by LangGraph's own Python client
(``langgraph_sdk``) against span-relay on a real uvicorn, on SQLite and on PostgreSQL:
thread metadata and times, search, count, update, delete, two users apart; the store's
items, search and namespaces."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langgraph.graph import END, START, StateGraph
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError
from typing_extensions import TypedDict

from relay import GraphAgent, Relay
from tests.agent_server_graphs import agent_server_app
from tests.conftest import LiveServer, LiveServers

SECRET = "proxy-secret-0123456789"
CHAT_ASSISTANT = str(uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "chat"))


#: the gates the gated graph's runs wait on, by name (the server runs in this process)
GATES: dict[str, threading.Event] = {}


class Gate(TypedDict, total=False):
    gate: str
    done: bool


def wait_at_gate(state: Gate) -> dict[str, Any]:
    """Runs until the test opens the gate named in the input (a minute at most)."""
    GATES[state["gate"]].wait(60)
    return {"done": True}


def gated_app(env: dict[str, str]) -> FastAPI:
    """One graph, ``gated``, whose run goes on until the test lets it end."""
    builder = StateGraph(Gate)
    builder.add_node("wait", wait_at_gate)
    builder.add_edge(START, "wait")
    builder.add_edge("wait", END)
    relay = Relay.from_env(dict(env))
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(builder.compile(), name="gated"))
    return app


@pytest.fixture(params=["sqlite", "postgres"])
def serve(
    request: pytest.FixtureRequest, app_env: dict[str, str], live_servers: LiveServers
) -> Callable[..., LiveServer]:
    """``serve(**env)``: the three graphs on one relay (``serve(gated=True, ...)``: the
    gated graph), its records, checkpoints and store in SQLite or in PostgreSQL."""
    backend: dict[str, str] = {}
    if request.param == "postgres":
        backend["RELAY_STORE"] = request.getfixturevalue("postgres_url")

    def make(gated: bool = False, **env: str) -> LiveServer:
        build = gated_app if gated else agent_server_app
        return live_servers.start(build({**app_env, **backend, **env}))

    return make


def proxied(server: LiveServer, user: str) -> SyncLangGraphClient:
    return get_sync_client(
        url=server.url, headers={"X-Forwarded-User": user, "X-Relay-Proxy-Secret": SECRET}
    )


def ids_of(threads: list[Any]) -> list[str]:
    return [t["thread_id"] for t in threads]


def test_thread_metadata_search_update_delete(serve: Callable[..., LiveServer]) -> None:
    server = serve()
    sdk = get_sync_client(url=server.url)
    made = sdk.threads.create(metadata={"team": "a", "tags": ["x", "y"]}, graph_id="chat")
    thread_id = made["thread_id"]
    assert made["metadata"] == {"team": "a", "tags": ["x", "y"], "graph_id": "chat"}
    assert made["status"] == "idle" and made["created_at"] == made["updated_at"]
    assert sdk.threads.get(thread_id)["metadata"] == made["metadata"]
    # do_nothing gives the thread back as it is; raise is a 409
    again = sdk.threads.create(thread_id=thread_id, if_exists="do_nothing", metadata={"b": 1})
    assert again["metadata"] == made["metadata"]
    with pytest.raises(ConflictError):
        sdk.threads.create(thread_id=thread_id, metadata={"b": 1})

    second = sdk.threads.create(metadata={"team": "b"})["thread_id"]
    third = sdk.threads.create(metadata={"team": "a", "n": 3})["thread_id"]
    # a run writes its graph and assistant into the thread's metadata, as langgraph-api
    sdk.runs.wait(second, "chat", input={"messages": [{"role": "user", "content": "hi"}]})
    ran = sdk.threads.get(second)
    assert ran["metadata"] == {"team": "b", "graph_id": "chat", "assistant_id": CHAT_ASSISTANT}
    assert ran["updated_at"] > ran["created_at"]
    assert ran["values"]["messages"][-1]["type"] == "ai"

    assert ids_of(sdk.threads.search(metadata={"team": "a"})) == [third, thread_id]
    assert ids_of(sdk.threads.search(metadata={"tags": ["y"]})) == [thread_id]
    assert ids_of(sdk.threads.search(metadata={"graph_id": "chat"})) == [second, thread_id]
    oldest_first = sdk.threads.search(sort_by="created_at", sort_order="asc")
    assert ids_of(oldest_first) == [thread_id, second, third]
    # the run on the second thread came after the third was made
    assert ids_of(sdk.threads.search(sort_by="updated_at", limit=1)) == [second]
    assert ids_of(sdk.threads.search(sort_by="created_at", limit=1, offset=1)) == [second]
    assert ids_of(sdk.threads.search(ids=[second, third], sort_order="asc")) == [second, third]
    assert ids_of(sdk.threads.search(status="idle", metadata={"team": "b"})) == [second]
    assert sdk.threads.search(status="busy") == []
    picked = sdk.threads.search(ids=[second], select=["thread_id", "metadata"])
    assert picked == [{"thread_id": second, "metadata": ran["metadata"]}]
    assert sdk.threads.count(metadata={"team": "a"}) == 2
    assert sdk.threads.count() == 3

    updated = sdk.threads.update(thread_id, metadata={"team": "c", "n": 1})
    assert updated["metadata"] == {"team": "c", "tags": ["x", "y"], "graph_id": "chat", "n": 1}
    assert updated["updated_at"] > made["updated_at"]
    assert ids_of(sdk.threads.search(metadata={"team": "a"})) == [third]
    with pytest.raises(NotFoundError):
        sdk.threads.update(str(uuid.uuid4()), metadata={"a": 1})

    sdk.threads.delete(second)
    for read in (sdk.threads.get, sdk.threads.get_state, sdk.threads.delete):
        with pytest.raises(NotFoundError):
            read(second)
    assert second not in ids_of(sdk.threads.search())
    # the run's turn record stays: the trace of what happened
    runs = httpx.get(f"{server.url}/turns", params={"thread_id": second}).json()
    assert len(runs["turns"]) == 1
    # its owner may make it again: a new thread, its checkpoints gone
    remade = sdk.threads.create(thread_id=second, metadata={"again": True})
    assert remade["metadata"] == {"again": True} and remade["values"] == {}


def test_a_thread_with_a_running_run_is_not_deleted(serve: Callable[..., LiveServer]) -> None:
    server = serve(gated=True)
    sdk = get_sync_client(url=server.url)
    thread_id = sdk.threads.create()["thread_id"]
    name = str(uuid.uuid4())
    gate = GATES[name] = threading.Event()
    stream = iter(sdk.runs.stream(thread_id, "gated", input={"gate": name}))
    assert next(stream).event == "metadata"  # the run's turn is running from here
    assert sdk.threads.get(thread_id)["status"] == "busy"
    with pytest.raises(ConflictError):
        sdk.threads.delete(thread_id)
    gate.set()
    rest = list(stream)
    assert rest[-1].data == {"gate": name, "done": True}
    assert sdk.threads.get(thread_id)["status"] == "idle"
    sdk.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        sdk.threads.get(thread_id)


def test_two_users_see_only_their_threads_and_items(serve: Callable[..., LiveServer]) -> None:
    server = serve(RELAY_AUTH="proxy", RELAY_PROXY_SECRET=SECRET)
    alice, bob = proxied(server, "alice"), proxied(server, "bob")
    mine = alice.threads.create(metadata={"kind": "x"})["thread_id"]
    theirs = bob.threads.create(metadata={"kind": "x"})["thread_id"]
    assert ids_of(alice.threads.search(metadata={"kind": "x"})) == [mine]
    assert ids_of(bob.threads.search()) == [theirs]
    assert bob.threads.count() == 1
    with pytest.raises(NotFoundError):
        bob.threads.update(mine, metadata={"taken": True})
    with pytest.raises(NotFoundError):
        bob.threads.delete(mine)
    with pytest.raises(ConflictError):
        bob.threads.create(thread_id=mine)
    assert alice.threads.get(mine)["metadata"] == {"kind": "x"}

    alice.store.put_item(["alice", "memories"], "k1", {"text": "mine"})
    with pytest.raises(httpx.HTTPStatusError) as refused:
        bob.store.put_item(["alice", "memories"], "k2", {"text": "not mine"})
    assert refused.value.response.status_code == 403
    with pytest.raises(httpx.HTTPStatusError) as unread:
        bob.store.get_item(["alice", "memories"], "k1")
    assert unread.value.response.status_code == 403
    bob.store.put_item(["bob", "memories"], "k1", {"text": "bob's"})
    # a search or a listing without a prefix is one under the caller's own
    assert [i["value"] for i in bob.store.search_items([])["items"]] == [{"text": "bob's"}]
    assert alice.store.list_namespaces()["namespaces"] == [["alice", "memories"]]


def test_store_items_round_trip_search_and_namespaces(serve: Callable[..., LiveServer]) -> None:
    server = serve()
    sdk = get_sync_client(url=server.url)
    info = httpx.get(f"{server.url}/info").json()
    assert info["flags"]["store"] is True
    sdk.store.put_item(["users", "u1", "notes"], "a", {"text": "tea", "n": 1})
    sdk.store.put_item(["users", "u1", "notes"], "b", {"text": "coffee", "n": 2})
    sdk.store.put_item(["users", "u2", "prefs"], "c", {"text": "dark", "n": 1})
    item = sdk.store.get_item(["users", "u1", "notes"], "a")
    assert item["namespace"] == ["users", "u1", "notes"] and item["key"] == "a"
    assert item["value"] == {"text": "tea", "n": 1}
    assert item["created_at"] and item["updated_at"]
    sdk.store.put_item(["users", "u1", "notes"], "a", {"text": "green tea", "n": 1})
    assert sdk.store.get_item(["users", "u1", "notes"], "a")["value"]["text"] == "green tea"

    found = sdk.store.search_items(["users", "u1"])["items"]
    assert sorted(i["key"] for i in found) == ["a", "b"]
    assert all("score" in i for i in found)
    by_filter = sdk.store.search_items(["users"], filter={"n": 1})["items"]
    assert sorted(i["key"] for i in by_filter) == ["a", "c"]
    assert len(sdk.store.search_items(["users"], limit=1, offset=1)["items"]) == 1

    names = sdk.store.list_namespaces(prefix=["users"])["namespaces"]
    assert sorted(names) == [["users", "u1", "notes"], ["users", "u2", "prefs"]]
    assert sdk.store.list_namespaces(prefix=["users"], max_depth=2)["namespaces"] in (
        [["users", "u1"], ["users", "u2"]],
        [["users", "u2"], ["users", "u1"]],
    )
    assert sdk.store.list_namespaces(suffix=["prefs"])["namespaces"] == [["users", "u2", "prefs"]]

    sdk.store.delete_item(["users", "u1", "notes"], "a")
    assert sdk.store.get_item(["users", "u1", "notes"], "a") is None  # LangGraph's 200 null
    bad = httpx.put(f"{server.url}/store/items", json={"namespace": [], "key": "k", "value": {}})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_namespace"
