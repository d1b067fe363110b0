"""langgraph.json's ``checkpointer.ttl`` (``strategy: "delete"``), honoured by the relay's
sweeper (relay/langgraph/thread_ttl.py): a thread idle for longer than ``default_ttl``
is deleted by a sweep (its next turn starts afresh), a thread in use is never deleted,
here or on another instance (PostgreSQL's thread lock). Served on a real uvicorn; the
sweeps are triggered here, and the TTL's passing is waited for as a condition."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph

from relay import GraphAgent, Relay
from relay.langgraph.thread_ttl import ThreadGate, cutoff_id
from tests.conftest import LiveServer, LiveServers

#: 60 ms: a thread is idle for longer than this soon after its turn
TTL = {"strategy": "delete", "default_ttl": 0.001, "sweep_interval_minutes": 60}


class Hold:
    """A turn whose message is ``hold`` stays in its node until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()


def counting_graph(hold: Hold) -> Any:
    """Answers with the number of messages the thread has had (its checkpointed state)."""

    async def count(state: MessagesState) -> dict[str, Any]:
        if state["messages"][-1].content == "hold":
            hold.entered.set()
            await asyncio.to_thread(hold.release.wait, 60)
        sent = sum(1 for m in state["messages"] if m.type == "human")
        return {"messages": [AIMessage(f"{sent} message(s)")]}

    builder = StateGraph(MessagesState)
    builder.add_node("count", count)
    builder.add_edge(START, "count")
    return builder.compile(name="counter")


def serve(live_servers: LiveServers, env: dict[str, str], hold: Hold) -> LiveServer:
    relay = Relay.from_env(env, checkpointer={"ttl": TTL})
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(counting_graph(hold), name="counter"))
    return live_servers.start(app)


