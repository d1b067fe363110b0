"""LangGraph's own Python client, ``langgraph_sdk``, against span-relay's Agent Server API on a
real uvicorn and against LangGraph's Agent Server (``langgraph dev``) serving the same
graphs (tests/interop/langgraph_js/langgraph.json): tests/interop/langgraph_py/client.py
makes the calls agent-chat-ui and ``useStream`` make and prints a summary of what the
client got (ids named by kind and order, times dropped); the two summaries must be equal,
and the summary must say what those frontends read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent_server_graphs import ANSWER, agent_server_app
from tests.conftest import LiveServers
from tests.interop.langgraph_dev import langgraph_dev as peer

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite

GRAPHS = Path(__file__).parent / "langgraph_js"
CLIENT = Path(__file__).parent / "langgraph_py" / "client.py"


@pytest.fixture(scope="module")
def langgraph_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` serving GRAPHS' langgraph.json (tests/interop/langgraph_dev.py)."""
    logs = tmp_path_factory.mktemp("langgraph-dev-py")
    workdir = logs / "project"
    workdir.mkdir()
    for name in ("langgraph.json", "graphs.py"):
        shutil.copy(GRAPHS / name, workdir / name)
    with peer(workdir, logs) as url:
        yield url


def summary(url: str) -> dict[str, Any]:
    """client.py's summary of one server (run by this venv's Python: the SDK is a test
    dependency, requirements/lock.txt)."""
    done = subprocess.run(
        [sys.executable, str(CLIENT), url], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def of(parts: list[dict[str, Any]], name: str) -> list[Any]:
    return [p["data"] for p in parts if p["event"] == name]


def check(found: dict[str, Any]) -> None:
    """What a frontend reads of the summary, whichever server made it."""
    assert found["assistants"] == [["chat", "assistant#1"]]
    assert found["graph_nodes"] == ["__end__", "__start__", "agent", "prepare"]
    chat = found["chat"]
    assert chat[0]["event"] == "metadata"
    assert of(chat, "values")[-1]["messages"][-1]["content"] == ANSWER
    assert [list(u) for u in of(chat, "updates")] == [["prepare"], ["agent"]]
    assert of(chat, "custom") == [{"stage": "prepare"}]
    assert found["history_head_is_state"] and all(found["history_links"])
    assert of(found["asked"], "values")[-1]["__interrupt__"][0]["value"] == {"question": "Ship it?"}
    assert of(found["answered"], "values")[-1] == {"question": "Ship it?", "answer": "yes"}
    assert found["listed"] == ["thread#4", "thread#1"]
    nested = found["nested"]
    assert {p["event"] for p in nested} >= {"custom|research", "messages|research"}
    assert of(nested, "custom|research") == [{"searching": "tides"}]
    assert [list(u) for u in of(nested, "updates|research")] == [["search"], ["summarise"]]
    assert [list(u) for u in of(nested, "updates")] == [["plan"], ["research"]]
    assert found["store_search"] == [[["prefs", "ada"], "theme", {"color": "green"}]]
    assert found["store_after_delete"] is None


@pytest.fixture(scope="module")
def peer_summary(langgraph_dev: str) -> dict[str, Any]:
    return summary(langgraph_dev)


def test_the_python_client_gets_from_langgraph_dev_what_a_frontend_reads(
    peer_summary: dict[str, Any],
) -> None:
    check(peer_summary)


def test_the_python_client_gets_the_same_from_span_relay(
    app_env: dict[str, str], live_servers: LiveServers, peer_summary: dict[str, Any]
) -> None:
    server = live_servers.start(agent_server_app(app_env))
    found = summary(server.url)
    check(found)
    for key in peer_summary:
        assert found[key] == peer_summary[key], key
    assert found == peer_summary
