"""Operations: Prometheus metrics and structured JSON logs with trace and turn ids."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import httpx

from tests.cli.test_restart import Process
from tests.conftest import SSE_HEADERS, events_of, iter_frames, stream_post


def test_prometheus_metrics(make_server, client: httpx.Client) -> None:
    server = make_server(RELAY_METRICS="prometheus")
    events = events_of(
        stream_post(client, f"{server.url}/chat", {"message": "How do refunds work?"}), trailer=True
    )
    text = client.get(f"{server.url}/metrics").text

    def value(name: str, **labels: str) -> float:
        found = maybe(name, **labels)
        if found is None:
            raise AssertionError(f"{name} {labels} not in /metrics")
        return found

    def maybe(name: str, **labels: str) -> float | None:
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return None

    assert value("relay_events_published_total", type="node_started") == 4
    assert value("relay_events_published_total", type="turn_completed") == 1
    assert value("relay_streams_open") == 0
    assert value("relay_spans_dropped_total") == 0
    assert value("relay_bus_lag_milliseconds_count") == len(events)
    # a reader that leaves mid-turn is counted as cut; generate sleeps the longest delay a
    # fault allows, so the turn is mid-way for as long as the test looks (it is cancelled
    # at the end), however slow the machine
    with (
        httpx.Client(timeout=30) as c,
        c.stream(
            "POST",
            f"{server.url}/chat?on_disconnect=continue",
            json={"message": "How do refunds work?"},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:600"},
        ) as r,
    ):
        turn_id = next(f for f in iter_frames(r) if f.event).json["turn_id"]
    # the server counts the cut when it notices the client has gone: wait for that (the
    # deadline only turns a hang into a failure; a fixed sleep raced the machine's load)
    deadline = time.monotonic() + 30
    while True:
        text = client.get(f"{server.url}/metrics").text
        if maybe("relay_readers_cut_total", reason="gone") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert value("relay_readers_cut_total", reason="gone") == 1
    assert client.post(f"{server.url}/turns/{turn_id}/cancel").status_code == 202


def test_metrics_off_by_default(server, client: httpx.Client) -> None:
    assert client.get(f"{server.url}/metrics").status_code == 404


def test_json_logs_carry_trace_and_turn(tmp_path: Path) -> None:
    server = Process(tmp_path / "data", log_level="info", RELAY_LOG_FORMAT="json")
    try:
        answer = httpx.post(
            f"{server.url}/chat", timeout=30, json={"message": "How do refunds work?"}
        ).json()
    finally:
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=15)
    lines = [
        json.loads(line)
        for line in server.proc.stdout.read().decode().splitlines()
        if line.startswith("{")
    ]
    started = [e for e in lines if e["message"] == "run started"]
    assert started, lines
    assert started[0]["turn_id"] == answer["turn_id"]
    assert started[0]["trace_id"] == answer["trace_id"]
    assert any(e["logger"] == "uvicorn.access" for e in lines)
