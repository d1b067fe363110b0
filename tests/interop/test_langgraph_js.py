"""LangGraph's own JavaScript client, ``@langchain/langgraph-sdk`` (the one agent-chat-ui and
``useStream`` are built on), against span-relay's Agent Server API on a real uvicorn.

tests/interop/langgraph_js/client.mjs makes the calls those frontends make (the graph's
assistant, a thread, a run streamed in ``values``, ``messages-tuple``, ``updates`` and
``custom`` at once, the thread's state and history, an interrupt seen in ``values`` and
answered with ``command.resume``, a run waited for) and prints what the client got; this
test reads it as such a frontend would, from span-relay and from LangGraph's own Agent
Server (``langgraph dev``) serving the same graphs: the same script passes against both.
The packages come from ``npm ci`` against the committed lock file."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent_server_graphs import ANSWER, agent_server_app
from tests.conftest import LiveServers
from tests.interop.langgraph_dev import langgraph_dev as peer
from tests.node_packages import node_project

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite

CLIENT_DIR = Path(__file__).parent / "langgraph_js"
NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


@pytest.fixture(scope="module")
def js_client() -> Path:
    return node_project(CLIENT_DIR, "LangGraph's JavaScript client")


@pytest.fixture(scope="module")
def langgraph_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` serving CLIENT_DIR's langgraph.json (its graphs.py)
    (tests/interop/langgraph_dev.py); its base URL."""
    logs = tmp_path_factory.mktemp("langgraph-dev")
    workdir = logs / "project"
    workdir.mkdir()
    for name in ("langgraph.json", "graphs.py"):
        shutil.copy(CLIENT_DIR / name, workdir / name)
    with peer(workdir, logs) as url:
        yield url


def run_client(folder: Path, url: str, gates: Path) -> dict[str, Any]:
    done = subprocess.run(
        ["node", "client.mjs", url, str(gates)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def of(parts: list[dict[str, Any]], name: str) -> list[Any]:
    return [p["data"] for p in parts if p["event"] == name]


def check_report(report: dict[str, Any], whole_rejoin: bool = True) -> str:
    """What a frontend reads of the client's report, the same from either server; the
    chat run's id. ``whole_rejoin``: a rejoined stream holds every frame after the cut
    (span-relay's); the peer's loses the ``custom`` frames written while no one read."""
    chat_id = str(uuid.uuid5(NAMESPACE_GRAPH, "chat"))
    assert [a["assistant_id"] for a in report["assistants"]] == [chat_id]
    assert report["assistant"]["assistant_id"] == chat_id

    parts = report["chat"]
    assert parts[0]["event"] == "metadata" and parts[0]["data"]["run_id"]
    values = of(parts, "values")
    assert values[-1]["messages"][-1]["content"] == ANSWER
    assert values[-1]["messages"][0]["type"] == "human"
    # messages-tuple: [message, metadata]: the chunks the model streamed, in order, then
    # the message the node returned (a new one: it was not streamed under its id), whole
    tuples = of(parts, "messages")
    assert tuples and all(isinstance(t, list) and len(t) == 2 for t in tuples)
    chunks = [m for m, _ in tuples if m["type"] == "AIMessageChunk"]
    assert "".join(chunk["content"] for chunk in chunks) == ANSWER
    assert [(m["type"], m["content"]) for m, _ in tuples[len(chunks) :]] == [("ai", ANSWER)]
    assert {meta["langgraph_node"] for _, meta in tuples} == {"agent"}
    assert [list(u) for u in of(parts, "updates")] == [["prepare"], ["agent"]]
    assert of(parts, "custom") == [{"stage": "prepare"}]

    state = report["state"]
    assert state["values"]["messages"][-1]["content"] == ANSWER and state["next"] == []
    assert state["checkpoint"]["thread_id"] == report["thread"]["thread_id"]
    history = report["history"]
    assert history[0]["checkpoint"] == state["checkpoint"]
    for newer, older in itertools.pairwise(history):
        assert newer["parent_checkpoint"] == older["checkpoint"]
    assert report["thread_after"]["status"] == "idle"

    asked = of(report["asked"], "values")
    assert asked[-1]["__interrupt__"][0]["value"] == {"question": "Ship it?"}
    assert report["asked_state"]["next"] == ["ask"]
    assert report["asked_state"]["interrupts"][0]["value"] == {"question": "Ship it?"}
    answered = of(report["answered"], "values")
    assert answered[-1] == {"question": "Ship it?", "answer": "yes"}

    assert report["waited"]["messages"][-1]["content"] == ANSWER

    # the thread list: the graph's threads by the metadata their runs wrote, newest first
    listed = [t["thread_id"] for t in report["listed"]]
    assert listed == [report["waited_thread"], report["thread"]["thread_id"]]
    assert all(t["metadata"]["graph_id"] == "chat" for t in report["listed"])
    assert report["created"]["metadata"] == {"topic": "refunds"}
    assert [t["thread_id"] for t in report["by_topic"]] == [report["created"]["thread_id"]]

    # a run stream cut after the third part, and joined again from the last id the client
    # had: the rest, nothing twice
    first, rest = report["first_part"], report["rest"]
    assert of(first, "custom") == [{"part": n} for n in range(3)]
    updates = [list(u) for u in of(first + rest, "updates")]
    if whole_rejoin:
        assert of(rest, "custom") == [{"part": n} for n in range(3, 6)]
        assert updates == [["before_gate"], ["after_gate"]]
    else:  # langgraph-api 0.16.7 loses frames written while no one read: here its custom
        # parts after the cut (0 of 3), and at times the first step's update
        assert all(part in [{"part": n} for n in range(3, 6)] for part in of(rest, "custom"))
        assert updates in ([["before_gate"], ["after_gate"]], [["after_gate"]])
    assert all(p["id"] for p in first[1:])  # (the peer gives its metadata frame no id)
    run_id = first[0]["data"]["run_id"]
    assert report["running_read"]["status"] == "running"
    assert report["joined"]["parts"] == [0, 1, 2, 3, 4, 5]
    assert report["ended_read"]["status"] == "success"
    assert [r["run_id"] for r in report["listed_runs"]] == [run_id]
    # a background run (the peer may have it queued), cancelled: interrupted
    assert report["started"]["status"] in ("pending", "running")
    assert report["cancelled_read"]["status"] == "interrupted"
    assert report["cancel_ended"] == 404
    assert report["stateless"]["messages"][-1]["content"] == ANSWER
    return str(parts[0]["data"]["run_id"])


def test_the_javascript_client_streams_reads_and_resumes_against_span_relay(
    js_client: Path, app_env: dict[str, str], live_servers: LiveServers, tmp_path: Path
) -> None:
    server = live_servers.start(agent_server_app(app_env))
    run_id = check_report(run_client(js_client, server.url, tmp_path))
    # the run is a span-relay turn: its record, under the run's id
    record = httpx.get(f"{server.url}/turns/{run_id}", timeout=30).json()
    assert record["status"] == "answered" and record["graph"] == "chat"


def test_the_same_client_script_passes_against_langgraph_dev(
    js_client: Path, langgraph_dev: str, tmp_path: Path
) -> None:
    """The peer that proves the shapes: LangGraph's Agent Server (`langgraph dev`, in its
    own venv) serving the same graphs from this folder's langgraph.json."""
    check_report(run_client(js_client, langgraph_dev, tmp_path), whole_rejoin=False)
