"""Tool arguments, errors a client can act on, and LangGraph's RetryPolicy, on graphs
written for this test and served by ``GraphAgent`` on a real uvicorn, each held against
what LangGraph itself says of the same input (its ``astream(stream_mode=["updates"],
subgraphs=True)``, or the exception its ``ainvoke`` raises):

- a tool's arguments are in ``tool_started.args`` (and AG-UI's ``TOOL_CALL_ARGS``) as the
  model called it; arguments too long are cut and say so;
- a recursion-limit loop ends ``recursion_limit`` (not retryable); a node that raises ends
  ``node_failed`` naming it, a tool that raises ``tool_failed``; ``retryable`` only for a
  failure that may pass (a connection error);
- a node attempt the RetryPolicy runs again ends ``retrying`` (its ``attempt``), and the
  answered turn lists no error;
- the replay from stored spans is the live stream, payload for payload.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from relay import GraphAgent, Relay
from relay.conventions import TOOL_ARGUMENTS_MAX_CHARS
from tests import contract
from tests.conftest import LiveServer, events_of, stream_get, stream_post
from tests.delivery.agui_checks import check_stream, get_agui, post_agui
from tests.zoo.graphs import _react_agent
from tests.zoo.models import call, scripted, text

ARGS = {"amount": 20.5, "currency": "EUR", "note": "für Zoë", "tags": ["a", "b"]}


@tool
def convert(amount: float, currency: str, note: str, tags: list[str]) -> str:
    """Convert an amount into a currency."""
    return f"{amount} {currency}"


@tool
def keep_note(body: str) -> str:
    """Keep a note."""
    return "kept"


@tool
def broken_lookup(query: str) -> str:
    """A lookup whose backend has a bug."""
    raise RuntimeError(f"bug while looking up {query}")


def tools_agent(checkpointer: Any = None) -> Any:
    model = scripted(call("convert", ARGS, "call_convert_1"), text("It is 20.5 EUR."))
    return _react_agent(model, [convert], checkpointer=checkpointer, name="tools")


def long_args_agent(checkpointer: Any = None) -> Any:
    body = "x" * (TOOL_ARGUMENTS_MAX_CHARS + 10)
    model = scripted(call("keep_note", {"body": body}, "call_note_1"), text("Noted."))
    return _react_agent(model, [keep_note], checkpointer=checkpointer, name="notes")


def broken_tool_agent(checkpointer: Any = None) -> Any:
    model = scripted(call("broken_lookup", {"query": "x"}, "call_broken_1"), text("never"))
    return _react_agent(model, [broken_lookup], checkpointer=checkpointer, name="broken")


class Counter(TypedDict, total=False):
    q: str
    n: int
    answer: str


def loop_graph(checkpointer: Any = None) -> Any:
    """A node that routes back to itself forever: LangGraph stops it at its limit."""
    graph = StateGraph(Counter)
    graph.add_node("spin", lambda state: {"n": state.get("n", 0) + 1})
    graph.add_edge(START, "spin")
    graph.add_conditional_edges("spin", lambda state: "spin", ["spin", END])
    return graph.compile(checkpointer=checkpointer).with_config(recursion_limit=12)


def raising_graph(error: type[Exception]) -> Callable[..., Any]:
    def build(checkpointer: Any = None) -> Any:
        def explode(state: Counter) -> dict[str, Any]:
            raise error("the backend said no")

        graph = StateGraph(Counter)
        graph.add_node("prepare", lambda state: {"n": 1})
        graph.add_node("explode", explode)
        graph.add_edge(START, "prepare")
        graph.add_edge("prepare", "explode")
        graph.add_edge("explode", END)
        return graph.compile(checkpointer=checkpointer)

    return build


def flaky_graph(failures: int, attempts: int) -> Callable[..., Any]:
    """``fetch`` fails with a ConnectionError ``failures`` times per thread; its
    RetryPolicy allows ``attempts`` attempts."""

    def build(checkpointer: Any = None) -> Any:
        failed: dict[str, int] = {}

        def fetch(state: Counter, config: RunnableConfig) -> dict[str, Any]:
            thread = str(config["configurable"]["thread_id"])
            if failed.get(thread, 0) < failures:
                failed[thread] = failed.get(thread, 0) + 1
                raise ConnectionError("the backend hung up")
            return {"n": 1}

        graph = StateGraph(Counter)
        graph.add_node(
            "fetch",
            fetch,
            retry_policy=RetryPolicy(
                max_attempts=attempts, initial_interval=0.01, jitter=False, retry_on=ConnectionError
            ),
        )
        graph.add_node("reply", lambda state: {"answer": f"Fetched {state['q']}."})
        graph.add_edge(START, "fetch")
        graph.add_edge("fetch", "reply")
        graph.add_edge("reply", END)
        return graph.compile(checkpointer=checkpointer)

    return build


def nested_flaky_graph(checkpointer: Any = None) -> Any:
    """The flaky node inside a compiled subgraph (added as node ``sub``)."""
    inner = flaky_graph(failures=2, attempts=3)()
    graph = StateGraph(Counter)
    graph.add_node("sub", inner)
    graph.add_edge(START, "sub")
    graph.add_edge("sub", END)
    return graph.compile(checkpointer=checkpointer)


def picky_graph(calls: list[str]) -> Callable[..., Any]:
    """A RetryPolicy whose default ``retry_on`` does not retry a ValueError."""

    def build(checkpointer: Any = None) -> Any:
        def judge(state: Counter) -> dict[str, Any]:
            calls.append("judge")
            raise ValueError("a bad input fails the same way every time")

        graph = StateGraph(Counter)
        graph.add_node("judge", judge, retry_policy=RetryPolicy(max_attempts=3))
        graph.add_edge(START, "judge")
        graph.add_edge("judge", END)
        return graph.compile(checkpointer=checkpointer)

    return build


GRAPHS: dict[str, Callable[..., Any]] = {
    "tools": tools_agent,
    "tools_agui": tools_agent,  # a scripted model plays its script once: one per run
    "notes": long_args_agent,
    "notes_agui": long_args_agent,
    "broken": broken_tool_agent,
    "loop": loop_graph,
    "bug": raising_graph(ValueError),
    "hangup": raising_graph(ConnectionError),
    "flaky": flaky_graph(failures=1, attempts=3),
    "hopeless": flaky_graph(failures=5, attempts=2),
    "nested": nested_flaky_graph,
    "picky": picky_graph([]),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        RELAY_DATA_DIR=str(tmp_path_factory.mktemp("failures")),
        OTEL_TRACES_EXPORTER="none",
    )
    relay = Relay.from_env(env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, *(GraphAgent(build(), name=name) for name, build in GRAPHS.items()))
    server = LiveServer(app).start()
    yield server
    server.stop()


def _config() -> RunnableConfig:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


async def _updates(graph: Any, graph_input: Any) -> list[tuple[tuple[str, ...], str, Any]]:
    """LangGraph's own view: every ``updates`` item, (namespace, node, update)."""
    seen = []
    async for namespace, _mode, update in graph.astream(
        graph_input, _config(), stream_mode=["updates"], subgraphs=True
    ):
        for node, value in update.items():
            seen.append((tuple(p.partition(":")[0] for p in namespace), node, value))
    return seen


