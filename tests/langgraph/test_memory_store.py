"""Long-term memory for every graph the relay serves (relay/langgraph/store.py): a node's
``get_store()`` / ``runtime.store`` is the relay's LangGraph store (SQLite under
RELAY_DATA_DIR, PostgreSQL with RELAY_STORE, its tables in the connection's schema),
shared by a user's threads; semantic search with ``index``; TTL swept; a graph compiled
with its own store keeps it. Served through the relay on a real uvicorn."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore

from relay import ConfigError, GraphAgent, Relay, RelaySettings, open_store
from relay.langgraph.store import sqlite_can_index, store_options
from tests.conftest import LiveServer, LiveServers, postgres_admin

#: the deterministic embeddings of the semantic-search test: a count of each word
VOCAB = ("coffee", "tea", "dog", "cat", "rain", "sun")


def embed(texts: list[str]) -> list[list[float]]:
    """Each text as the counts of VOCAB's words in it (no network, no model)."""
    out = []
    for text in texts:
        words = re.findall(r"[a-z]+", text.lower())
        vector = [float(words.count(word)) for word in VOCAB]
        out.append(vector if any(vector) else [0.01] * len(VOCAB))
    return out


def memory_graph(name: str = "memory", store: Any = None) -> Any:
    """``remember X`` puts X in the user's memories; anything else answers with every
    memory the user has, whatever the thread (the namespace is the config's user)."""

    async def recall(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        store = get_store()
        namespace = ("memories", config["configurable"]["user_id"])
        text = str(state["messages"][-1].content)
        if text.startswith("remember "):
            await store.aput(namespace, uuid.uuid4().hex, {"text": text.removeprefix("remember ")})
            return {"messages": [AIMessage("noted")]}
        items = await store.asearch(namespace, limit=50)
        held = sorted(item.value["text"] for item in items)
        return {"messages": [AIMessage("; ".join(held) or "nothing yet")]}

    builder = StateGraph(MessagesState)
    builder.add_node("recall", recall)
    builder.add_edge(START, "recall")
    return builder.compile(name=name, store=store)


def search_graph() -> Any:
    """``find Q``: the text of the memory nearest to Q (``runtime.store``, semantic)."""

    async def find(state: MessagesState, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        query = str(state["messages"][-1].content).removeprefix("find ")
        found = await runtime.store.asearch(("notes",), query=query, limit=1)
        return {"messages": [AIMessage(found[0].value["text"] if found else "none")]}

    builder = StateGraph(MessagesState)
    builder.add_node("find", find)
    builder.add_edge(START, "find")
    return builder.compile(name="search")


def user_config(headers: Mapping[str, str]) -> dict[str, Any]:
    return {"user_id": headers.get("x-user", "anonymous")}


def serve(
    live_servers: LiveServers,
    env: dict[str, str],
    graph: Any,
    store: Mapping[str, Any] | None = None,
) -> LiveServer:
    relay = Relay.from_env(env, store=store)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(graph, name=graph.name, config_of=user_config))
    return live_servers.start(app)


def on_loop(server: LiveServer, work: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine on the server's loop (where its store lives) and return its result."""
    assert server.loop is not None
    return asyncio.run_coroutine_threadsafe(work(), server.loop).result(timeout=30)


def chat(client: httpx.Client, server: LiveServer, message: str, user: str) -> dict[str, Any]:
    response = client.post(
        f"{server.url}/chat", json={"message": message}, headers={"x-user": user}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "answered", body
    return body


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as c:
        yield c


def remembers_across_threads(server: LiveServer, client: httpx.Client) -> None:
    first = chat(client, server, "remember I take my coffee black", "ada")
    assert first["answer"] == "noted"
    chat(client, server, "remember my dog is called Rex", "ada")
    chat(client, server, "remember I like tea", "bob")
    second = chat(client, server, "what do you know about me?", "ada")
    assert second["thread_id"] != first["thread_id"]  # another thread, the same user
    assert second["answer"] == "I take my coffee black; my dog is called Rex"
    assert chat(client, server, "and me?", "bob")["answer"] == "I like tea"
    assert chat(client, server, "hello", "carol")["answer"] == "nothing yet"


def test_a_node_remembers_across_threads_on_sqlite(
    app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client
) -> None:
    server = serve(live_servers, app_env, memory_graph())
    remembers_across_threads(server, client)
    store = server.relay.graph_store
    assert type(store).__name__ == "AsyncSqliteStore"
    held = on_loop(server, lambda: store.asearch(("memories", "ada")))
    assert len(held) == 2
    ready = client.get(f"{server.url}/readyz")
    assert ready.status_code == 200, ready.text
    # the memories outlive the process: a new server on the same RELAY_DATA_DIR
    server.stop()
    again = serve(live_servers, app_env, memory_graph())
    assert chat(client, again, "still there?", "bob")["answer"] == "I like tea"


def test_a_node_remembers_across_threads_on_postgres(
    app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client, postgres_url: str
) -> None:
    server = serve(live_servers, {**app_env, "RELAY_STORE": postgres_url}, memory_graph())
    remembers_across_threads(server, client)
    assert type(server.relay.graph_store).__name__ == "AsyncPostgresStore"
    # the URL's search_path: the test's schema, then another span-relay's older tables
    # (tests/conftest.py, stale_schema), among them a `store` of its own
    schema, stale = unquote(postgres_url).rpartition("search_path=")[2].split(",")
    base = postgres_url.partition("?")[0]
    with postgres_admin(base) as admin:
        rows = admin.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'store'"
        ).fetchall()
        count = admin.execute(f'SELECT count(*) FROM "{schema}".store').fetchone()
        untouched = admin.execute(f'SELECT count(*) FROM "{stale}".store').fetchone()
    # in the URL's first schema; the other's older table is still there, still empty
    assert sorted(r[0] for r in rows) == sorted([schema, stale])
    assert count is not None and count[0] == 3
    assert untouched == (0,)


INDEX = {"dims": len(VOCAB), "embed": embed, "fields": ["text"]}


def pgvector_available(url: str) -> bool:
    with postgres_admin(url.partition("?")[0]) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    return bool(row and row[0])


def index_backend(backend: str, env: dict[str, str], request: pytest.FixtureRequest) -> bool:
    """Put ``backend`` in ``env``; whether it can index (sqlite-vec loadable, pgvector)."""
    if backend == "sqlite":
        return sqlite_can_index()
    env["RELAY_STORE"] = request.getfixturevalue("postgres_url")
    return pgvector_available(env["RELAY_STORE"])


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_semantic_search_returns_the_nearest_item(
    backend: str,
    app_env: dict[str, str],
    live_servers: LiveServers,
    client: httpx.Client,
    request: pytest.FixtureRequest,
) -> None:
    env = dict(app_env)
    if not index_backend(backend, env, request):
        pytest.skip(
            f"{backend} cannot index here (SQLite: this Python's sqlite3 cannot load "
            "extensions; PostgreSQL: no pgvector); the refusal is tested instead"
        )
    server = serve(live_servers, env, search_graph(), {"index": INDEX})
    store = server.relay.graph_store

    async def seed() -> None:
        await store.aput(("notes",), "a", {"text": "has a dog named Rex", "tag": "cat"})
        # the decoy: nearest to "dog" if the whole value were embedded, not its text
        await store.aput(("notes",), "b", {"text": "likes coffee", "tag": "dog dog dog dog"})
        await store.aput(("notes",), "c", {"text": "hates the rain", "tag": ""})

    on_loop(server, seed)
    assert chat(client, server, "find my dog", "ada")["answer"] == "has a dog named Rex"
    assert chat(client, server, "find coffee or tea", "ada")["answer"] == "likes coffee"
    assert chat(client, server, "find rain tomorrow?", "ada")["answer"] == "hates the rain"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_index_the_backend_cannot_keep_refuses_to_start(
    backend: str, app_env: dict[str, str], request: pytest.FixtureRequest
) -> None:
    env = dict(app_env)
    if index_backend(backend, env, request):
        pytest.skip(f"{backend} can index here: semantic search is tested instead")
    settings = RelaySettings.from_env(env)

    async def open_it() -> None:
        async with open_store(settings, store_options({"index": INDEX})):
            pass

    with pytest.raises(ConfigError) as refused:
        asyncio.run(open_it())
    needs = "cannot load extensions" if backend == "sqlite" else "needs the pgvector extension"
    assert needs in str(refused.value)
    if backend == "sqlite":  # before anything opens: the app is never made
        with pytest.raises(ConfigError, match="cannot load extensions"):
            Relay.from_env(env, store={"index": INDEX})


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_item_with_a_short_ttl_is_gone_after_a_sweep(
    backend: str,
    app_env: dict[str, str],
    live_servers: LiveServers,
    client: httpx.Client,
    request: pytest.FixtureRequest,
) -> None:
    env = dict(app_env)
    if backend == "postgres":
        env["RELAY_STORE"] = request.getfixturevalue("postgres_url")
    ttl = {"default_ttl": 60, "refresh_on_read": True, "sweep_interval_minutes": 60}
    server = serve(live_servers, env, memory_graph(), {"ttl": ttl})
    chat(client, server, "remember I take my coffee black", "ada")  # default_ttl: an hour
    store = server.relay.graph_store
    namespace = ("memories", "ada")
    on_loop(server, lambda: store.aput(namespace, "brief", {"text": "brief"}, ttl=0.001))
    sweeper = store._ttl_sweeper_task  # sweep_interval_minutes started LangGraph's sweeper
    assert sweeper is not None and not sweeper.done()

    deadline = time.monotonic() + 30  # a generous bound on 60 ms of TTL, never asserted
    swept = 0
    while on_loop(server, lambda: store.aget(namespace, "brief", refresh_ttl=False)):
        assert time.monotonic() < deadline, "the short-lived item was never swept"
        swept += on_loop(server, store.sweep_ttl)
        time.sleep(0.05)
    assert swept == 1  # the item of an hour's TTL stays
    assert chat(client, server, "what do you know?", "ada")["answer"] == "I take my coffee black"
    server.stop()
    assert sweeper.done()  # stopped with the app


def test_a_graph_compiled_with_its_own_store_keeps_it(
    app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client
) -> None:
    own = InMemoryStore()
    server = serve(live_servers, app_env, memory_graph(store=own))
    chat(client, server, "remember I take my coffee black", "ada")
    assert [item.value for item in own.search(("memories", "ada"))] == [
        {"text": "I take my coffee black"}
    ]
    assert server.relay.graph_store is None  # every graph has its own: none opened
    assert server.relay.agents["memory"].graph.store is own


def test_a_graph_without_a_store_beside_one_with_gets_the_relays(
    app_env: dict[str, str], live_servers: LiveServers, client: httpx.Client
) -> None:
    own = InMemoryStore()
    relay = Relay.from_env(app_env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(
        app,
        GraphAgent(memory_graph("mine", store=own), name="mine", config_of=user_config),
        GraphAgent(memory_graph("shared"), name="shared", config_of=user_config),
    )
    server = live_servers.start(app)
    for graph, text in (("mine", "kept apart"), ("shared", "kept by the relay")):
        response = client.post(
            f"{server.url}/graphs/{graph}/chat",
            json={"message": f"remember {text}"},
            headers={"x-user": "ada"},
        )
        assert response.json()["answer"] == "noted", response.text
    assert [i.value["text"] for i in own.search(("memories", "ada"))] == ["kept apart"]
    store = relay.graph_store
    held = on_loop(server, lambda: store.asearch(("memories", "ada")))
    assert [i.value["text"] for i in held] == ["kept by the relay"]
