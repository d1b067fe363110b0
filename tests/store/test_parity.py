"""Parity, the heart of issue 4: a turn replayed from stored spans is the event stream the
live UI saw, for each of the four turn kinds, after a real restart of the server.

The real app runs as ``span-relay serve`` subprocesses on 127.0.0.1 (RELAY_FAULTS=1, its
own RELAY_DATA_DIR). Server A runs the turns through POST /chat (and /chat/resume) with
``Accept: text/event-stream``; each turn's live events are read back from
``GET /turns/{id}/events`` once it ended. A is stopped; server B starts on the same data
directory and replays each turn with ``?source=spans&speed=0``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from tests.store.conftest import Launcher
from tests.store.support import (
    KINDS,
    RelayProcess,
    events,
    get_frames,
    live_events,
    replayed_events,
    run_turn,
    without_seq,
)


@pytest.fixture(scope="module")
def recorded_turns(launcher: Launcher) -> tuple[RelayProcess, dict[str, tuple[str, Any]]]:
    """Server A ran the four kinds; B (restarted on the same data dir) serves the replays."""
    first = launcher.start()
    turns = {kind: run_turn(first.url, kind) for kind in KINDS}
    live = {kind: (turn_id, live_events(first.url, turn_id)) for kind, turn_id in turns.items()}
    first.stop()
    second = launcher.start(first.data_dir, RELAY_HEARTBEAT_S="0.2")
    return second, live


@pytest.mark.parametrize("kind", list(KINDS))
def test_replay_after_restart_equals_live(recorded_turns: Any, kind: str) -> None:
    server, live = recorded_turns
    turn_id, seen = live[kind]
    replayed = replayed_events(server.url, turn_id, speed=0)
    assert without_seq(replayed) == without_seq(seen)
    assert [e["seq"] for e in replayed] == list(range(1, len(replayed) + 1))
    # what each kind looks like (so parity is not between two empty streams); an answer's
    # message_saved trails its turn_completed, live and replayed alike
    if kind != "failed":
        assert seen[-1]["type"] == "message_saved"
        seen = seen[:-1]
    types = [e["type"] for e in seen]
    assert types[0] == "graph_topology" and len(types) >= 6
    if kind in ("answered", "refused"):
        assert types[-1] == "turn_completed"
        assert seen[-1]["response"]["status"] == kind
    if kind == "refused":
        assert "retrieve_context" not in {e.get("node") for e in seen}
    if kind == "paused":
        assert "paused" in types and types[-1] == "turn_completed"
        assert [e["run_kind"] for e in seen if e["type"] == "graph_topology"] == \
            ["chat", "resume"]
        assert "tool_started" in types and "tool_completed" in types
        assert len({e["trace_id"] for e in seen}) == 2
        assert "human_wait_ms" in seen[-1]
    if kind == "failed":
        assert seen[-1]["type"] == "error" and seen[-1]["code"] == "node_failed"
        assert seen[-1]["node"] == "generate"


def test_replay_is_framed_like_the_live_stream(recorded_turns: Any) -> None:
    server, live = recorded_turns
    turn_id, seen = live["answered"]
    with httpx.stream("GET", f"{server.url}/turns/{turn_id}/events",
                      params={"source": "spans", "speed": "0"},
                      headers={"Accept": "text/event-stream"}) as r:
        body = r.read().decode()
        assert r.headers["cache-control"] == "no-cache, no-transform"
        assert r.headers["x-accel-buffering"] == "no"
        assert r.headers["x-relay-source"] == "spans"
    assert body.startswith("retry: 2000\n\nid: 1\nevent: graph_topology\ndata: {")
    assert "\r" not in body and body.endswith("\n\n")
    # NDJSON and a cursor, as on the live stream
    with httpx.stream("GET", f"{server.url}/turns/{turn_id}/events",
                      params={"source": "spans", "speed": "0", "after": "3"},
                      headers={"Accept": "application/x-ndjson"}) as r:
        lines = [line for line in r.read().decode().split("\n") if line]
    assert len(lines) == len(seen) - 3
    assert '"seq":4,' in lines[0]


def test_unknown_turn_is_404_and_bad_parameters_are_400(recorded_turns: Any) -> None:
    server, live = recorded_turns
    r = httpx.get(f"{server.url}/turns/0123456789abcdef0123456789abcdef/events",
                  params={"source": "spans"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_turn"
    turn_id = live["answered"][0]
    for params in ({"source": "spans", "speed": "-1"}, {"source": "spans", "speed": "fast"},
                   {"source": "spans", "speed": "nan"}, {"source": "jaeger"},
                   {"source": "spans", "after": "999"}):
        r = httpx.get(f"{server.url}/turns/{turn_id}/events", params=params)
        assert r.status_code == 400, (params, r.text)


def test_past_turns_are_listed_newest_first(recorded_turns: Any) -> None:
    server, live = recorded_turns
    listed = httpx.get(f"{server.url}/turns", params={"limit": 3}).json()
    ids = [t["turn_id"] for t in listed["turns"]]
    assert ids == [live[k][0] for k in ("failed", "paused", "refused")]
    assert listed["next_before"] == listed["turns"][-1]["started_at"]
    rest = httpx.get(f"{server.url}/turns",
                     params={"limit": 3, "before": listed["next_before"]}).json()
    assert [t["turn_id"] for t in rest["turns"]] == [live["answered"][0]]
    assert rest["next_before"] is None
    paused = listed["turns"][1]
    assert paused["message"] == KINDS["paused"][0] and paused["status"] == "answered"
    assert paused["duration_ms"] > 0 and paused["thread_id"]


def test_pacing_follows_the_span_times(launcher: Launcher) -> None:
    server = launcher.start(RELAY_HEARTBEAT_S="0.1")
    turn_id = run_turn(server.url, "answered", headers={"X-Relay-Fault": "generate=delay:0.6"})

    def arrivals(speed: float) -> tuple[list[str], float, float, int]:
        start = time.monotonic()
        frames = get_frames(f"{server.url}/turns/{turn_id}/events",
                            {"source": "spans", "speed": speed})
        evs = [f for f in frames if f.event]
        gen = [f.arrived for f in evs if f.data and f.data.get("node") == "generate"]
        beats = sum(1 for f in frames if f.comment == "hb")
        return [f.event or "" for f in evs], gen[1] - gen[0], time.monotonic() - start, beats

    order0, gap0, total0, _ = arrivals(0)
    order1, gap1, _, beats1 = arrivals(1)
    order4, gap4, _, _ = arrivals(4)
    assert order0 == order1 == order4
    assert gap0 < 0.2 and total0 < 1.0
    assert 0.45 < gap1 < 1.5  # generate slept 0.6 s
    assert 0.08 < gap4 < 0.45  # four times faster
    assert gap1 > 2 * gap4
    assert beats1, "heartbeats keep a slow replay's connection alive"


def test_a_running_turn_is_409_until_it_ends(launcher: Launcher) -> None:
    server = launcher.start()
    turn_id = uuid.uuid4().hex
    with httpx.Client(timeout=30) as client, client.stream(
            "POST", f"{server.url}/chat",
            json={"message": "How do refunds work?", "turn_id": turn_id},
            headers={"Accept": "text/event-stream",
                     "X-Relay-Fault": "generate=delay:1.5"}) as r:
        frames = r.iter_text()
        seen = ""
        while "graph_topology" not in seen:  # the run has started (generate sleeps 1.5 s)
            seen += next(frames)
        early = client.get(f"{server.url}/turns/{turn_id}/events",
                           params={"source": "spans", "speed": 0})
        assert early.status_code == 409 and early.json()["error"]["code"] == "turn_running"
        for _ in frames:
            pass
    replayed = replayed_events(server.url, turn_id)
    assert without_seq(replayed) == without_seq(live_events(server.url, turn_id))


def test_expired_turn_is_410_with_a_clear_message(launcher: Launcher) -> None:
    server = launcher.start(RELAY_STORE_MAX_TURNS="1")
    old = run_turn(server.url, "answered")
    new = run_turn(server.url, "refused")
    time.sleep(0.3)  # the store processor's 100 ms batch
    r = httpx.get(f"{server.url}/turns/{old}/events", params={"source": "spans"})
    assert r.status_code == 410, r.text
    error = r.json()["error"]
    assert error["code"] == "turn_expired"
    assert "RELAY_STORE_MAX_TURNS=1" in error["message"] and "no longer stored" in error["message"]
    kept = events(get_frames(f"{server.url}/turns/{new}/events",
                             {"source": "spans", "speed": 0}))
    assert [e["type"] for e in kept[-2:]] == ["turn_completed", "message_saved"]