def _raised(build: Callable[..., Any], graph_input: Any) -> BaseException:
    async def run() -> BaseException:
        try:
            await build(InMemorySaver()).ainvoke(graph_input, _config())
        except Exception as exc:
            return exc
        raise AssertionError("LangGraph's own run did not fail")

    return asyncio.run(run())


def _turn(client: httpx.Client, url: str, name: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    events = events_of(stream_post(client, f"{url}/graphs/{name}/chat", body))
    contract.check_stream(events)
    return events


def _replay_is_live(client: httpx.Client, url: str, turn_id: str) -> None:
    deadline = time.monotonic() + 10
    while client.get(f"{url}/turns/{turn_id}").json()["status"] == "running":
        assert time.monotonic() < deadline, "the turn never recorded its end"
        time.sleep(0.02)
    live = events_of(stream_get(client, f"{url}/turns/{turn_id}/events"))
    replayed = events_of(stream_get(client, f"{url}/turns/{turn_id}/events", {"source": "spans"}))
    assert replayed == live


def _agui_body(message: str) -> dict[str, Any]:
    return {
        "threadId": uuid.uuid4().hex,
        "runId": "run-1",
        "messages": [{"id": "m1", "role": "user", "content": message}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


# -- tool arguments --------------------------------------------------------------------


def test_a_tools_arguments_as_the_model_called_it(served: LiveServer, client: httpx.Client) -> None:
    message = {"messages": [{"role": "user", "content": "Convert 20.5 to EUR."}]}
    truth = asyncio.run(_updates(tools_agent(InMemorySaver()), message))
    calls = [
        tc
        for _, node, update in truth
        if node == "agent"
        for m in update["messages"]
        for tc in m.tool_calls
    ]
    assert [(tc["name"], tc["args"]) for tc in calls] == [("convert", ARGS)]

    events = _turn(client, served.url, "tools", {"message": "Convert 20.5 to EUR."})
    assert events[-1]["type"] == "turn_completed", events[-1]
    [started] = [e for e in events if e["type"] == "tool_started"]
    assert (started["tool"], started["call_id"], started["args"]) == (
        "convert",
        calls[0]["id"],
        calls[0]["args"],
    )
    assert "client" not in started and "args_truncated" not in started
    _replay_is_live(client, served.url, events[-1]["turn_id"])

    agui = post_agui(client, f"{served.url}/graphs/tools_agui", _agui_body("Convert 20.5 to EUR."))
    check_stream(agui)
    [args] = [e for e in agui if e["type"] == "TOOL_CALL_ARGS"]
    assert args["toolCallId"] == calls[0]["id"]
    assert json.loads(args["delta"]) == ARGS


def test_arguments_too_long_are_cut_and_say_so(served: LiveServer, client: httpx.Client) -> None:
    events = _turn(client, served.url, "notes", {"message": "Keep a long note."})
    assert events[-1]["type"] == "turn_completed", events[-1]
    [started] = [e for e in events if e["type"] == "tool_started"]
    assert started["tool"] == "keep_note" and started["args_truncated"] is True
    assert "args" not in started
    _replay_is_live(client, served.url, events[-1]["turn_id"])
    agui = post_agui(client, f"{served.url}/graphs/notes_agui", _agui_body("Keep a long note."))
    check_stream(agui)
    [start] = [e for e in agui if e["type"] == "TOOL_CALL_START"]
    assert start["metadata"]["args_truncated"] is True


# -- errors ------------------------------------------------------------------------------


def test_a_recursion_limit_loop_is_recursion_limit(
    served: LiveServer, client: httpx.Client
) -> None:
    assert isinstance(_raised(loop_graph, {"q": "x"}), GraphRecursionError)
    events = _turn(client, served.url, "loop", {"input": {"q": "x"}})
    end = events[-1]
    assert end["type"] == "error", end
    assert (end["code"], end["node"], end["retryable"]) == ("recursion_limit", None, False)
    assert "recursion limit" in end["message"]
    spins = [e for e in events if e["type"] == "node_completed"]
    assert spins and {e["status"] for e in spins} == {"ok"}
    _replay_is_live(client, served.url, end["turn_id"])
    answered = client.post(f"{served.url}/graphs/loop/chat", json={"input": {"q": "x"}}).json()
    assert answered["status"] == "error"


@pytest.mark.parametrize(
    ("name", "error", "retryable"), [("bug", ValueError, False), ("hangup", ConnectionError, True)]
)
def test_a_node_that_raises_is_node_failed(
    served: LiveServer, client: httpx.Client, name: str, error: type[Exception], retryable: bool
) -> None:
    assert isinstance(_raised(GRAPHS[name], {"q": "x"}), error)
    events = _turn(client, served.url, name, {"input": {"q": "x"}})
    end = events[-1]
    assert end["type"] == "error", end
    assert (end["code"], end["node"], end["retryable"]) == ("node_failed", "explode", retryable)
    assert ("try again" in end["message"]) is retryable
    done = [(e["node"], e["status"]) for e in events if e["type"] == "node_completed"]
    assert done == [("prepare", "ok"), ("explode", "error")]
    _replay_is_live(client, served.url, end["turn_id"])
    agui = post_agui(client, f"{served.url}/graphs/{name}", _agui_body("x"))
    assert agui[-1]["type"] == "RUN_ERROR"
    assert agui[-1]["code"] == "node_failed"
    assert agui[-1]["metadata"] == {"node": "explode", "retryable": retryable}


def test_a_tool_that_raises_is_tool_failed(served: LiveServer, client: httpx.Client) -> None:
    message = {"messages": [{"role": "user", "content": "Look x up."}]}
    assert isinstance(_raised(broken_tool_agent, message), RuntimeError)
    events = _turn(client, served.url, "broken", {"message": "Look x up."})
    end = events[-1]
    assert end["type"] == "error", end
    assert (end["code"], end["node"], end["retryable"]) == ("tool_failed", "tools", False)
    assert "broken_lookup" in end["message"] and "bug while" not in end["message"]
    done = [(e["tool"], e["status"]) for e in events if e["type"] == "tool_completed"]
    assert done == [("broken_lookup", "error")]
    _replay_is_live(client, served.url, end["turn_id"])


# -- RetryPolicy -------------------------------------------------------------------------


def test_a_retried_attempt_is_no_error_of_the_turn(
    served: LiveServer, client: httpx.Client
) -> None:
    truth = asyncio.run(_updates(GRAPHS["flaky"](InMemorySaver()), {"q": "news"}))
    assert [(ns, node) for ns, node, _ in truth] == [((), "fetch"), ((), "reply")]

    events = _turn(client, served.url, "flaky", {"input": {"q": "news"}})
    end = events[-1]
    assert end["type"] == "turn_completed", end
    response = end["response"]
    assert response["status"] == "answered" and response["answer"] == "Fetched news."
    assert [n["status"] for n in response["nodes"]] == ["retrying", "ok", "ok"]
    done = [
        (e["node"], e["status"], e.get("attempt")) for e in events if e["type"] == "node_completed"
    ]
    assert done == [("fetch", "retrying", 1), ("fetch", "ok", 2), ("reply", "ok", None)]
    # what LangGraph reports, in its order, among the attempts that counted
    assert [
        (tuple(e["namespace"]), e["node"])
        for e in events
        if e["type"] == "node_completed" and e["status"] == "ok"
    ] == [(ns, node) for ns, node, _ in truth]
    assert not [e for e in events if e["type"] == "error"]
    _replay_is_live(client, served.url, end["turn_id"])

    # over AG-UI: a step per attempt, the retried one's node_completed saying so
    agui = get_agui(client, f"{served.url}/turns/{end['turn_id']}/events?format=agui")
    check_stream(agui)
    assert agui[-1]["type"] == "RUN_FINISHED"
    attempts = [
        (e["value"]["node"], e["value"]["status"], e["value"].get("attempt"))
        for e in agui
        if e["type"] == "CUSTOM" and e["name"] == "node_completed"
    ]
    assert attempts == done


def test_the_last_attempt_that_fails_is_the_nodes_failure(
    served: LiveServer, client: httpx.Client
) -> None:
    assert isinstance(_raised(GRAPHS["hopeless"], {"q": "news"}), ConnectionError)
    events = _turn(client, served.url, "hopeless", {"input": {"q": "news"}})
    end = events[-1]
    assert end["type"] == "error", end
    assert (end["code"], end["node"], end["retryable"]) == ("node_failed", "fetch", True)
    done = [(e["status"], e.get("attempt")) for e in events if e["type"] == "node_completed"]
    assert done == [("retrying", 1), ("error", 2)]
    _replay_is_live(client, served.url, end["turn_id"])


def test_a_retried_attempt_in_a_subgraph(served: LiveServer, client: httpx.Client) -> None:
    truth = asyncio.run(_updates(nested_flaky_graph(InMemorySaver()), {"q": "news"}))
    events = _turn(client, served.url, "nested", {"input": {"q": "news"}})
    end = events[-1]
    assert end["type"] == "turn_completed", end
    assert end["response"]["answer"] == "Fetched news."
    done = [
        (tuple(e["namespace"]), e["node"], e["status"], e.get("attempt"))
        for e in events
        if e["type"] == "node_completed"
    ]
    assert done == [
        (("sub",), "fetch", "retrying", 1),
        (("sub",), "fetch", "retrying", 2),
        (("sub",), "fetch", "ok", 3),
        (("sub",), "reply", "ok", None),
        ((), "sub", "ok", None),
    ]
    ok = [(ns, node) for ns, node, status, _ in done if status == "ok"]
    assert ok == [(ns, node) for ns, node, _ in truth]
    assert "error" not in [n["status"] for n in end["response"]["nodes"]]
    _replay_is_live(client, served.url, end["turn_id"])


def test_an_error_the_policy_does_not_retry_is_the_nodes_at_once(
    served: LiveServer, client: httpx.Client
) -> None:
    calls: list[str] = []
    assert isinstance(_raised(picky_graph(calls), {"q": "x"}), ValueError)
    assert calls == ["judge"]  # LangGraph ran it once
    events = _turn(client, served.url, "picky", {"input": {"q": "x"}})
    end = events[-1]
    assert (end["type"], end["code"], end["node"], end["retryable"]) == (
        "error",
        "node_failed",
        "judge",
        False,
    )
    done = [e for e in events if e["type"] == "node_completed"]
    assert [(e["status"], "attempt" in e) for e in done] == [("error", False)]
