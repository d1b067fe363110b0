"""LangGraph's stateless runs (relay/http/agent_server_stateless.py) on a real uvicorn:
``POST /runs/wait``, ``/runs/stream`` and ``/runs`` run on a thread made for the run,
which is deleted once the run ended (``on_completion`` ``delete``, LangGraph's default) or
kept (``keep``); and their clear errors. The gated graph of test_agent_server_runs.py
holds a background run between its halves, so its thread is read while it runs."""

from __future__ import annotations

import threading

import httpx
from langgraph_sdk import get_sync_client

from tests.conftest import LiveServers
from tests.http.test_agent_server_runs import frames_of, gate, gated_app

__all__ = ["gate"]  # the fixture, used by name

#: how many times a test looks for a deleted thread (its deletion follows the run's end)
LOOKS = 300


def thread_of(location: str) -> str:
    """The thread id of a run's ``Content-Location`` (``/threads/T/runs/R``)."""
    return location.split("/")[2]


def gone(url: str, thread_id: str) -> bool:
    """Whether the thread is deleted, looking until it is (or :data:`LOOKS` times)."""
    for _ in range(LOOKS):
        found = httpx.get(f"{url}/threads/{thread_id}")
        if found.status_code == 404:
            return True
        assert found.status_code == 200, found.text
        threading.Event().wait(0.05)
    return False


def test_a_stateless_wait_answers_and_deletes_its_thread_unless_kept(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    gate[1].set()
    body = {"assistant_id": "gated", "input": {"gate": gate[0]}}
    waited = httpx.post(f"{server.url}/runs/wait", json=body, timeout=30)
    assert waited.status_code == 200, waited.text
    assert waited.json()["said"] == ["first", "second"]
    thread_id = thread_of(waited.headers["content-location"])
    assert httpx.get(f"{server.url}/threads/{thread_id}").status_code == 404

    kept = httpx.post(f"{server.url}/runs/wait", json={**body, "on_completion": "keep"}, timeout=30)
    assert kept.status_code == 200, kept.text
    kept_thread = thread_of(kept.headers["content-location"])
    state = httpx.get(f"{server.url}/threads/{kept_thread}/state").json()
    assert state["values"]["said"] == ["first", "second"]
    # the Python SDK's stateless wait (thread_id None) reads the same
    sdk = get_sync_client(url=server.url)
    assert sdk.runs.wait(None, "gated", input={"gate": gate[0]})["said"] == ["first", "second"]


def test_a_stateless_stream_sends_every_frame_then_deletes_its_thread(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    gate[1].set()
    body = {"assistant_id": "gated", "input": {"gate": gate[0]}, "stream_mode": ["values"]}
    with httpx.stream("POST", f"{server.url}/runs/stream", json=body, timeout=30) as stream:
        assert stream.status_code == 200
        thread_id = thread_of(stream.headers["content-location"])
        frames = frames_of(stream)
    assert [name for _, name, _ in frames] == ["metadata", "values", "values", "values"]
    assert frames[-1][2]["said"] == ["first", "second"]
    assert gone(server.url, thread_id)

    body["on_completion"] = "keep"
    with httpx.stream("POST", f"{server.url}/runs/stream", json=body, timeout=30) as stream:
        kept = thread_of(stream.headers["content-location"])
        assert frames_of(stream)[-1][2]["said"] == ["first", "second"]
    assert httpx.get(f"{server.url}/threads/{kept}").status_code == 200


def test_a_stateless_background_run_keeps_its_thread_while_it_runs(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    created = httpx.post(
        f"{server.url}/runs", json={"assistant_id": "gated", "input": {"gate": gate[0]}}
    )
    assert created.status_code == 200, created.text
    run = created.json()
    thread_id = run["thread_id"]
    assert run["status"] == "running"
    assert created.headers["content-location"] == f"/threads/{thread_id}/runs/{run['run_id']}"
    base = f"{server.url}/threads/{thread_id}"
    assert httpx.get(base).status_code == 200  # held by the gate: the run runs on it
    assert httpx.get(f"{base}/runs/{run['run_id']}").json()["status"] == "running"
    gate[1].set()
    assert gone(server.url, thread_id)  # the run ended: its thread went with it

    kept = httpx.post(
        f"{server.url}/runs",
        json={"assistant_id": "gated", "input": {"gate": gate[0]}, "on_completion": "keep"},
    ).json()
    joined = httpx.get(
        f"{server.url}/threads/{kept['thread_id']}/runs/{kept['run_id']}/join", timeout=30
    )
    assert joined.json()["said"] == ["first", "second"]


def test_stateless_runs_refuse_what_is_wrong(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    body = {"assistant_id": "gated", "input": {"gate": gate[0]}}
    for path in ("/runs", "/runs/wait", "/runs/stream"):
        bad = httpx.post(f"{server.url}{path}", json={**body, "on_completion": "later"})
        assert bad.status_code == 422 and "on_completion" in bad.text, path
        reject = httpx.post(f"{server.url}{path}", json={**body, "if_not_exists": "reject"})
        assert reject.status_code == 422 and "if_not_exists" in reject.text, path
    unknown = httpx.post(f"{server.url}/runs/wait", json={"assistant_id": "nope", "input": {}})
    assert unknown.status_code == 404


def test_a_run_is_not_deleted_and_says_why(
    app_env: dict[str, str], live_servers: LiveServers, gate: tuple[str, threading.Event]
) -> None:
    server = live_servers.start(gated_app(app_env))
    gate[1].set()
    body = {"assistant_id": "gated", "input": {"gate": gate[0]}, "on_completion": "keep"}
    waited = httpx.post(f"{server.url}/runs/wait", json=body, timeout=30)
    location = waited.headers["content-location"]
    refused = httpx.delete(f"{server.url}{location}")
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "unsupported_operation"
    assert httpx.get(f"{server.url}{location}").json()["status"] == "success"
