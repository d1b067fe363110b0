"""SIGTERM with open streams, SIGKILL mid-turn, restart: the `span-relay serve` process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import SSE_HEADERS, events_of, free_port, iter_frames, parse_frame

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite

REFUNDS = "How do refunds work?"


class Process:
    def __init__(self, data_dir: Path, log_level: str = "warning", **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = shutil.which("span-relay", path=str(Path(sys.executable).parent))
        assert exe, "span-relay is not installed in this environment"
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
        environ.update(
            {
                "RELAY_DATA_DIR": str(data_dir),
                "RELAY_FAULTS": "1",
                "OTEL_TRACES_EXPORTER": "none",
                **env,
            }
        )
        self.proc = subprocess.Popen(
            [exe, "serve", "--port", str(self.port), "--log-level", log_level, "--graceful-s", "5"],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60  # a bound on a hang (a loaded machine starts slowly)
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
            if self.proc.poll() is not None:
                break
        raise RuntimeError(f"server did not start: {self.output()}")

    def output(self) -> str:
        if self.proc.poll() is None:
            return ""
        return self.proc.stdout.read().decode() if self.proc.stdout else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for p in started:
        p.stop()


def test_sigterm_tells_open_streams_to_reconnect(tmp_path: Path, processes: list[Process]) -> None:
    server = Process(tmp_path / "data", RELAY_SHUTDOWN_GRACE_S="0.5")
    processes.append(server)
    # generate sleeps for the longest delay a fault allows (600 s): a process that waited
    # for the turn instead of cutting it after its shutdown grace would outlive the
    # generous wait below. No duration is measured.
    with (
        httpx.Client(timeout=30) as c,
        c.stream(
            "POST",
            f"{server.url}/chat",
            json={"message": REFUNDS},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:600"},
        ) as r,
    ):
        frames = iter_frames(r)
        first = next(f for f in frames if f.event)
        turn_id = first.json["turn_id"]
        next(f for f in frames if f.event == "node_started" and f.json["node"] == "generate")
        server.proc.send_signal(signal.SIGTERM)
        rest = list(frames)  # ends cleanly: the server closes the body after the frame
    last = rest[-1]
    assert last.event == "reconnect", [f.raw for f in rest]
    assert last.json["reason"] == "server_shutdown"
    assert last.json["last_seq"] >= 1 and last.id is None
    server.proc.wait(timeout=60)  # a bound on a hang: the turn itself would take 600 s
    # a new process on the same data: the turn is over, and says how
    again = Process(tmp_path / "data")
    processes.append(again)
    turn = httpx.get(f"{again.url}/turns/{turn_id}").json()
    assert turn["status"] == "interrupted"
    with (
        httpx.Client(timeout=10) as c,
        c.stream(
            "GET",
            f"{again.url}/turns/{turn_id}/events",
            headers={"Last-Event-ID": str(last.json["last_seq"])},
        ) as r,
    ):
        events = events_of(list(iter_frames(r)))
    assert [e["type"] for e in events] == ["error"]
    assert events[0]["code"] == "interrupted"
    assert events[0]["seq"] > last.json["last_seq"]


def test_sigkill_mid_turn_then_restart(tmp_path: Path, processes: list[Process]) -> None:
    server = Process(tmp_path / "data")
    processes.append(server)
    with (
        httpx.Client(timeout=30) as c,
        c.stream(
            "POST",
            f"{server.url}/chat",
            json={"message": REFUNDS},
            headers={**SSE_HEADERS, "X-Relay-Fault": "generate=delay:30"},
        ) as r,
    ):
        frames = iter_frames(r)
        turn_id = next(f for f in frames if f.event).json["turn_id"]
        next(f for f in frames if f.event == "node_started")
        server.proc.kill()
        server.proc.wait(timeout=10)
    again = Process(tmp_path / "data")
    processes.append(again)
    assert httpx.get(f"{again.url}/turns/{turn_id}").json()["status"] == "interrupted"
    r = httpx.get(f"{again.url}/turns/{turn_id}/events", timeout=10)
    frames = [parse_frame(raw, 0) for raw in r.text.split("\n\n") if raw]
    assert frames[-1].event == "error" and frames[-1].json["code"] == "interrupted"
    end = frames[-1].json["seq"]
    url = f"{again.url}/turns/{turn_id}/events"
    # the made-up end is recorded: every reader gets the same one, and one that has it
    # gets 204 (an EventSource stops), never a new end under a new seq each time
    assert httpx.get(url, timeout=10).text == r.text
    assert httpx.get(url, headers={"Last-Event-ID": str(end)}, timeout=10).status_code == 204
    # a reader that had read further while the process lived gets its own end once
    ahead = httpx.get(url, headers={"Last-Event-ID": str(end + 5)}, timeout=10)
    frames = [parse_frame(raw, 0) for raw in ahead.text.split("\n\n") if raw]
    assert frames[-1].json["code"] == "interrupted" and frames[-1].json["seq"] == end + 6
    assert httpx.get(url, headers={"Last-Event-ID": str(end + 6)}, timeout=10).status_code == 204


def test_paused_turn_survives_restart(tmp_path: Path, processes: list[Process]) -> None:
    server = Process(tmp_path / "data")
    processes.append(server)
    paused = httpx.post(
        f"{server.url}/chat",
        timeout=30,
        json={"message": "Please refund order 1234 ($20).", "thread_id": "t-restart"},
    ).json()
    assert paused["status"] == "paused"
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=15)
    again = Process(tmp_path / "data")
    processes.append(again)
    assert httpx.get(f"{again.url}/turns/{paused['turn_id']}").json()["status"] == "paused"
    with (
        httpx.Client(timeout=30) as c,
        c.stream(
            "POST",
            f"{again.url}/chat/resume",
            headers=SSE_HEADERS,
            json={
                "thread_id": "t-restart",
                "turn_id": paused["turn_id"],
                "resume": {"approved": True},
            },
        ) as r,
    ):
        events = events_of(list(iter_frames(r)))
    assert events[-1]["type"] == "turn_completed"
    assert "refunded $20.00" in events[-1]["response"]["answer"]
    assert events[-1]["human_wait_ms"] > 0
    # the seq goes on from where the first process left it: never reused
    assert events[0]["seq"] > 10