def on_loop(server: LiveServer, work: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    assert server.loop is not None
    return asyncio.run_coroutine_threadsafe(work(), server.loop).result(timeout=30)


def chat(server: LiveServer, message: str, thread_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message}
    if thread_id is not None:
        body["thread_id"] = thread_id
    response = httpx.post(f"{server.url}/chat", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def checkpoint(server: LiveServer, thread_id: str) -> Any:
    saver = server.relay.agents["counter"].graph.checkpointer
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return on_loop(server, lambda: saver.aget_tuple(config))


def wait_until_idle_past_ttl(server: LiveServer, thread_id: str) -> None:
    """Until the thread's last checkpoint is older than the TTL (the sweeper's own query
    says it is expired): a condition, with a generous bound that is never asserted on."""
    sweeper = server.relay.thread_sweeper
    deadline = time.monotonic() + 30
    while thread_id not in on_loop(server, lambda: sweeper._expired(cutoff_id(0.06), 1000)):
        assert time.monotonic() < deadline, "the thread never became older than its TTL"
        time.sleep(0.02)


@pytest.fixture
def env(request: pytest.FixtureRequest, app_env: dict[str, str]) -> Iterator[dict[str, str]]:
    backend = request.param
    extra = (
        {"RELAY_STORE": request.getfixturevalue("postgres_url")} if backend == "postgres" else {}
    )
    yield {**app_env, **extra}


@pytest.mark.parametrize("env", ["sqlite", "postgres"], indirect=True)
def test_an_idle_thread_is_deleted_by_a_sweep(
    env: dict[str, str], live_servers: LiveServers
) -> None:
    server = serve(live_servers, env, Hold())
    first = chat(server, "hello")
    thread = first["thread_id"]
    assert first["answer"] == "1 message(s)"
    assert chat(server, "again", thread)["answer"] == "2 message(s)"
    other = chat(server, "a thread of its own")["thread_id"]
    sweeper = server.relay.thread_sweeper
    assert sweeper is not None

    deadline = time.monotonic() + 30  # the TTL's passing, as a condition
    deleted = 0
    while checkpoint(server, thread) is not None or checkpoint(server, other) is not None:
        assert time.monotonic() < deadline, "the idle threads were never deleted"
        deleted += on_loop(server, sweeper.sweep)
        time.sleep(0.02)
    assert deleted == 2  # every idle thread goes, each once
    assert chat(server, "back", thread)["answer"] == "1 message(s)"  # starts afresh


@pytest.mark.parametrize("env", ["sqlite", "postgres"], indirect=True)
def test_a_thread_in_use_is_not_deleted(env: dict[str, str], live_servers: LiveServers) -> None:
    hold = Hold()
    server = serve(live_servers, env, hold)
    thread = chat(server, "hello")["thread_id"]
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(chat, server, "hold", thread)
        assert hold.entered.wait(30)
        wait_until_idle_past_ttl(server, thread)  # expired by its age, but in use
        assert on_loop(server, server.relay.thread_sweeper.sweep) == 0
        assert checkpoint(server, thread) is not None
        hold.release.set()
        assert held.result(timeout=60)["answer"] == "2 message(s)"
    assert chat(server, "and now", thread)["answer"] == "3 message(s)"  # state intact


@pytest.mark.parametrize("env", ["postgres"], indirect=True)
def test_a_thread_another_instance_runs_is_not_deleted(
    env: dict[str, str], live_servers: LiveServers
) -> None:
    hold = Hold()
    running = serve(live_servers, env, hold)
    sweeping = serve(live_servers, env, Hold())  # a replica: the same database
    thread = chat(running, "hello")["thread_id"]
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(chat, running, "hold", thread)
        assert hold.entered.wait(30)
        wait_until_idle_past_ttl(sweeping, thread)
        assert on_loop(sweeping, sweeping.relay.thread_sweeper.sweep) == 0  # its thread lock
        assert checkpoint(sweeping, thread) is not None
        hold.release.set()
        assert held.result(timeout=60)["answer"] == "2 message(s)"


def test_the_gate_keeps_runs_and_deletions_apart() -> None:
    async def scenario() -> list[str]:
        gate = ThreadGate()
        order: list[str] = []
        async with gate.using("t"):
            async with gate.deleting("t") as free:
                assert free is False  # a run uses it
        async with gate.deleting("t") as free:
            assert free is True
            run = asyncio.create_task(_run(gate, order))
            await asyncio.sleep(0)  # the run is waiting for the deletion
            order.append("deleted")
        await run
        return order

    async def _run(gate: ThreadGate, order: list[str]) -> None:
        async with gate.using("t"):
            order.append("ran")

    assert asyncio.run(scenario()) == ["deleted", "ran"]


def test_wrong_checkpointer_ttl_values_are_refused() -> None:
    from relay import ConfigError
    from relay.langgraph.checkpointer_config import checkpointer_options

    for ttl, words in (
        ({"strategy": "keep_latest", "default_ttl": 5}, '"keep_latest" is not supported'),
        ({"strategy": "archive", "default_ttl": 5}, "checkpointer.ttl.strategy"),
        ({"strategy": "delete"}, "checkpointer.ttl.default_ttl"),
        ({"default_ttl": 0}, "checkpointer.ttl.default_ttl"),
        ({"default_ttl": 5, "sweep_interval_minutes": 0}, "sweep_interval_minutes"),
        ({"default_ttl": 5, "sweep_limit": "all"}, "sweep_limit"),
        ({"default_ttl": 5, "every": 1}, "unknown key(s) 'every'"),
        ("1h", "checkpointer.ttl: expected an object"),
    ):
        with pytest.raises(ConfigError, match=r"checkpointer\.ttl") as refused:
            checkpointer_options({"ttl": ttl})
        assert words in str(refused.value), ttl
    ttl = checkpointer_options({"ttl": {"default_ttl": 90}}).ttl
    assert ttl is not None
    assert (ttl.default_ttl, ttl.sweep_interval_minutes, ttl.sweep_limit) == (90.0, 5, 1000)
