"""Shared fixtures: a real uvicorn serving the real app on 127.0.0.1, and an SSE reader.

httpx's in-process ASGI transport buffers whole bodies and proves nothing about
streaming, so every test that streams talks to a real server over a real socket.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from opentelemetry.sdk.trace import SpanLimits, TracerProvider

from tests.spanrec import RecordingProcessor, Tracing

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """How ``make test`` shares the suite out (``pytest -n 4 --dist loadgroup``).

    ``tryfirst``: xdist's own hook of the same name (in each worker) turns a test's
    ``xdist_group`` mark into the suffix of its node id that ``loadgroup`` schedules by;
    a mark added after it has run is never seen, and the group's tests are spread over
    every worker (each setting the module's fixture up again).

    The tests of a module that sets up a module-scoped fixture (a server, recorded turns)
    are one xdist group, run by one worker: the fixture is set up once, not once a
    worker. Every other test is scheduled on its own, the longest first (``slow``, then
    ``browser``): the workers start on the tests that would otherwise keep one of them
    busy after the others are done. The sort is stable, so a module's tests keep their
    order among themselves."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("slow") is not None:
            return 0
        return 1 if item.get_closest_marker("browser") is not None else 2

    for item in items:
        if _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    items.sort(key=rank)


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())


def service_missing(what: str, how: str) -> None:
    """A missing service fails under CI=true and skips elsewhere, saying how to enable it."""
    if IN_CI:
        pytest.fail(f"{what} is required in CI: {how}")
    pytest.skip(f"{what} not available: {how}")


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1, for a server started as a process
    (an in-process :class:`LiveServer` keeps its socket from the start instead)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """The app in a real uvicorn on 127.0.0.1, in a thread with its own event loop.

    The listening socket is bound here, before the thread starts, and handed to uvicorn:
    no other test (or xdist worker) can take the port between choosing it and serving."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop: asyncio.AbstractEventLoop | None = None
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self._socket.getsockname()[1],
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=2,
            )
        )
        self._thread = threading.Thread(target=self._run, name="uvicorn", daemon=True)

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._server.serve(sockets=[self._socket]))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.config.port}"

    def start(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop as ``span-relay serve`` stops on SIGTERM (:class:`relay.cli.RelayServer`):
        the relay's open streams end with a ``reconnect`` frame first, then uvicorn closes
        the connections (without it, every stream still open waits out uvicorn's graceful
        timeout before it is cut)."""
        relay = getattr(getattr(self.app, "state", None), "relay", None)
        if relay is not None:
            relay.begin_shutdown()
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self._socket.close()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the server's loop and return its result (to inspect the app)."""
        assert self.loop is not None

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=10)

    def task_count(self) -> int:
        return self.call(lambda: len(asyncio.all_tasks()) - 1)

    @property
    def relay(self) -> Any:
        return self.app.state.relay


def lag_after_end_recorded(
    server: LiveServer, seconds: float, statuses: tuple[str, ...] = ("paused",)
) -> None:
    """Widen the moment between a run writing its end (``paused``, ``answered``...) to its
    turn record and its task letting go of the thread: the record's worker thread sleeps
    after the write. A client that acts the moment it reads the run's terminal event (a
    resume, the thread's next message) lands in that window every time."""
    store = server.relay.turns.inner  # the store under the turn feed (relay/turns/feed.py)
    write = store._update

    def update(turn_id: str, changes: dict[str, Any]) -> None:
        write(turn_id, changes)
        if changes.get("status") in statuses:
            time.sleep(seconds)

    store._update = update


