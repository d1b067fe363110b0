"""Memory given back after a large request body (relay/http/memory.py), on a real uvicorn:
``malloc_trim(0)`` runs once a request that read 1 MiB or more is answered, whatever the
answer (a 413 halfway through included), never after a small one, and one at a time;
glibc takes the fixed thresholds.
How much it gives back is the bench's figure (``memory.oversized_rss_mb``,
docs/performance.md), not a test's: RSS on a shared machine is no test of behaviour."""

from __future__ import annotations

import platform
import threading
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from relay.http.memory import LARGE_BODY_BYTES, TRIM, GiveBack, fix_thresholds
from tests.conftest import LiveServer, LiveServers

LIMIT = 4 * LARGE_BODY_BYTES


class Recorder:
    """A trim that counts its runs; ``release`` lets a run finish (held runs show that
    trims never overlap)."""

    def __init__(self, hold: bool = False) -> None:
        self.runs = 0
        self.running = 0
        self.most_at_once = 0
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.changed = threading.Condition()

    def __call__(self) -> None:
        with self.changed:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.started.set()
        self.release.wait(30)
        with self.changed:
            self.running -= 1
            self.runs += 1
            self.changed.notify_all()

    def wait_runs(self, n: int) -> bool:
        """Whether ``n`` runs have ended (waiting for them, at most 30 s)."""
        with self.changed:
            return self.changed.wait_for(lambda: self.runs >= n, 30)


async def _echo(request: Request) -> JSONResponse:
    """The body's size; 413 as soon as it is over LIMIT (as the relay's reader does)."""
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > LIMIT:
            return JSONResponse({"error": {"code": "body_too_large"}}, status_code=413)
    return JSONResponse({"size": size})


@pytest.fixture
def served(live_servers: LiveServers) -> Iterator[tuple[LiveServer, Recorder]]:
    recorder = Recorder()
    app = Starlette(routes=[Route("/echo", _echo, methods=["POST"])])
    yield live_servers.start(GiveBack(app, trim=recorder)), recorder


def test_a_small_body_is_never_followed_by_a_trim(served: tuple[LiveServer, Recorder]) -> None:
    server, recorder = served
    for _ in range(5):
        r = httpx.post(f"{server.url}/echo", content=b"x" * (LARGE_BODY_BYTES - 1))
        assert r.json() == {"size": LARGE_BODY_BYTES - 1}
    # a large one next: the first trim is its own
    r = httpx.post(f"{server.url}/echo", content=b"x" * LARGE_BODY_BYTES)
    assert r.status_code == 200
    assert recorder.wait_runs(1)
    assert recorder.runs == 1


def test_a_refused_large_body_is_followed_by_a_trim(served: tuple[LiveServer, Recorder]) -> None:
    server, recorder = served

    def chunks() -> Iterator[bytes]:  # no Content-Length: read until over the limit
        for _ in range(3 * LIMIT // LARGE_BODY_BYTES):
            yield b"x" * LARGE_BODY_BYTES

    try:
        status = httpx.post(f"{server.url}/echo", content=chunks()).status_code
    except httpx.HTTPError:  # answered and closed before the client sent it all
        status = 413
    assert status == 413
    assert recorder.wait_runs(1)


def test_trims_never_overlap(live_servers: LiveServers) -> None:
    recorder = Recorder(hold=True)
    app = Starlette(routes=[Route("/echo", _echo, methods=["POST"])])
    server = live_servers.start(GiveBack(app, trim=recorder))
    body = b"x" * LARGE_BODY_BYTES
    assert httpx.post(f"{server.url}/echo", content=body).status_code == 200
    assert recorder.started.wait(30)  # the first trim runs, held
    for _ in range(3):  # three more large requests while it runs: one more trim after it
        assert httpx.post(f"{server.url}/echo", content=body).status_code == 200
    recorder.release.set()
    assert recorder.wait_runs(2)
    assert recorder.most_at_once == 1
    # settled: exactly the held run and the one asked for while it ran
    assert httpx.post(f"{server.url}/echo", content=b"small").status_code == 200
    assert recorder.runs == 2


def test_the_relay_gives_memory_back(app_env: dict[str, str]) -> None:
    from span_relay_demo.app import create_app

    app = create_app(app_env)
    assert GiveBack in [m.cls for m in app.user_middleware]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibcs_malloc_trim_and_mallopt_are_found_and_run() -> None:
    assert TRIM is not None
    TRIM()
    assert fix_thresholds() is True  # glibc's mallopt said yes to both
