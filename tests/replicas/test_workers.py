"""``span-relay serve --workers 2`` for real: the command in a subprocess on 127.0.0.1,
sharing Redis (the bus) and a fresh PostgreSQL database (turns, spans, checkpoints).

A request cannot choose its worker, so a test pins one: it opens connections until one
lands on the worker it wants (``/healthz`` says which, bounded tries), and every answer
names the worker that served it (``X-Relay-Worker``), which the test asserts. Where a
turn must still be running when the test acts, the offline model waits an hour between
the words of an answer it streams (``RELAY_OFFLINE_WORD_DELAY_S``): the turn runs until
it is cancelled, whatever the machine's speed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port, iter_frames
from tests.interop.conftest import assert_well_formed, wait_until

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite

ROOT = Path(__file__).resolve().parents[2]
REFUND = "Please refund order 1234 ($20)."


class Workers:
    """``span-relay serve --workers N`` in a subprocess."""

    def __init__(self, env: dict[str, str], cwd: Path, n: int = 2) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = cwd / "serve.log"
        self._out = self.log.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "relay.cli",
                "serve",
                "--workers",
                str(n),
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            env=env,
            cwd=cwd,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )
        self.n = n

    def wait_ready(self) -> None:
        def answers() -> bool:
            assert self.proc.poll() is None, self.log.read_text()
            try:  # the parent listens at once; a worker accepts once it has started
                return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(answers, timeout=180, what="a worker answering")
        wait_until(
            lambda: len(self.pids()) == self.n, timeout=180, what=f"{self.n} workers answering"
        )

    def pids(self, tries: int = 100) -> dict[int, int]:
        """worker -> pid, from ``/healthz`` on fresh connections (what answered)."""
        seen: dict[int, int] = {}
        for _ in range(tries):
            try:
                body = httpx.get(f"{self.url}/healthz", timeout=2).json()
            except httpx.HTTPError:
                continue
            seen[body["worker"]] = body["pid"]
            if len(seen) == self.n:
                break
        return seen

    @contextlib.contextmanager
    def client(self, worker: int, tries: int = 200) -> Iterator[httpx.Client]:
        """A client whose one connection is served by ``worker``."""
        for _ in range(tries):
            with httpx.Client(
                base_url=self.url,
                timeout=30,
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            ) as client:
                try:
                    answered = client.get("/healthz").json().get("worker")
                except httpx.HTTPError:
                    continue
                if answered == worker:
                    yield client
                    return
        raise AssertionError(f"no connection reached worker {worker} in {tries} tries")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode


@pytest.fixture
def serve_workers(
    redis_url: str, postgres_url: str, tmp_path: Path
) -> Iterator[Callable[..., Workers]]:
    servers: list[Workers] = []

    def start(**overrides: str) -> Workers:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
        env.update(
            RELAY_BUS=redis_url,
            RELAY_STORE=postgres_url,
            PYTHONPATH=str(ROOT),
            RELAY_DATA_DIR=str(tmp_path / "data"),
            OTEL_TRACES_EXPORTER="none",
            RELAY_OFFLINE_WORD_DELAY_S="3600",
            RELAY_INSTANCE_ID="test-host",
            **overrides,
        )
        server = Workers(env, tmp_path)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()


def worker_of(response: httpx.Response) -> int:
    return int(response.headers["x-relay-worker"])


def test_a_turn_paused_on_one_worker_resumes_on_the_other(serve_workers) -> None:
    server = serve_workers()
    with server.client(0) as a:
        paused = a.post("/chat", json={"message": REFUND})
        assert paused.status_code == 200 and worker_of(paused) == 0
        turn_id = paused.json()["turn_id"]
        thread_id = paused.json()["thread_id"]
        assert paused.json()["status"] == "paused"
    with server.client(1) as b:  # read and resumed on worker 1 (the checkpoint is 0's)
        record = b.get(f"/turns/{turn_id}")
        assert worker_of(record) == 1 and record.json()["status"] == "paused"
        resumed = b.post(
            "/chat/resume",
            json={"thread_id": thread_id, "turn_id": turn_id, "resume": {"approved": True}},
        )
        assert resumed.status_code == 200 and worker_of(resumed) == 1, resumed.text
        assert resumed.json()["status"] == "answered"
        on_b = read_events(b, turn_id)
    assert_well_formed(on_b)
    assert [e["run_kind"] for e in on_b if e["type"] == "graph_topology"] == ["chat", "resume"]
    with server.client(0) as a:  # the same log on worker 0, and the same record
        assert read_events(a, turn_id) == on_b
        assert a.get(f"/turns/{turn_id}").json()["status"] == "answered"


def test_a_running_turn_is_followed_and_cancelled_through_the_other_worker(serve_workers) -> None:
    server = serve_workers()
    with server.client(1) as b:  # held after its first word, on worker 1
        started = b.post(
            "/chat", headers={"Prefer": "respond-async"}, json={"message": "How do refunds work?"}
        )
        assert started.status_code == 202 and worker_of(started) == 1, started.text
        turn_id = started.json()["turn_id"]
    # followed live on worker 0, from the start, into the run worker 1 is running
    first: list[dict] = []
    with server.client(0) as a, a.stream("GET", f"/turns/{turn_id}/events") as stream:
        assert stream.status_code == 200 and worker_of(stream) == 0
        for frame in iter_frames(stream):
            if frame.event is not None:
                first.append(frame.json)
            if first and first[-1]["type"] == "text_delta":
                break  # the first word: the run waits for the next one
    # cancelled through worker 0: worker 1, which runs it, cancels it
    with server.client(0) as a:
        assert a.get(f"/turns/{turn_id}").json()["status"] == "running"
        cancel = a.post(f"/turns/{turn_id}/cancel")
        assert worker_of(cancel) == 0
        assert cancel.status_code == 202, cancel.text
        assert cancel.json() == {"turn_id": turn_id, "cancelled": True, "status": "cancelling"}
    # the rest of the stream on worker 1 with Last-Event-ID: no gap, no duplicate
    with (
        server.client(1) as b,
        b.stream(
            "GET", f"/turns/{turn_id}/events", headers={"Last-Event-ID": str(first[-1]["seq"])}
        ) as stream,
    ):
        assert stream.status_code == 200 and worker_of(stream) == 1
        rest = [f.json for f in iter_frames(stream) if f.event is not None]
    events = first + rest
    assert_well_formed(events)
    assert events[-1]["type"] == "error" and events[-1]["code"] == "cancelled"
    with server.client(0) as a:
        assert wait_until(
            lambda: a.get(f"/turns/{turn_id}").json()["status"] == "cancelled",
            what="the record, on worker 0",
        )
    assert server.stop() == 0


def read_events(client: httpx.Client, turn_id: str) -> list[dict]:
    with client.stream("GET", f"/turns/{turn_id}/events") as stream:
        assert stream.status_code == 200
        return [
            f.json
            for f in iter_frames(stream)
            if f.event is not None and f.json["type"] != "message_saved"
        ]


def test_a_killed_worker_is_replaced_and_cleans_up_only_its_own_turns(serve_workers) -> None:
    server = serve_workers()
    held = {}
    for worker in (0, 1):  # a turn held in generate on each worker
        with server.client(worker) as c:
            started = c.post(
                "/chat",
                headers={"Prefer": "respond-async"},
                json={"message": "How do refunds work?"},
            )
            assert started.status_code == 202 and worker_of(started) == worker
            held[worker] = started.json()["turn_id"]
    before = server.pids()
    os.kill(before[1], signal.SIGKILL)
    # the parent starts worker 1 again; it takes up the turn worker 1 ran (no tool was
    # caught in its cut step: recovered from its checkpoint, held in generate again)
    wait_until(
        lambda: server.pids().get(1) not in (None, before[1]), timeout=90, what="a new worker 1"
    )
    with server.client(0) as a:
        assert wait_until(
            lambda: a.get(f"/turns/{held[1]}").json()["attempt"] == 2,
            what="worker 1's turn taken up by the new worker 1",
        )
        assert a.get(f"/turns/{held[1]}").json()["status"] == "running"
        # worker 0's turn was not touched by worker 1's start
        assert a.get(f"/turns/{held[0]}").json()["status"] == "running"
        assert a.get(f"/turns/{held[0]}").json()["attempt"] == 1
    with server.client(1) as b:  # cancelled through the new worker 1
        assert b.post(f"/turns/{held[0]}/cancel").json()["cancelled"] is True
        assert wait_until(
            lambda: b.get(f"/turns/{held[0]}").json()["status"] == "cancelled",
            what="worker 0's turn cancelled",
        )
    after = server.pids()
    # SIGTERM to the parent stops every worker, and serve exits 0
    assert server.stop() == 0
    for pid in (*after.values(), before[0]):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