class ModelGate:
    """Holds the offline model's stream (``span_relay_demo.model.OfflineSupportModel``) chunk
    by chunk until the test lets it go on. A test makes an order happen with it ("the client had
    word k before word k+1 was written", "generate runs until the client has seen three
    heartbeats") instead of sleeping and hoping that the machine is fast enough: these
    tests run on 2 shared cores, where a thread can be off the CPU for half a second.

    Chunk n (counted over every model call in this process, from 0) is sent once
    :meth:`allow` has been called more than n times, or after :meth:`open`. A chunk held
    longer than ``timeout_s`` raises in the model (the turn ends partial or failed) and
    sets ``timed_out``: a test that expected the gate to be let go fails instead of
    hanging. Only an in-process server (``LiveServer``) sees the gate."""

    def __init__(self, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self.held = threading.Event()  # a model call is waiting at the gate
        self.timed_out = False
        self._lock = threading.Lock()
        self._allowed = 0
        self._claimed = 0

    def allow(self, n: int = 1) -> None:
        """Let ``n`` more chunks through."""
        with self._lock:
            self._allowed += n

    def open(self) -> None:
        """Let everything through, from now on."""
        with self._lock:
            self._allowed = sys.maxsize

    async def passage(self) -> None:
        """Wait, on the server's event loop and without blocking it, until the next chunk
        may go (polled: a cancelled run must not leave a thread waiting behind it)."""
        with self._lock:
            index = self._claimed
            self._claimed += 1
        deadline = time.monotonic() + self.timeout_s
        while True:
            with self._lock:
                if self._allowed > index:
                    return
            self.held.set()
            if time.monotonic() > deadline:
                self.timed_out = True
                raise TimeoutError(f"model chunk {index} was never let through the gate")
            await asyncio.sleep(0.002)


@pytest.fixture
def model_gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelGate]:
    """The offline model's streamed chunks wait at a :class:`ModelGate` (every in-process
    server of this test); at teardown the gate opens, so nothing stays held."""
    from span_relay_demo.model import OfflineSupportModel

    gate = ModelGate()
    stream = OfflineSupportModel._astream

    async def gated(self: OfflineSupportModel, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for chunk in stream(self, *args, **kwargs):
            await gate.passage()
            yield chunk

    monkeypatch.setattr(OfflineSupportModel, "_astream", gated)
    yield gate
    gate.open()


@pytest.fixture
def app_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the app under test: embedded defaults in a fresh data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        {
            "RELAY_DATA_DIR": str(tmp_path / "data"),
            "RELAY_FAULTS": "1",
            "OTEL_TRACES_EXPORTER": "none",
            "RELAY_OFFLINE_WORD_DELAY_S": "0",
        }
    )
    return env


class LiveServers:
    """The in-process servers one test starts: ``start(app)`` serves an app in a
    :class:`LiveServer`; the ``live_servers`` fixture stops them all at the test's end.
    Every fixture that makes servers (``make_server``, the interop suite's ``make_relay``,
    the replicas' ``make_instance``) starts them through it."""

    def __init__(self) -> None:
        self.started: list[LiveServer] = []

    def start(self, app: Any) -> LiveServer:
        server = LiveServer(app).start()
        self.started.append(server)
        return server

    def stop_all(self) -> None:
        """Stop every server started so far (once: a second call stops nothing)."""
        while self.started:
            self.started.pop(0).stop()


#: the running test's :class:`LiveServers` (a worker runs one test at a time)
_RUNNING_SERVERS: list[LiveServers] = []


def stop_the_tests_servers() -> None:
    """Stop the servers the running test started, before a database or a schema they work
    in is dropped at its end: fixtures are torn down in the reverse order of their
    set-up, so a test that asked for ``make_server`` before ``postgres_url`` would have
    its database dropped under servers still running, each of which then waits out its
    pool's connect timeout flushing its last spans at stop."""
    for servers in _RUNNING_SERVERS:
        servers.stop_all()


@pytest.fixture
def live_servers() -> Iterator[LiveServers]:
    servers = LiveServers()
    _RUNNING_SERVERS.append(servers)
    try:
        yield servers
        servers.stop_all()
    finally:
        _RUNNING_SERVERS.remove(servers)


@pytest.fixture
def make_server(app_env: dict[str, str], live_servers: LiveServers) -> Callable[..., LiveServer]:
    """``make_server(**env)``: the demo app in a real uvicorn, on the test's environment."""
    from span_relay_demo.app import create_app

    def make(**overrides: str) -> LiveServer:
        return live_servers.start(create_app({**app_env, **overrides}))

    return make


