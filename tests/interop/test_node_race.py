"""Racing exports: a Node.js agent whose SDK exports each span on its own, concurrently
(``SimpleSpanProcessor``, one gRPC or HTTP request per span), so that a run's root can
reach the relay before its last node and nodes out of order (tests/interop/node/race.mjs).
The receiver's settle window (RELAY_OTLP_SETTLE_MS) puts them back in the order they ran:
every node is streamed, in order, in every turn; nothing is late. The agent sends no
topology, so the graph is discovered; a paused turn resumes in a new trace and the
turn's stream goes on; the replay equals the live stream."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.interop.conftest import TurnReader, assert_well_formed, grpc_endpoint
from tests.interop.test_node import node_agent  # noqa: F401  (the npm ci fixture)

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite


def race(
    node_dir: Path,
    server: Any,
    protocol: str,
    mode: str,
    turn_ids: list[str],
    processor: str = "simple",
) -> list[dict[str, str]]:
    endpoint = grpc_endpoint(server) if protocol == "grpc" else f"{server.url}/v1/traces"
    env = {
        **os.environ,
        "PROTOCOL": protocol,
        "PROCESSOR": processor,
        "ENDPOINT": endpoint,
        "TURN_IDS": ",".join(turn_ids),
        "MODE": mode,
    }
    done = subprocess.run(
        ["node", "race.mjs"], cwd=node_dir, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def nodes_of(events: list[dict[str, Any]], type_: str) -> list[str]:
    return [e["node"] for e in events if e["type"] == type_]


@pytest.mark.parametrize("protocol", ["grpc", "http-proto"])
def test_twenty_racing_turns_lose_no_node(node_agent, relay_server, protocol) -> None:  # noqa: F811
    turn_ids = [uuid.uuid4().hex for _ in range(20)]
    readers = [TurnReader(relay_server.url, t).start() for t in turn_ids]
    race(node_agent, relay_server, protocol, "answer", turn_ids)
    for turn_id, reader in zip(turn_ids, readers, strict=True):
        events = reader.join()
        assert_well_formed(events)
        assert nodes_of(events, "node_started") == ["plan", "search", "answer"], turn_id
        assert nodes_of(events, "node_completed") == ["plan", "search", "answer"], turn_id
        assert events[-1]["response"]["answer"] == "Booked: the 9:40 to Lisbon."
    stats = relay_server.relay.receiver.stats
    assert stats["late"] == 0 and stats["mapping_failures"] == 0
    assert stats["accepted"] == 20 * 4


@pytest.mark.parametrize("processor", ["simple", "batch"])
def test_pause_resume_discovered_and_replayed(node_agent, relay_server, processor) -> None:  # noqa: F811
    turn_id = uuid.uuid4().hex
    reader = TurnReader(relay_server.url, turn_id).start()
    race(node_agent, relay_server, "grpc", "pause", [turn_id], processor)
    assert reader.wait_for("paused")
    race(node_agent, relay_server, "grpc", "resume", [turn_id], processor)
    live = reader.join()
    assert_well_formed(live)
    kinds = [e["type"] for e in live if e["type"] in ("graph_topology", "paused", "turn_completed")]
    assert kinds == ["graph_topology", "paused", "graph_topology", "turn_completed"]
    assert nodes_of(live, "node_completed") == ["plan", "search", "approve", "approve", "answer"]
    paused = next(e for e in live if e["type"] == "paused")
    assert paused["interrupts"] == [{"id": f"int-{turn_id}", "value": {"question": "Book it?"}}]
    # a relay-only server offers no /chat/resume: the hint says to resume in the agent
    assert paused["resume"]["path"] is None and "another process" in paused["resume"]["message"]
    # no topology was sent: discovered, and the resume goes on with the same graph
    assert live[0]["discovered"] is True
    graph = [e for e in live if e["type"] == "graph_discovered"][-1]
    assert [(e["source"], e["target"]) for e in graph["edges"]] == [
        ("__start__", "plan"),
        ("plan", "search"),
        ("search", "approve"),
        ("approve", "answer"),
        ("answer", "__end__"),
    ]
    record = httpx.get(f"{relay_server.url}/turns/{turn_id}").json()
    assert record["status"] == "answered" and record["message"] == "Find me a flight"
    replay = httpx.get(f"{relay_server.url}/turns/{turn_id}/events?source=spans", timeout=30)
    assert replay.status_code == 200
    replayed = [
        json.loads(line[5:]) for line in replay.text.splitlines() if line.startswith("data:")
    ]
    assert replayed == [e for e in live if e["type"] != "message_saved"]
