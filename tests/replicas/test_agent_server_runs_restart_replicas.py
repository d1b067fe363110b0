"""The runs routes across two replicas (Redis bus, PostgreSQL turn store and checkpointer),
beside tests/replicas/test_agent_server_runs_replicas.py: a background run replica A runs
is joined and cut on replica B, joined again on A after the frame B saw last (nothing
lost, nothing twice); after A stopped, B and a new A give the whole stream again; a run A
runs is cancelled from B, and B's answer is the cancel (its error from the shared log,
before A has written the run's record). The gated graph of
tests/http/test_agent_server_runs.py holds the run between its halves."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from tests.conftest import LiveServer, LiveServers
from tests.http.test_agent_server_runs import GATES, frames_of, gate, gated_app, start_run

__all__ = ["gate"]  # the fixture, used by name

MODES = [("stream_mode", m) for m in ("values", "updates", "custom")]


def test_a_run_on_one_replica_is_joined_cut_and_resumed_on_the_other(
    app_env: dict[str, str],
    tmp_path: Path,
    live_servers: LiveServers,
    redis_url: str,
    postgres_url: str,
    gate: tuple[str, threading.Event],
) -> None:
    def replica(name: str) -> LiveServer:
        env = {
            **app_env,
            "RELAY_DATA_DIR": str(tmp_path / name),
            "RELAY_INSTANCE_ID": name,
            "RELAY_BUS": redis_url,
            "RELAY_STORE": postgres_url,
        }
        return live_servers.start(gated_app(env))

    a, b = replica("a"), replica("b")
    thread_id = "5c2e8f0a-1b3d-4e6f-8a9b-0c1d2e3f4a01"
    run_id = start_run(a.url, thread_id, gate[0])["run_id"]
    path = f"/threads/{thread_id}/runs/{run_id}"
    assert httpx.get(f"{b.url}{path}").json()["status"] == "running"
    assert [r["run_id"] for r in httpx.get(f"{b.url}/threads/{thread_id}/runs").json()] == [run_id]

    with httpx.stream("GET", f"{b.url}{path}/stream", params=MODES, timeout=30) as on_b:
        assert on_b.status_code == 200
        before = frames_of(on_b, stop_after=6)  # the gate holds the second step
    assert [name for _, name, _ in before] == [
        "metadata",
        "values",
        "custom",
        "custom",
        "custom",
        "updates",
    ]
    gate[1].set()
    with httpx.stream(
        "GET",
        f"{a.url}{path}/stream",
        params=MODES,
        headers={"Last-Event-ID": before[-1][0]},
        timeout=30,
    ) as on_a:
        rest = frames_of(on_a)
    assert [d for _, name, d in rest if name == "custom"] == [{"part": n} for n in range(3, 6)]
    assert rest[-1][1] == "values" and rest[-1][2]["said"] == ["first", "second"]
    joined = httpx.get(f"{b.url}{path}/join", timeout=30).json()
    assert joined["said"] == ["first", "second"]
    assert httpx.get(f"{b.url}{path}").json()["status"] == "success"

    with httpx.stream("GET", f"{b.url}{path}/stream", params=MODES, timeout=30) as whole:
        everything = frames_of(whole)
    assert everything == before + rest

    # A stops: B still has the whole stream, and so has a new A (the shared log, or the
    # stored spans)
    a.stop()
    with httpx.stream(
        "GET", f"{b.url}{path}/stream", params=MODES, headers={"Last-Event-ID": "-1"}
    ) as after_stop:
        assert frames_of(after_stop) == everything
    again = replica("a")
    with httpx.stream(
        "GET",
        f"{again.url}{path}/stream",
        params=MODES,
        headers={"Last-Event-ID": before[-1][0]},
        timeout=30,
    ) as on_new_a:
        assert frames_of(on_new_a) == rest

    # a run the new A runs, cancelled from B
    held = f"{gate[0]}-second"
    GATES[held] = threading.Event()
    try:
        second = start_run(again.url, thread_id, held)["run_id"]
        cancelled = httpx.post(
            f"{b.url}/threads/{thread_id}/runs/{second}/cancel", params={"wait": "1"}, timeout=30
        )
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["__error__"]["error"] == "cancelled"
        # its record follows the end in the log a moment later
        url = f"{again.url}/threads/{thread_id}/runs/{second}"
        for _ in range(300):
            status = httpx.get(url).json()["status"]
            if status != "running":
                break
            threading.Event().wait(0.05)
        assert status == "interrupted"
    finally:
        GATES.pop(held).set()
