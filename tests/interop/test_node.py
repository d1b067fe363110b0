"""Another language: a Node.js agent (tests/interop/node/send.mjs, the OpenTelemetry JS SDK
2.x and its OTLP exporters) sends a made-up graph's spans to the receiver over gRPC,
HTTP/protobuf and HTTP/JSON; the turn's SSE stream shows them, nodes live.

Exporters resolve ``shutdown()`` even when delivery failed, so every check is on the
receiving side. The node modules come from ``npm ci`` against the committed lock file."""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.interop.conftest import TurnReader, assert_well_formed, live_check
from tests.node_packages import node_project

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite

NODE_DIR = Path(__file__).parent / "node"


@pytest.fixture(scope="module")
def node_agent() -> Path:
    """The Node.js agent's folder, its packages (the OpenTelemetry JS SDK) installed."""
    return node_project(NODE_DIR, "the Node.js interop packages")


NODES = ("fetch", "summarize")  # the order send.mjs runs them in


def run_node(
    node_dir: Path,
    protocol: str,
    endpoint: str,
    turn_id: str,
    hold: Callable[[str], None] | None = None,
    **env: str,
) -> str:
    """Run send.mjs; its stdout. With ``hold``, each node of the script runs until
    ``hold(node)`` has returned (HOLD=stdin: one line on its stdin per node)."""
    environ = {
        **os.environ,
        "PROTOCOL": protocol,
        "ENDPOINT": endpoint,
        "TURN_ID": turn_id,
        "NODE_SLEEP_MS": "0",
        **env,
    }
    if hold is not None:
        environ["HOLD"] = "stdin"
    proc = subprocess.Popen(
        ["node", "send.mjs"],
        cwd=node_dir,
        env=environ,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None
        for node in NODES if hold is not None else ():
            try:
                hold(node)
            finally:  # released even when the hold failed: the script ends either way
                with contextlib.suppress(BrokenPipeError):  # unless it already has
                    proc.stdin.write(f"{node}\n")
                    proc.stdin.flush()
        stdout, stderr = proc.communicate(timeout=60)  # a bound on a hang, not a timing
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    return stdout


EXPECTED = [
    "graph_topology",
    "node_started",
    "tool_started",
    "tool_completed",
    "node_completed",
    "node_started",
    "node_completed",
    "turn_completed",
]


@pytest.mark.parametrize("protocol", ["grpc", "http-proto", "http-json"])
def test_node_agent_streams_through_the_receiver(node_agent, relay_server, protocol) -> None:
    if protocol == "grpc":
        endpoint = f"http://{relay_server.relay.settings.otlp_grpc}"
    else:
        endpoint = f"{relay_server.url}/v1/traces"
    turn_id = uuid.uuid4().hex
    reader = TurnReader(relay_server.url, turn_id).start()
    hold, seen = live_check(reader)
    run_node(node_agent, protocol, endpoint, turn_id, hold=hold)
    events = reader.join()
    assert reader.types() == EXPECTED
    assert_well_formed(events)
    topology = events[0]
    assert topology["graph_id"] == "node_graph" and topology["thread_id"] == "node-thread"
    assert [n["id"] for n in topology["nodes"]] == ["__start__", "fetch", "summarize", "__end__"]
    assert [e["node"] for e in events if e["type"] == "node_started"] == ["fetch", "summarize"]
    tool = events[2]
    assert tool["tool"] == "track_parcel" and tool["node"] == "fetch"
    assert tool["call_id"] == "call-7"
    summarize = events[6]
    assert summarize["summary"] == {"model": "tiny-js", "input_tokens": 21, "output_tokens": 8}
    assert events[-1]["response"]["answer"] == "Your parcel is on its way."
    # the start markers: each node was shown running while it ran (the script held it
    # until the reader had its node_started)
    for node in NODES:
        assert f"node_started:{node}" in seen[node], seen
        assert f"node_completed:{node}" not in seen[node], seen
    record = httpx.get(f"{relay_server.url}/turns/{turn_id}").json()
    assert record["status"] == "answered"
    stats = relay_server.relay.receiver.stats
    assert stats["rejected"] == 0 and stats["mapping_failures"] == 0


def test_node_agent_with_the_token(node_agent, make_relay) -> None:
    server = make_relay(RELAY_API_TOKEN="s3cret")
    turn_id = uuid.uuid4().hex
    run_node(node_agent, "http-proto", f"{server.url}/v1/traces", turn_id)  # no token
    assert server.relay.receiver.stats["received"] == 0  # refused, though node exited 0
    run_node(node_agent, "http-proto", f"{server.url}/v1/traces", turn_id, TOKEN="s3cret")
    headers = {"Authorization": "Bearer s3cret"}
    reader = TurnReader(server.url, turn_id, headers=headers).start()
    assert reader.join()[-1]["type"] == "turn_completed"
