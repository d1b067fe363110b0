"""LangGraph's JavaScript client for the streaming protocol (``@langchain/langgraph-sdk``'s
``ThreadStream`` and its SSE transport, what ``@langchain/react`` v1's ``useStream`` runs
on) against span-relay's ``/threads/{id}/commands`` and ``/threads/{id}/stream/events``
and against LangGraph's own Agent Server (``langgraph dev``) serving the same graphs.

tests/interop/protocol_js/client.mjs runs three chats on a thread through
``client.threads.stream()``, each awaiting ``thread.output``, the third with its stream
cut once; tests/interop/protocol_js/resend.mjs cuts one event stream of the transport
after a thread's third run and counts the events its reconnect delivers again (with the
client as it is, and with a ``Last-Event-ID`` added to the reconnect). What the client
sends on a reconnect is measured, not assumed: no ``since``, no ``Last-Event-ID``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agent_server_graphs import ANSWER, agent_server_app
from tests.conftest import LiveServers
from tests.interop.test_langgraph_js import langgraph_dev  # noqa: F401 (a fixture)
from tests.node_packages import node_project

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite

CLIENT_DIR = Path(__file__).parent / "protocol_js"


@pytest.fixture(scope="module")
def protocol_js() -> Path:
    return node_project(CLIENT_DIR, "LangGraph's JavaScript client (streaming protocol)")


def run_script(folder: Path, script: str, url: str, mode: str) -> dict[str, Any]:
    done = subprocess.run(
        ["node", script, url, mode], cwd=folder, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture
def relay_url(app_env: dict[str, str], live_servers: LiveServers) -> str:
    return live_servers.start(agent_server_app(app_env)).url


def test_thread_stream_runs_chats_through_a_cut_on_span_relay(
    protocol_js: Path, relay_url: str
) -> None:
    report = run_script(protocol_js, "client.mjs", relay_url, "plain")
    # each run's output is its own state: 2, 4, 6 messages, the answer last
    assert [o["messages"] for o in report["outputs"]] == [2, 4, 6]
    assert all(o["answer"] == ANSWER and o["notes"] == "ready" for o in report["outputs"])
    assert len({o["run_id"] for o in report["outputs"]}) == 3
    # the third run's stream was cut and reconnected; the client sent no cursor
    assert [c["cut"] for c in report["connections"]] == [False, False, True, False]
    assert report["sent_since"] is False and report["sent_last_event_id"] is False
    # without a cursor, the reconnect starts at the latest turn: what the client had of it
    cut = report["connections"][2]
    assert report["resent_per_reconnect"] == [cut["received"]]


def test_events_resent_per_reconnect_on_span_relay(protocol_js: Path, relay_url: str) -> None:
    plain = run_script(protocol_js, "resend.mjs", relay_url, "plain")
    assert plain["finished"] and plain["sent_since"] is False
    assert plain["sent_last_event_id"] is False
    first, again = plain["connections"]
    assert first["cut"] and first["received"] == 5  # no cursor: the latest turn only
    assert plain["resent_per_reconnect"] == [5]  # that turn again, not the thread
    assert again["received"] == 10  # and the fourth run

    cursor = run_script(protocol_js, "resend.mjs", relay_url, "cursor")
    assert cursor["finished"] and cursor["sent_last_event_id"] is True
    assert cursor["resent_per_reconnect"] == [0]
    assert cursor["connections"][1]["received"] == 5  # the fourth run's, nothing twice


def test_the_same_scripts_against_langgraph_dev(
    protocol_js: Path,
    langgraph_dev: str,  # noqa: F811
) -> None:
    """The Agent Server (the peer's pinned langgraph-api) serves the protocol too; its
    thread stream replays the thread's whole buffer to every connection."""
    report = run_script(protocol_js, "client.mjs", langgraph_dev, "plain")
    assert len(report["outputs"]) == 3  # (each output: what the replay resolved it with)
    assert report["sent_since"] is False and report["sent_last_event_id"] is False

    for mode in ("plain", "cursor"):
        measured = run_script(protocol_js, "resend.mjs", langgraph_dev, mode)
        assert measured["finished"]
        assert measured["connections"][0]["received"] == 15  # the three runs
        assert measured["resent_per_reconnect"] == [15]  # all of them, cursor or not
