"""LangGraph's Agent Server API (relay/http/agent_server.py), driven by LangGraph's own
Python client (``langgraph_sdk``) against span-relay on a real uvicorn: assistants,
threads, their state and history, runs streamed in each mode or waited for, an interrupt
answered with ``command.resume``; and every run a span-relay turn (its record, its
events)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.agent_server_graphs import ANSWER, agent_server_app
from tests.conftest import LiveServer, LiveServers, events_of, stream_get

NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
THREAD_STATE_KEYS = {
    "values",
    "next",
    "checkpoint",
    "metadata",
    "created_at",
    "parent_checkpoint",
    "tasks",
    "interrupts",
}
CHECKPOINT_KEYS = {"thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map"}


@pytest.fixture
def serve(app_env: dict[str, str], live_servers: LiveServers) -> Callable[..., LiveServer]:
    """``serve(**env)``: the graphs on one relay in a real uvicorn."""

    def make(**env: str) -> LiveServer:
        return live_servers.start(agent_server_app({**app_env, **env}))

    return make


@pytest.fixture
def server(serve: Callable[..., LiveServer]) -> LiveServer:
    return serve()


@pytest.fixture
def sdk(server: LiveServer) -> SyncLangGraphClient:
    return get_sync_client(url=server.url)


def parts_of(stream: Any) -> list[tuple[str, Any]]:
    return [(part.event, part.data) for part in stream]


def of(parts: list[tuple[str, Any]], name: str) -> list[Any]:
    return [data for event, data in parts if event == name]


def ask_thread(sdk: SyncLangGraphClient) -> str:
    return str(sdk.threads.create()["thread_id"])


def test_info_and_assistants_are_the_served_graphs(sdk: SyncLangGraphClient) -> None:
    info = httpx.get(f"{sdk.http.client.base_url}/info").json()
    assert info["flags"]["assistants"] is True and info["flags"]["crons"] is False
    assert isinstance(info["version"], str) and isinstance(info["langgraph_py_version"], str)

    found = sdk.assistants.search()
    assert sorted(a["graph_id"] for a in found) == ["approval", "broken", "chat", "gated", "nested"]
    chat = sdk.assistants.search(graph_id="chat")
    assert len(chat) == 1
    assistant = chat[0]
    assert assistant["assistant_id"] == str(uuid.uuid5(NAMESPACE_GRAPH, "chat"))
    assert assistant["name"] == "chat" and assistant["version"] == 1
    assert assistant["metadata"] == {"created_by": "system"}
    assert assistant["description"] == "A chat"
    assert sdk.assistants.search(name="APPRO")[0]["graph_id"] == "approval"
    assert sdk.assistants.search(metadata={"created_by": "someone"}) == []
    assert [a["graph_id"] for a in sdk.assistants.search(limit=1, offset=1)] == ["approval"]

    assert sdk.assistants.get(assistant["assistant_id"]) == assistant
    assert sdk.assistants.get("chat") == assistant  # a graph's name, as LangGraph allows
    with pytest.raises(NotFoundError):
        sdk.assistants.get(str(uuid.uuid4()))

    drawn = sdk.assistants.get_graph("chat")
    assert {n["id"] for n in drawn["nodes"]} >= {"__start__", "prepare", "agent", "__end__"}
    assert {(e["source"], e["target"]) for e in drawn["edges"]} >= {("prepare", "agent")}
    schemas = sdk.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["graph_id"] == "chat"
    assert "messages" in schemas["input_schema"]["properties"]
    assert "notes" in schemas["state_schema"]["properties"]


def test_a_streamed_run_in_every_mode_is_a_turn(
    sdk: SyncLangGraphClient, server: LiveServer
) -> None:
    thread = sdk.threads.create()
    thread_id = thread["thread_id"]
    assert thread["status"] == "idle" and thread["values"] == {} and thread["metadata"] == {}
    assert sdk.threads.get(thread_id)["thread_id"] == thread_id

    created: list[Any] = []
    parts = parts_of(
        sdk.runs.stream(
            thread_id,
            "chat",
            input={"messages": [{"role": "user", "content": "hi"}]},
            stream_mode=["values", "updates", "messages-tuple", "custom"],
            on_run_created=created.append,
        )
    )
    assert parts[0][0] == "metadata"
    run_id = parts[0][1]["run_id"]
    assert parts[0][1]["attempt"] == 1
    assert created[0]["run_id"] == run_id and created[0]["thread_id"] == thread_id
    assert {event for event, _ in parts} == {"metadata", "values", "updates", "messages", "custom"}

    values = of(parts, "values")
    # the state after each step: the input, after prepare, after agent
    assert [len(v["messages"]) for v in values] == [1, 1, 2]
    assert values[1]["notes"] == "ready"
    human, ai = values[-1]["messages"]
    assert human["type"] == "human" and human["content"] == "hi"
    assert ai["type"] == "ai" and ai["content"] == ANSWER
    assert {"id", "additional_kwargs", "response_metadata", "tool_calls"} <= set(ai)

    updates = of(parts, "updates")
    assert updates[0] == {"prepare": {"notes": "ready"}}
    assert updates[1]["agent"]["messages"][0]["content"] == ANSWER

    messages = of(parts, "messages")
    chunks = [m for m, _ in messages if m["type"] == "AIMessageChunk"]
    assert "".join(chunk["content"] for chunk in chunks) == ANSWER
    # then the message the node returned (not streamed under its id), whole, as LangGraph
    assert [(m["type"], m["content"]) for m, _ in messages[len(chunks) :]] == [("ai", ANSWER)]
    chunk, metadata = messages[0]
    assert chunk["type"] == "AIMessageChunk" and chunk["id"]
    assert metadata["langgraph_node"] == "agent" and metadata["langgraph_step"] == 2
    assert of(parts, "custom") == [{"stage": "prepare"}]

    # the run is a span-relay turn: its record, its events replayed
    turn = httpx.get(f"{server.url}/turns/{run_id}").json()
    assert turn["thread_id"] == thread_id and turn["graph"] == "chat"
    assert turn["status"] == "answered"
    assert turn["message"] == "hi"  # the input's last message, as the SPA shows it
    with httpx.Client() as http:
        events = events_of(stream_get(http, f"{server.url}/turns/{run_id}/events"))
    assert events[0]["type"] == "graph_topology" and events[-1]["type"] == "turn_completed"
    deltas = [e["delta"] for e in events if e["type"] == "text_delta"]
    assert [chunk["content"] for chunk in chunks] == deltas
    # the chunks carry the id LangChain gave the streamed message, the turn's deltas too
    assert {chunk["id"] for chunk in chunks} == {
        e["message_id"] for e in events if e["type"] == "text_delta"
    }

    # the thread, its state and its history
    after = sdk.threads.get(thread_id)
    assert after["status"] == "idle" and after["values"]["messages"][-1]["content"] == ANSWER
    state = sdk.threads.get_state(thread_id)
    assert set(state) == THREAD_STATE_KEYS
    assert state["next"] == [] and state["tasks"] == [] and state["interrupts"] == []
    assert set(state["checkpoint"]) == CHECKPOINT_KEYS
    assert state["checkpoint"]["thread_id"] == thread_id
    assert state["parent_checkpoint"]["checkpoint_id"]
    history = sdk.threads.get_history(thread_id, limit=10)
    assert history[0]["checkpoint"] == state["checkpoint"]
    # each entry's parent is the next (older) entry: what editing and branching walk
    assert [h["parent_checkpoint"]["checkpoint_id"] for h in history[:-1]] == [
        h["checkpoint"]["checkpoint_id"] for h in history[1:]
    ]
    assert history[-1]["parent_checkpoint"] is None
    assert [h["metadata"]["step"] for h in history] == [2, 1, 0, -1]
    ran = [t for h in history for t in h["tasks"] if t["name"] == "prepare"]
    assert ran[0]["result"] == {"notes": "ready"} and ran[0]["error"] is None
    assert (
        sdk.threads.get_history(thread_id, limit=2, before=history[1]["checkpoint"])
        == (history[2:4])
    )


@pytest.mark.parametrize(
    ("mode", "event"),
    [("values", "values"), ("updates", "updates"), ("messages-tuple", "messages")],
)
def test_each_mode_alone(sdk: SyncLangGraphClient, mode: str, event: str) -> None:
    thread_id = ask_thread(sdk)
    parts = parts_of(
        sdk.runs.stream(
            thread_id,
            "chat",
            input={"messages": [{"role": "user", "content": "hi"}]},
            stream_mode=mode,
        )
    )
    assert {e for e, _ in parts} == {"metadata", event}


def test_custom_mode_alone_and_a_second_run_on_the_thread(sdk: SyncLangGraphClient) -> None:
    thread_id = ask_thread(sdk)
    first = parts_of(
        sdk.runs.stream(
            thread_id,
            "chat",
            input={"messages": [{"role": "user", "content": "hi"}]},
            stream_mode="custom",
        )
    )
    assert first[1:] == [("custom", {"stage": "prepare"})]
    second = parts_of(
        sdk.runs.stream(
            thread_id,
            "chat",
            input={"messages": [{"role": "user", "content": "again"}]},
        )
    )
    # the default mode is values; only the second run's own steps are sent
    values = of(second, "values")
    assert [len(v["messages"]) for v in values] == [3, 3, 4]
    assert values[0]["messages"][-1]["content"] == "again"


def test_an_interrupt_in_values_then_a_resume_with_command(
    sdk: SyncLangGraphClient, server: LiveServer
) -> None:
    thread_id = ask_thread(sdk)
    parts = parts_of(
        sdk.runs.stream(
            thread_id,
            "approval",
            input={"question": "Ship it?"},
            stream_mode=["values", "updates"],
        )
    )
    run_id = parts[0][1]["run_id"]
    last = of(parts, "values")[-1]
    assert last["question"] == "Ship it?"
    (pending,) = last["__interrupt__"]
    assert pending["value"] == {"question": "Ship it?"} and pending["id"]
    assert of(parts, "updates")[-1] == {"__interrupt__": [pending]}
    # the stream writes the Interrupt's fields (response_schema too), the state does not:
    # as LangGraph's Agent Server (tests/interop/test_langgraph_py.py compares them)
    assert pending["response_schema"] is None
    stored = {"value": pending["value"], "id": pending["id"]}

    thread = sdk.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    assert list(thread["interrupts"].values()) == [[stored]]
    state = sdk.threads.get_state(thread_id)
    assert state["next"] == ["ask"] and state["interrupts"] == [stored]
    assert state["tasks"][0]["name"] == "ask" and state["tasks"][0]["interrupts"] == [stored]

    resumed = parts_of(
        sdk.runs.stream(
            thread_id, "approval", command={"resume": "yes"}, stream_mode=["values", "updates"]
        )
    )
    assert of(resumed, "updates") == [{"ask": {"answer": "yes"}}]
    # a resume continues the paused turn: the run id is that turn's
    assert resumed[0][1]["run_id"] == run_id
    # first the state it resumes from, as LangGraph sends it, then the step's
    assert of(resumed, "values") == [
        {"question": "Ship it?"},
        {"question": "Ship it?", "answer": "yes"},
    ]
    assert sdk.threads.get(thread_id)["status"] == "idle"
    assert httpx.get(f"{server.url}/turns/{run_id}").json()["status"] == "answered"


def test_runs_wait_answers_the_values(sdk: SyncLangGraphClient) -> None:
    thread_id = ask_thread(sdk)
    paused = sdk.runs.wait(thread_id, "approval", input={"question": "Ship it?"})
    assert isinstance(paused, dict)
    assert paused["question"] == "Ship it?"
    assert paused["__interrupt__"][0]["value"] == {"question": "Ship it?"}
    done = sdk.runs.wait(thread_id, "approval", command={"resume": "no"})
    assert done == {"question": "Ship it?", "answer": "no"}

    chat_thread = ask_thread(sdk)
    answered = sdk.runs.wait(
        chat_thread, "chat", input={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert isinstance(answered, dict)
    assert answered["messages"][-1]["content"] == ANSWER


def test_what_is_refused(sdk: SyncLangGraphClient) -> None:
    thread_id = ask_thread(sdk)
    with pytest.raises(ConflictError):
        sdk.threads.create(thread_id=thread_id)
    assert sdk.threads.create(thread_id=thread_id, if_exists="do_nothing")["thread_id"] == (
        thread_id
    )
    with pytest.raises(UnprocessableEntityError):
        sdk.threads.create(ttl=5)  # not served yet: said, not dropped
    with pytest.raises(NotFoundError):
        sdk.threads.get(str(uuid.uuid4()))
    # runs.wait raises httpx's own error (the SDK reads its body for a reconnect)
    with pytest.raises(httpx.HTTPStatusError) as unknown_thread:
        sdk.runs.wait(str(uuid.uuid4()), "chat", input={"messages": []})
    assert unknown_thread.value.response.status_code == 404
    with pytest.raises(httpx.HTTPStatusError) as unknown_assistant:
        sdk.runs.wait(thread_id, "nobody", input={"messages": []})
    assert unknown_assistant.value.response.status_code == 404
    stream: Callable[..., Any] = sdk.runs.stream
    with pytest.raises(UnprocessableEntityError):
        parts_of(stream(thread_id, "chat", input={"messages": []}, stream_mode="debug"))
    # a thread made by its first run
    fresh = str(uuid.uuid4())
    parts = parts_of(
        stream(
            fresh,
            "approval",
            input={"question": "New?"},
            if_not_exists="create",
            stream_mode="values",
        )
    )
    assert of(parts, "values")[-1]["question"] == "New?"
    assert sdk.threads.get(fresh)["status"] == "interrupted"


def test_a_failed_run_ends_with_an_error(sdk: SyncLangGraphClient, server: LiveServer) -> None:
    thread_id = ask_thread(sdk)
    parts = parts_of(
        sdk.runs.stream(thread_id, "broken", input={"question": "?"}, stream_mode="values")
    )
    run_id = parts[0][1]["run_id"]
    assert parts[-1][0] == "error"
    assert parts[-1][1]["error"] == "node_failed" and parts[-1][1]["message"]
    assert sdk.threads.get(thread_id)["status"] == "error"
    assert httpx.get(f"{server.url}/turns/{run_id}").json()["status"] == "error"
    failed = sdk.runs.wait(thread_id, "broken", input={"question": "?"}, raise_error=False)
    assert isinstance(failed, dict)
    assert failed["__error__"] == {"error": "node_failed", "message": parts[-1][1]["message"]}


SECRET = "proxy-secret-0123456789"


def test_a_thread_and_its_runs_are_its_users_only(serve: Callable[..., LiveServer]) -> None:
    server = serve(RELAY_AUTH="proxy", RELAY_PROXY_SECRET=SECRET)
    alice = get_sync_client(
        url=server.url, headers={"X-Forwarded-User": "alice", "X-Relay-Proxy-Secret": SECRET}
    )
    bob = get_sync_client(
        url=server.url, headers={"X-Forwarded-User": "bob", "X-Relay-Proxy-Secret": SECRET}
    )
    thread_id = ask_thread(alice)
    parts = parts_of(
        alice.runs.stream(thread_id, "approval", input={"question": "Mine?"}, stream_mode="values")
    )
    assert of(parts, "values")[-1]["__interrupt__"]
    for read in (bob.threads.get, bob.threads.get_state, bob.threads.get_history):
        with pytest.raises(NotFoundError):
            read(thread_id)
    with pytest.raises(NotFoundError):
        parts_of(bob.runs.stream(thread_id, "approval", command={"resume": "yes"}))
    with pytest.raises(NotFoundError):
        parts_of(bob.runs.stream(thread_id, "approval", input={"question": "Yours?"}))
    # alice's thread is still hers, paused, and she resumes it
    assert alice.threads.get(thread_id)["status"] == "interrupted"
    done = alice.runs.wait(thread_id, "approval", command={"resume": "yes"})
    assert done == {"question": "Mine?", "answer": "yes"}
    with pytest.raises(httpx.HTTPStatusError) as anonymous:
        httpx.post(f"{server.url}/threads", json={}).raise_for_status()
    assert anonymous.value.response.status_code == 401
