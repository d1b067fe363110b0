"""Parity, the heart of issue 4: a turn replayed from stored spans is the event stream the
live UI saw, for each of the four turn kinds, after a real restart of the server.

The real app runs as ``span-relay serve`` subprocesses on 127.0.0.1 (RELAY_FAULTS=1, its
own RELAY_DATA_DIR). Server A runs the turns through POST /chat (and /chat/resume) with
``Accept: text/event-stream``; each turn's live events are read back from
``GET /turns/{id}/events`` once it ended. A is stopped; server B starts on the same data
directory and replays each turn with ``?source=spans&speed=0``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from relay.delivery.replay import MAX_SPEED
from tests.interop.conftest import wait_until
from tests.store.conftest import Launcher
from tests.store.support import (
    KINDS,
    Frame,
    RelayProcess,
    events,
    get_frames,
    live_events,
    parse_frames,
    replayed_events,
    run_turn,
    without_seq,
)

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite


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
        assert [e["run_kind"] for e in seen if e["type"] == "graph_topology"] == ["chat", "resume"]
        assert "tool_started" in types and "tool_completed" in types
        assert len({e["trace_id"] for e in seen}) == 2
        assert "human_wait_ms" in seen[-1]
    if kind == "failed":
        assert seen[-1]["type"] == "error" and seen[-1]["code"] == "node_failed"
        assert seen[-1]["node"] == "generate"


def test_replay_is_framed_like_the_live_stream(recorded_turns: Any) -> None:
    server, live = recorded_turns
    turn_id, seen = live["answered"]
    with httpx.stream(
        "GET",
        f"{server.url}/turns/{turn_id}/events",
        params={"source": "spans", "speed": "0"},
        headers={"Accept": "text/event-stream"},
    ) as r:
        body = r.read().decode()
        assert r.headers["cache-control"] == "no-cache, no-transform"
        assert r.headers["x-accel-buffering"] == "no"
        assert r.headers["x-relay-source"] == "spans"
    assert body.startswith("retry: 2000\n\nid: 1\nevent: graph_topology\ndata: {")
    assert "\r" not in body and body.endswith("\n\n")
    # NDJSON and a cursor, as on the live stream
    with httpx.stream(
        "GET",
        f"{server.url}/turns/{turn_id}/events",
        params={"source": "spans", "speed": "0", "after": "3"},
        headers={"Accept": "application/x-ndjson"},
    ) as r:
        lines = [line for line in r.read().decode().split("\n") if line]
    assert len(lines) == len(seen) - 3
    assert '"seq":4,' in lines[0]


def test_unknown_turn_is_404_and_bad_parameters_are_400(recorded_turns: Any) -> None:
    server, live = recorded_turns
    r = httpx.get(
        f"{server.url}/turns/0123456789abcdef0123456789abcdef/events", params={"source": "spans"}
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_turn"
    turn_id = live["answered"][0]
    for params in (
        {"source": "spans", "speed": "-1"},
        {"source": "spans", "speed": "fast"},
        {"source": "spans", "speed": "nan"},
        {"source": "jaeger"},
        {"source": "spans", "after": "999"},
    ):
        r = httpx.get(f"{server.url}/turns/{turn_id}/events", params=params)
        assert r.status_code == 400, (params, r.text)


def test_past_turns_are_listed_newest_first(recorded_turns: Any) -> None:
    server, live = recorded_turns
    listed = httpx.get(f"{server.url}/turns", params={"limit": 3}).json()
    ids = [t["turn_id"] for t in listed["turns"]]
    assert ids == [live[k][0] for k in ("failed", "paused", "refused")]
    assert listed["next_before"] == listed["turns"][-1]["started_at"]
    rest = httpx.get(
        f"{server.url}/turns", params={"limit": 3, "before": listed["next_before"]}
    ).json()
    assert [t["turn_id"] for t in rest["turns"]] == [live["answered"][0]]
    assert rest["next_before"] is None
    paused = listed["turns"][1]
    assert paused["message"] == KINDS["paused"][0] and paused["status"] == "answered"
    assert paused["duration_ms"] > 0 and paused["thread_id"]


GAP_S = 600  # between the made-up turn's two nodes, by their span times


def turn_with_a_long_gap(url: str) -> str:
    """A stored turn whose spans put ``GAP_S`` between node plan's end and node act's
    start: the made-up graph of the interop tests (tests/interop/spans.py), its spans
    sent to the relay's OTLP receiver with plan (and the root's start) moved back."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tests.interop.spans import Collecting, made_up_run, provider_with

    exporter = Collecting()
    provider = provider_with(exporter)
    turn_id = made_up_run(provider, markers=False)
    provider.shutdown()
    request = encode_spans(exporter.spans)
    for span in request.resource_spans[0].scope_spans[0].spans:
        if span.name in ("node plan", "chat tiny-model"):
            span.start_time_unix_nano -= GAP_S * 10**9
            span.end_time_unix_nano -= GAP_S * 10**9
        elif span.name == "invoke_agent external":
            span.start_time_unix_nano -= GAP_S * 10**9
    r = httpx.post(
        f"{url}/v1/traces",
        content=request.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    # a received turn is indexed under its turn once its spans settled and its run was
    # admitted (relay/ingest/received_turns.py): then its replay answers
    wait_until(
        lambda: (
            httpx.get(
                f"{url}/turns/{turn_id}/events", params={"source": "spans", "speed": 0}, timeout=30
            ).status_code
            == 200
        ),
        what="the received turn's replay",
    )
    return turn_id


class PacedReader:
    """Reads one replay in a thread, until told to stop (it is paced to last 10 min)."""

    def __init__(self, url: str, speed: float) -> None:
        self.url = url
        self.speed = speed
        self.frames: list[Frame] = []
        self.stop = threading.Event()
        self.arrived = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with httpx.stream(
            "GET",
            self.url,
            params={"source": "spans", "speed": self.speed},
            headers={"Accept": "text/event-stream"},
            timeout=60,
        ) as r:
            for frame in parse_frames(r.iter_text()):
                with self.arrived:
                    self.frames.append(frame)
                    self.arrived.notify_all()
                if self.stop.is_set():
                    return

    def wait_until(self, predicate: Callable[[list[Frame]], bool], what: str) -> None:
        with self.arrived:  # the timeout only turns a hang into a failure
            assert self.arrived.wait_for(lambda: predicate(self.frames), 60), what

    def events(self) -> list[str]:
        with self.arrived:
            return [f"{f.event}:{(f.data or {}).get('node')}" for f in self.frames if f.event]


def test_pacing_follows_the_span_times(launcher: Launcher) -> None:
    """Pacing by order, not by stopwatch: the gap in the stored turn is ten minutes, so a
    replay at speed 1 is still waiting for the event after it while the replays at
    speed 0 and at the highest speed (0.6 s for that gap) are read whole; on a machine
    however slow, ten minutes do not pass meanwhile. How each speed scales each gap is
    checked exactly on ``relay.delivery.replay.schedule`` (test_replay.py)."""
    server = launcher.start(RELAY_HEARTBEAT_S="0.1", RELAY_OTLP_HTTP="true")
    turn_id = turn_with_a_long_gap(server.url)
    url = f"{server.url}/turns/{turn_id}/events"
    paced = PacedReader(url, speed=1)
    try:
        # speed 1: plan is over; act starts ten minutes later, and in the meantime the
        # heartbeats keep the connection alive
        def in_the_gap(frames: list[Frame]) -> bool:
            done = [i for i, f in enumerate(frames) if f.event == "node_completed"]
            return bool(done) and any(f.comment == "hb" for f in frames[done[0] :])

        paced.wait_until(in_the_gap, "the speed-1 replay never reached the gap")
        whole = [f"{e['type']}:{e.get('node')}" for e in replayed_events(server.url, turn_id)]
        assert whole == [
            "graph_topology:None",
            "node_started:plan",
            "node_completed:plan",
            "node_started:act",
            "tool_started:act",
            "tool_completed:act",
            "node_completed:act",
            "turn_completed:None",
        ]
        started = time.monotonic()
        fastest = get_frames(url, {"source": "spans", "speed": MAX_SPEED})
        # the highest speed still keeps the gap, scaled: act cannot come before its due
        # time (a lower bound by causality: the server waits at least that long, and a
        # loaded machine only adds to it)
        assert [f"{e['type']}:{e.get('node')}" for e in events(fastest)] == whole
        act = [f for f in fastest if f.event == "node_started"][1]
        assert act.arrived - started >= GAP_S / MAX_SPEED
        # ...while the speed-1 replay, started before both, still waits for act
        assert paced.events() == whole[:3], paced.events()
    finally:
        paced.stop.set()  # seen at its next frame: a heartbeat comes every 0.1 s
        paced.thread.join(30)


def test_a_running_turn_is_409_until_it_ends(launcher: Launcher) -> None:
    server = launcher.start()
    turn_id = uuid.uuid4().hex
    # generate sleeps for the longest delay a fault allows, and the test ends the turn
    # itself once it has asked: the turn is running when asked however slow the machine
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST",
            f"{server.url}/chat",
            json={"message": "How do refunds work?", "turn_id": turn_id},
            headers={"Accept": "text/event-stream", "X-Relay-Fault": "generate=delay:600"},
        ) as r,
    ):
        frames = parse_frames(r.iter_text())
        next(
            f
            for f in frames
            if f.event == "node_started" and f.data and f.data["node"] == "generate"
        )
        early = client.get(
            f"{server.url}/turns/{turn_id}/events", params={"source": "spans", "speed": 0}
        )
        assert early.status_code == 409 and early.json()["error"]["code"] == "turn_running"
        assert client.post(f"{server.url}/turns/{turn_id}/cancel").status_code == 202
        rest = [f.data for f in frames if f.event]
    assert rest[-1] is not None and rest[-1]["code"] == "cancelled"
    replayed = replayed_events(server.url, turn_id)
    assert without_seq(replayed) == without_seq(live_events(server.url, turn_id))


def test_expired_turn_is_410_with_a_clear_message(launcher: Launcher) -> None:
    server = launcher.start(RELAY_STORE_MAX_TURNS="1")
    old = run_turn(server.url, "answered")
    new = run_turn(server.url, "refused")
    # no wait for the store's batch: a replay request flushes the store processor first,
    # and a write with a run root applies RELAY_STORE_MAX_TURNS in the same call
    r = httpx.get(f"{server.url}/turns/{old}/events", params={"source": "spans"})
    assert r.status_code == 410, r.text
    error = r.json()["error"]
    assert error["code"] == "turn_expired"
    assert "RELAY_STORE_MAX_TURNS=1" in error["message"] and "no longer stored" in error["message"]
    kept = events(get_frames(f"{server.url}/turns/{new}/events", {"source": "spans", "speed": 0}))
    assert [e["type"] for e in kept[-2:]] == ["turn_completed", "message_saved"]