@pytest.fixture
def server(make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server()


# -- reading streams ---------------------------------------------------------------------


@dataclass
class Frame:
    """One SSE frame as received: fields, the raw text, and when it arrived."""

    raw: str
    arrived: float
    id: str | None = None
    event: str | None = None
    data: str | None = None
    retry: int | None = None
    comment: str | None = None
    json: dict[str, Any] = field(default_factory=dict)


def parse_frame(raw: str, arrived: float) -> Frame:
    frame = Frame(raw=raw, arrived=arrived)
    data: list[str] = []
    for line in raw.split("\n"):
        if line.startswith(":"):
            frame.comment = line[1:].strip()
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            frame.id = value
        elif name == "event":
            frame.event = value
        elif name == "data":
            data.append(value)
        elif name == "retry":
            frame.retry = int(value)
    if data:
        import json

        frame.data = "\n".join(data)
        frame.json = json.loads(frame.data)
    return frame


def iter_frames(response: httpx.Response) -> Iterator[Frame]:
    """Frames as they arrive on the socket (split on the blank line, LF only)."""
    buffer = ""
    for chunk in response.iter_text():
        buffer += chunk
        while "\n\n" in buffer:
            raw, buffer = buffer.split("\n\n", 1)
            yield parse_frame(raw, time.monotonic())


def events_of(frames: list[Frame], trailer: bool = False) -> list[dict[str, Any]]:
    """The events among the frames. The ``message_saved`` that may trail a
    ``turn_completed`` is left out unless ``trailer`` (tests that want it ask)."""
    events = [
        f.json for f in frames if f.event is not None and f.event not in ("reconnect", "reset")
    ]
    if not trailer and events and events[-1]["type"] == "message_saved":
        events.pop()
    return events


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(30.0)) as c:
        yield c


SSE_HEADERS = {"Accept": "text/event-stream", "Content-Type": "application/json"}


def stream_post(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    on_frame: Callable[[Frame], None] | None = None,
) -> list[Frame]:
    """POST and read the whole SSE response; asserts the streaming headers. ``on_frame``
    is called with each frame the moment it has arrived (to let a held server go on)."""
    with client.stream("POST", url, json=body, headers={**SSE_HEADERS, **(headers or {})}) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-cache, no-transform"
        assert r.headers["x-accel-buffering"] == "no"
        frames = []
        for frame in iter_frames(r):
            frames.append(frame)
            if on_frame is not None:
                on_frame(frame)
        return frames


def stream_get(
    client: httpx.Client,
    url: str,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> list[Frame]:
    """GET a stream (a turn's events) and read it whole; asserts the streaming headers."""
    with client.stream(
        "GET", url, params=params, headers={"Accept": "text/event-stream", **(headers or {})}
    ) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-cache, no-transform"
        return list(iter_frames(r))


# -- tracer providers -------------------------------------------------------------------


@pytest.fixture
def make_tracing() -> Iterator[Callable[..., Tracing]]:
    """``make_tracing(span_limits=None)``: a real SDK tracer provider with a recorder
    (tests/spanrec.py); every provider made is shut down at the test's end."""
    providers: list[TracerProvider] = []

    def make(span_limits: SpanLimits | None = None) -> Tracing:
        provider = TracerProvider(span_limits=span_limits) if span_limits else TracerProvider()
        recorder = RecordingProcessor()
        provider.add_span_processor(recorder)
        providers.append(provider)
        return Tracing(provider, provider.get_tracer("unit-tests"), recorder)

    yield make
    for provider in providers:
        provider.shutdown()


@pytest.fixture
def tracing(make_tracing: Callable[..., Tracing]) -> Tracing:
    return make_tracing()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each store test twice: on SQLite, and on the real PostgreSQL (``postgres_url``)."""
    return request.param


# -- the shared services, one share per xdist worker ---------------------------------

POSTGRES_URL = os.environ.get("RELAY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("RELAY_TEST_REDIS", "redis://127.0.0.1:6379/0")
POSTGRES_HOW = (
    "install psycopg ('pip install \"psycopg[binary]>=3.2\"') and run PostgreSQL on "
    "127.0.0.1:5432 with a database 'test' (trust auth), or set RELAY_TEST_POSTGRES "
    "to a postgresql:// URL"
)


def xdist_worker() -> int | None:
    """This process's xdist worker number (``gw3``: 3), or None outside ``pytest -n``."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else None


def redis_test_url() -> str:
    """``RELAY_TEST_REDIS``, with a database number of this worker's own under xdist
    (``/1`` for gw0, ``/2`` for gw1, ...): a test that reads or clears a whole database
    sees only its worker's keys."""
    worker = xdist_worker()
    if worker is None:
        return REDIS_URL
    base, _, _ = REDIS_URL.rpartition("/")
    return f"{base}/{1 + worker % 15}"


def postgres_admin(url: str) -> Any:
    """An autocommit connection to ``url``; PostgreSQL or psycopg missing: the test skips
    saying how to enable them (under CI=true it fails)."""
    try:
        import psycopg
    except ImportError:
        service_missing("psycopg", POSTGRES_HOW)
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        service_missing(f"PostgreSQL at {url} ({' '.join(str(exc).split())[:120]})", POSTGRES_HOW)


def create_database(name: str) -> str:
    """A new, empty database ``name`` beside ``RELAY_TEST_POSTGRES``'s (dropped first if it
    is left from an earlier run); its URL. Made from ``template0``: whatever the machine's
    ``template1`` holds (another install's tables) is not copied into it."""
    with postgres_admin(POSTGRES_URL) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name} TEMPLATE template0")
    base, _, _ = POSTGRES_URL.rpartition("/")
    return f"{base}/{name}"


