"""What ``useStream`` (``@langchain/langgraph-sdk/react``) sends that its plainer callers do
not, as agent-chat-ui sends it (tests/interop/agent_chat_ui drives agent-chat-ui itself):
with ``fetchStateHistory`` every run names the thread's head as ``checkpoint``; its review
card resumes with ``input: {}`` beside ``command.resume``; from another origin its calls
are cross-origin (RELAY_CORS_ORIGINS) and the SDK reads ``Content-Location``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.agent_server_graphs import ANSWER, agent_server_app
from tests.conftest import LiveServer, LiveServers

ORIGIN = "http://127.0.0.1:3000"


@pytest.fixture
def server(app_env: dict[str, str], live_servers: LiveServers) -> LiveServer:
    return live_servers.start(agent_server_app({**app_env, "RELAY_CORS_ORIGINS": ORIGIN}))


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as c:
        yield c


def run(client: httpx.Client, base: str, thread_id: str, body: dict[str, Any]) -> httpx.Response:
    """POST /threads/{id}/runs/wait with ``body``."""
    return client.post(f"{base}/threads/{thread_id}/runs/wait", json=body)


def head_of(client: httpx.Client, base: str, thread_id: str) -> dict[str, Any]:
    """The thread's latest checkpoint as useStream sends it (no ``thread_id``)."""
    history = client.post(f"{base}/threads/{thread_id}/history", json={"limit": 10}).json()
    checkpoint: dict[str, Any] = dict(history[0]["checkpoint"])
    checkpoint.pop("thread_id")
    return checkpoint


def message(text: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": [{"type": "text", "text": text}]}]}


def test_a_run_may_name_the_threads_latest_checkpoint_never_an_earlier_one(
    server: LiveServer, client: httpx.Client
) -> None:
    base = server.url
    thread_id = client.post(f"{base}/threads", json={"metadata": {}}).json()["thread_id"]
    first = run(client, base, thread_id, {"assistant_id": "chat", "input": message("Hi")})
    assert first.status_code == 200, first.text
    earlier = head_of(client, base, thread_id)
    second = run(
        client,
        base,
        thread_id,
        {"assistant_id": "chat", "input": message("Again"), "checkpoint": earlier},
    )
    assert second.status_code == 200, second.text
    assert [m["type"] for m in second.json()["messages"]] == ["human", "ai", "human", "ai"]
    assert second.json()["messages"][-1]["content"] == ANSWER
    # the head moved on: the first head is now an earlier checkpoint, a branch
    branch = run(
        client,
        base,
        thread_id,
        {"assistant_id": "chat", "input": message("Edit"), "checkpoint": earlier},
    )
    assert branch.status_code == 422
    assert branch.json()["error"]["code"] == "unsupported_field"
    assert "earlier checkpoint" in branch.json()["error"]["message"]
    by_id = run(
        client,
        base,
        thread_id,
        {
            "assistant_id": "chat",
            "input": message("Edit"),
            "checkpoint_id": earlier["checkpoint_id"],
        },
    )
    assert by_id.status_code == 422
    # agent-chat-ui's regenerate: no input, from the checkpoint before the answer
    regenerate = run(client, base, thread_id, {"assistant_id": "chat", "checkpoint": earlier})
    assert regenerate.status_code == 422
    assert "regenerate" in regenerate.json()["error"]["message"]
    # a subgraph's checkpoint, and a checkpoint of a thread that does not exist yet
    nested = {**head_of(client, base, thread_id), "checkpoint_ns": "agent:1"}
    sub = run(client, base, thread_id, {"assistant_id": "chat", "input": {}, "checkpoint": nested})
    assert sub.status_code == 422 and "subgraph" in sub.json()["error"]["message"]
    fresh = run(
        client,
        base,
        "5b0b3c8e-8d4c-4a57-9c1c-6f0d6c1c0a11",
        {"assistant_id": "chat", "input": {}, "if_not_exists": "create", "checkpoint": earlier},
    )
    assert fresh.status_code == 422


def test_a_resume_may_carry_an_empty_input_beside_it(
    server: LiveServer, client: httpx.Client
) -> None:
    base = server.url
    thread_id = client.post(f"{base}/threads", json={}).json()["thread_id"]
    asked = run(client, base, thread_id, {"assistant_id": "approval", "input": {"question": "Go?"}})
    assert asked.json()["__interrupt__"][0]["value"] == {"question": "Go?"}
    both = {"assistant_id": "approval", "input": {"question": "Other?"}, "command": {"resume": "y"}}
    refused = run(client, base, thread_id, both)
    assert refused.status_code == 422  # an input that would be dropped: said, not dropped
    resumed = run(
        client,
        base,
        thread_id,
        {
            "assistant_id": "approval",
            "input": {},
            "command": {"resume": "yes"},
            "checkpoint": head_of(client, base, thread_id),
        },
    )
    assert resumed.status_code == 200, resumed.text
    assert resumed.json() == {"question": "Go?", "answer": "yes"}


def test_cross_origin_calls_read_the_run_and_may_patch_and_delete(
    server: LiveServer, client: httpx.Client
) -> None:
    base = server.url
    for method in ("PATCH", "DELETE", "POST"):
        preflight = client.options(
            f"{base}/threads/x",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": method,
                "Access-Control-Request-Headers": "content-type,x-api-key",
            },
        )
        assert preflight.status_code == 200, (method, preflight.text)
        assert method in preflight.headers["access-control-allow-methods"]
    thread_id = client.post(f"{base}/threads", json={}).json()["thread_id"]
    with client.stream(
        "POST",
        f"{base}/threads/{thread_id}/runs/stream",
        json={"assistant_id": "chat", "input": message("Hi")},
        headers={"Origin": ORIGIN},
    ) as streamed:
        exposed = streamed.headers["access-control-expose-headers"].lower()
        location = streamed.headers["content-location"]
        streamed.read()
    assert "content-location" in exposed
    run_id = location.rsplit("/", 1)[-1]
    assert client.get(f"{base}/turns/{run_id}").json()["status"] == "answered"
