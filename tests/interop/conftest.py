"""Interop fixtures: the relay alone (``relay.app:create_relay_app``, the OTLP receivers
on) in a real uvicorn, exporters that send it spans, readers of its SSE streams, and
OpenInference's and OpenLLMetry's LangChain instrumentors as they ship (``instrumented``,
a module's worth of one, through a :class:`Switch`)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from tests.conftest import Frame, LiveServer, LiveServers, free_port, iter_frames
from tests.interop.agui_client import CLIENT_DIR
from tests.interop.restore import restored
from tests.node_packages import node_project


@pytest.fixture
def relay_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update({"RELAY_DATA_DIR": str(tmp_path / "relay"), "OTEL_TRACES_EXPORTER": "none"})
    return env


@pytest.fixture
def make_relay(relay_env: dict[str, str], live_servers: LiveServers) -> Callable[..., LiveServer]:
    """``make_relay(**env)``: the relay alone in a real uvicorn, its gRPC receiver on."""
    from relay.cli.relay_only import create_relay_app

    def make(**overrides: str) -> LiveServer:
        env = {**relay_env, "RELAY_OTLP_GRPC": f"127.0.0.1:{free_port()}", **overrides}
        return live_servers.start(create_relay_app(env))

    return make


@pytest.fixture
def relay_server(make_relay: Callable[..., LiveServer]) -> LiveServer:
    return make_relay()


def grpc_endpoint(server: LiveServer) -> str:
    return f"http://{server.relay.settings.otlp_grpc}"


class TurnReader:
    """Reads ``GET /turns/{id}/events`` in a thread, as the events arrive.

    :meth:`wait_for` blocks until an event has arrived: a test holds the span-producing
    code there (the node is still running) and so knows the order of things without
    comparing arrival times, which a loaded machine stretches and squeezes at will."""

    def __init__(
        self,
        base_url: str,
        turn_id: str,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
        stop_at: tuple[str, ...] = (),
    ) -> None:
        self.url = f"{base_url}/turns/{turn_id}/events"
        #: event types after which the reader stops (``paused``: a turn's stream stays
        #: open through the human's wait, and a test may want only the first run)
        self.stop_at = stop_at
        self.headers = headers or {}
        self.timeout = timeout
        self.frames: list[Frame] = []
        self.status: int | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._arrived = threading.Condition()  # notified on every frame, and at the end
        self._ended = False

    def start(self, wait_for_turn: float = 30.0) -> TurnReader:
        """Start reading once the turn exists (a 404 is retried until ``wait_for_turn``)."""
        self._deadline = time.monotonic() + wait_for_turn
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            with httpx.Client(timeout=self.timeout) as client:
                while True:
                    with client.stream("GET", self.url, headers=self.headers) as response:
                        self.status = response.status_code
                        if response.status_code == 404 and time.monotonic() < self._deadline:
                            time.sleep(0.05)
                            continue
                        if response.status_code != 200:
                            response.read()
                            return
                        for frame in iter_frames(response):
                            with self._arrived:
                                self.frames.append(frame)
                                self._arrived.notify_all()
                            if frame.event in self.stop_at:
                                break
                        return
        except BaseException as exc:
            self.error = exc
        finally:
            with self._arrived:
                self._ended = True
                self._arrived.notify_all()

    def _has(self, type_: str, node: str | None) -> bool:
        return any(
            f.event == type_ and (node is None or f.json.get("node") == node) for f in self.frames
        )

    def wait_for(self, type_: str, node: str | None = None, timeout: float = 30.0) -> bool:
        """Block until a ``type_`` event (of ``node``) has arrived; False if the stream
        ended, or ``timeout`` (only a bound on a hang) passed, without one."""
        with self._arrived:
            self._arrived.wait_for(lambda: self._has(type_, node) or self._ended, timeout)
            return self._has(type_, node)

    def join(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the stream did not end: {self.types()}"
        assert self.error is None, self.error
        return self.events()

    def events(self) -> list[dict[str, Any]]:
        return [f.json for f in list(self.frames) if f.event is not None]

    def types(self) -> list[str]:
        return [e["type"] for e in self.events()]


def read_turn(
    base_url: str, turn_id: str, timeout: float = 30.0, stop_at: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The turn's events, without the ``message_saved`` that may trail them; with
    ``stop_at=("paused",)``, up to the first run's pause."""
    events = TurnReader(base_url, turn_id, timeout=timeout, stop_at=stop_at).start().join(timeout)
    return [e for e in events if e["type"] != "message_saved"]


def live_check(reader: TurnReader) -> tuple[Callable[[str], None], dict[str, list[str]]]:
    """A ``while_running`` hook for :func:`tests.interop.spans.made_up_run` and what it saw:
    each node is held until ``reader`` has its ``node_started``, and the types the reader
    had at that moment are kept per node. A node_started there arrived while its node was
    still running (the node's span had not even ended), so it came from the start
    marker, live: an order made to happen, where timing it would need a quiet machine."""
    seen: dict[str, list[str]] = {}

    def hold(node: str) -> None:
        reader.wait_for("node_started", node)
        seen[node] = [f"{e['type']}:{e.get('node')}" for e in reader.events()]

    return hold, seen


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or predicate}")


def assert_well_formed(events: list[dict[str, Any]]) -> None:
    """seq 1..N without a gap or a duplicate; one terminal event, last (or followed only
    by the answer's ``message_saved``)."""
    if events and events[-1]["type"] == "message_saved":
        assert events[-2]["type"] == "turn_completed"
        events = events[:-1]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), [e["seq"] for e in events]
    assert events[0]["type"] == "graph_topology"
    # a turn ends with one turn_completed or error; a run that pauses ends with paused,
    # and the turn goes on with the resume's graph_topology, or the stream was read so far
    assert events[-1]["type"] in ("turn_completed", "error", "paused")
    assert sum(e["type"] in ("turn_completed", "error") for e in events) == (
        events[-1]["type"] != "paused"
    )
    for i, event in enumerate(events[:-1]):
        if event["type"] == "paused":
            assert events[i + 1]["type"] == "graph_topology"
            assert events[i + 1]["run_kind"] == "resume"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# -- the instrumentors as they ship -----------------------------------------------------


class Switch(SpanProcessor):
    """Forwards to the current test's processors: an instrumentor is instrumented once per
    module (re-instrumenting one with a new provider is not supported by them)."""

    def __init__(self) -> None:
        self.targets: list[SpanProcessor] = []
        self.roots: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if span.parent is None:
            self.roots.append(format(span.context.trace_id, "032x"))
        for target in self.targets:
            target.on_start(span, parent_context)

    def on_end(self, span: Any) -> None:
        for target in self.targets:
            target.on_end(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(t.force_flush(timeout_millis) for t in self.targets)


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def instrumented(request) -> Iterator[tuple[str, Switch]]:
    if request.param == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor: Any = LangChainInstrumentor()
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        instrumentor = LangchainInstrumentor()
    switch = Switch()
    provider = TracerProvider()
    provider.add_span_processor(switch)
    with restored():  # OpenLLMetry's uninstrument() leaves its wrappers (restore.py)
        instrumentor.instrument(tracer_provider=provider)
        try:
            yield request.param, switch
        finally:
            instrumentor.uninstrument()


@pytest.fixture(scope="session")
def agui_client() -> Path:
    """The directory of the Node.js demo client, its packages installed as locked."""
    return node_project(CLIENT_DIR, "the AG-UI client packages")