def drop_database(name: str) -> None:
    """Drop the database ``name``, once the running test's servers are stopped."""
    stop_the_tests_servers()
    with postgres_admin(POSTGRES_URL) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """The PostgreSQL database this test process works in: ``RELAY_TEST_POSTGRES`` itself,
    or, under xdist, a database of the worker's own (``relay_test_{run}_gw0``...), made
    afresh for the session and dropped after it. Advisory locks (a thread's lock, a
    migration's) are per database, so workers never wait on each other's. ``{run}`` is
    the session's (xdist's test run id): two sessions on one machine (two checkouts, two
    people) never drop or share each other's databases."""
    worker = xdist_worker()
    if worker is None:
        yield POSTGRES_URL
        return
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:8] or f"p{os.getppid()}"
    name = f"relay_test_{run}_gw{worker}"
    url = create_database(name)
    try:
        yield url
    finally:
        drop_database(name)


@pytest.fixture(scope="session")
def stale_schema(postgres_database: str) -> Iterator[str]:
    """A schema of this session's own in its database, holding another span-relay's
    tables of older shapes (tests/stale_tables.py), dropped after the session. Every
    ``postgres_url`` puts it on the search_path after the test's own schema, as a shared
    database's ``public`` would be: each test that uses PostgreSQL proves that the relay's
    stores and LangGraph's work in their own schema only."""
    from tests.stale_tables import plant

    schema = f"relay_stale_{uuid.uuid4().hex[:12]}"
    with postgres_admin(postgres_database) as admin:
        plant(admin, schema)
    try:
        yield schema
    finally:
        with postgres_admin(postgres_database) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def postgres_url(postgres_database: str, stale_schema: str) -> Iterator[str]:
    """A fresh schema in the real PostgreSQL (``RELAY_TEST_POSTGRES``, default
    ``postgresql://postgres@127.0.0.1:5432/test``; under xdist the worker's own database),
    dropped afterwards. Its search_path is that schema, then :func:`stale_schema` (never
    ``public``: what the shared database holds there is no test's business). PostgreSQL
    (or psycopg) missing: the test skips saying how to enable it, except under CI=true,
    where it fails. The replicas suite overrides it with a database of its own per test
    (tests/replicas/conftest.py)."""
    schema = f"relay_test_{uuid.uuid4().hex[:12]}"
    with postgres_admin(postgres_database) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in postgres_database else "?"
        try:
            yield f"{postgres_database}{sep}options=-csearch_path%3D{schema}%2C{stale_schema}"
        finally:
            stop_the_tests_servers()
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
