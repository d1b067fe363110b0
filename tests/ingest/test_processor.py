"""relay.ingest.processor.RelaySpanProcessor: O(1) hand-off, thread-safe, bounded, never raises."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, Tracer, set_span_in_context

from relay import conventions as c
from relay.events import Event
from relay.ingest.processor import RelaySpanProcessor


class Pipeline:
    def __init__(self, publish: Callable[[Event], object] | None = None, **kwargs: Any) -> None:
        self.events: list[Event] = []
        self.processor = RelaySpanProcessor(publish or self.events.append, **kwargs)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)
        self.tracer: Tracer = self.provider.get_tracer("processor-tests")

    def root(self, turn_id: str = "turn-1") -> Span:
        return self.tracer.start_span(
            "invoke_agent a",
            attributes={
                c.TURN_ID: turn_id,
                c.CONVERSATION_ID: "th",
                c.RUN_KIND: "chat",
                c.GRAPH_TOPOLOGY: '{"nodes": [], "edges": []}',
            },
        )  # sent: none discovered

    def node(self, parent: Span, name: str) -> None:
        span = self.tracer.start_span(
            f"node {name}", context=set_span_in_context(parent), attributes={c.NODE_NAME: name}
        )
        span.end()

    def types(self) -> list[str]:
        return [e.type for e in self.events]


@pytest.fixture
def pipe() -> Pipeline:
    p = Pipeline()
    yield p
    p.processor.unbind()
    p.provider.shutdown()


async def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached within the timeout")
        await asyncio.sleep(0.005)


def test_spans_before_bind_are_dropped_and_counted(pipe: Pipeline) -> None:
    root = pipe.root()
    pipe.node(root, "a")
    root.end()
    assert pipe.processor.dropped == 4  # 2 starts + 2 ends
    assert pipe.events == []
    assert len(pipe.processor._pending) == 0


async def test_loop_thread_schedules_one_drain_per_burst_and_delivers(
    pipe: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the loop's thread the drain's one handle goes back on asyncio's ready queue
    (what call_soon does, without a new handle); never call_soon_threadsafe."""
    loop = asyncio.get_running_loop()
    calls: list[str] = []
    soon = loop.call_soon
    threadsafe = loop.call_soon_threadsafe

    def spy_soon(cb, *args, **kw):
        if cb == pipe.processor._drain:
            calls.append("call_soon")
        return soon(cb, *args, **kw)

    def spy_threadsafe(cb, *args, **kw):
        if cb == pipe.processor._drain:
            calls.append("call_soon_threadsafe")
        return threadsafe(cb, *args, **kw)

    monkeypatch.setattr(loop, "call_soon", spy_soon)
    monkeypatch.setattr(loop, "call_soon_threadsafe", spy_threadsafe)
    pipe.processor.bind(loop)
    root = pipe.root()
    pipe.node(root, "a")
    root.end()
    assert pipe.events == []  # nothing on the hot path itself
    assert calls == []
    drains = [
        h
        for h in loop._ready  # type: ignore[attr-defined]
        if getattr(h, "_callback", None) == pipe.processor._drain
    ]
    assert len(drains) == 1  # one drain scheduled for the burst
    await asyncio.sleep(0)
    assert pipe.types() == ["graph_topology", "node_started", "node_completed", "error"]

    root2 = pipe.root("turn-2")
    await asyncio.sleep(0)
    calls.clear()
    await asyncio.to_thread(pipe.node, root2, "b")
    # from a worker thread: only the thread-safe form (once or twice: the loop may drain
    # between the span's start and end)
    assert calls and set(calls) == {"call_soon_threadsafe"}
    await wait_for(lambda: len(pipe.events) == 7)
    assert pipe.types()[4:] == ["graph_topology", "node_started", "node_completed"]


async def test_a_loop_in_debug_mode_gets_call_soon(
    pipe: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In debug mode (call_soon's checks) the drain is scheduled through call_soon."""
    loop = asyncio.get_running_loop()
    calls: list[object] = []
    soon = loop.call_soon

    def spy_soon(cb, *args, **kw):
        if cb == pipe.processor._drain:
            calls.append(kw.get("context"))
        return soon(cb, *args, **kw)

    monkeypatch.setattr(loop, "call_soon", spy_soon)
    loop.set_debug(True)
    try:
        pipe.processor.bind(loop)
    finally:
        loop.set_debug(False)
    pipe.root().end()
    assert len(calls) == 1 and calls[0] is not None  # in the drain's own context
    await asyncio.sleep(0)
    assert pipe.types() == ["graph_topology", "error"]


async def test_publish_that_raises_never_reaches_the_caller(pipe: Pipeline) -> None:
    published: list[str] = []

    def publish(event: Event) -> None:
        published.append(event.type)
        if event.type == "node_started":
            raise RuntimeError("bus broken")

    p = Pipeline(publish)
    p.processor.bind(asyncio.get_running_loop())
    root = p.root()
    p.node(root, "a")  # on_start/on_end return normally
    p.node(root, "b")
    root.end()
    await asyncio.sleep(0)
    assert p.processor.failures == 2
    # the failing span is counted, the later spans still flow
    assert published == [
        "graph_topology",
        "node_started",
        "node_completed",
        "node_started",
        "node_completed",
        "error",
    ]
    p.provider.shutdown()


async def test_mapping_failure_is_counted_not_raised(
    pipe: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.mapping import engine

    def broken(*args: Any) -> list[Event]:
        raise ValueError("mapping bug")

    monkeypatch.setattr(engine, "map_span", broken)
    pipe.processor.bind(asyncio.get_running_loop())
    pipe.root().end()
    await asyncio.sleep(0)
    assert pipe.processor.failures == 2 and pipe.events == []


def test_closed_loop_same_thread_never_raises(pipe: Pipeline) -> None:
    loop = asyncio.new_event_loop()
    pipe.processor.bind(loop)
    loop.close()
    root = pipe.root()  # call_soon on a closed loop raises RuntimeError inside
    root.end()
    assert pipe.processor.failures >= 1
    assert pipe.events == []


def test_closed_loop_other_thread_never_raises(pipe: Pipeline) -> None:
    loop = asyncio.new_event_loop()
    pipe.processor.bind(loop)
    loop.close()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            pipe.root().end()
        except BaseException as exc:  # pragma: no cover - the failure we look for
            errors.append(exc)

    th = threading.Thread(target=work)
    th.start()
    th.join(10)
    assert errors == []
    assert pipe.processor.failures >= 1


async def test_rebind_after_closed_loop_delivers_again(pipe: Pipeline) -> None:
    dead = asyncio.new_event_loop()
    pipe.processor.bind(dead)
    dead.close()
    pipe.root("lost").end()
    assert pipe.processor.failures == 2  # its start and its end: each tried, each counted
    pipe.processor.bind(asyncio.get_running_loop())
    pipe.root("fresh").end()
    await asyncio.sleep(0.05)
    assert "fresh" in {e.turn_id for e in pipe.events}


async def test_many_threads_all_arrive_once_in_per_thread_order(pipe: Pipeline) -> None:
    threads_n = 8
    spans_n = 200
    pipe.processor.bind(asyncio.get_running_loop())
    root = pipe.root()
    barrier = threading.Barrier(threads_n)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(spans_n):
            pipe.node(root, f"t{k}-{i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(threads_n)]
    for th in threads:
        th.start()
    expected = 1 + threads_n * spans_n * 2
    await wait_for(lambda: len(pipe.events) >= expected)
    for th in threads:
        th.join(10)
    await asyncio.sleep(0.01)
    assert len(pipe.events) == expected
    assert pipe.processor.dropped == 0 and pipe.processor.failures == 0
    per_thread: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for e in pipe.events[1:]:
        k, i = e.fields["node"].split("-")
        per_thread[k].append((e.type, int(i)))
    assert len(per_thread) == threads_n
    want = [(t, i) for i in range(spans_n) for t in ("node_started", "node_completed")]
    for k in range(threads_n):
        assert per_thread[f"t{k}"] == want
    root.end()


async def test_pending_is_bounded_and_drops_are_counted() -> None:
    p = Pipeline(max_pending=5)
    p.processor.bind(asyncio.get_running_loop())
    root = p.root()  # 1 pending
    for i in range(4):
        p.node(root, f"n{i}")  # 8 more starts/ends: only 4 fit
    assert len(p.processor._pending) == 5
    assert p.processor.dropped == 4
    await asyncio.sleep(0)  # the drain empties the queue; room again
    assert len(p.processor._pending) == 0
    assert p.types() == [
        "graph_topology",
        "node_started",
        "node_completed",
        "node_started",
        "node_completed",
    ]
    p.node(root, "late")
    await asyncio.sleep(0)
    assert p.types()[-2:] == ["node_started", "node_completed"]
    assert p.processor.dropped == 4
    p.provider.shutdown()


async def test_flush_drains_now_on_the_loop_thread(pipe: Pipeline) -> None:
    pipe.processor.bind(asyncio.get_running_loop())
    root = pipe.root()
    pipe.node(root, "a")
    assert pipe.events == []
    pipe.processor.flush()
    assert pipe.types() == ["graph_topology", "node_started", "node_completed"]
    await asyncio.sleep(0)  # the already scheduled drain finds nothing: no duplicates
    assert len(pipe.events) == 3
    assert pipe.processor.force_flush() is True


async def test_flush_from_another_thread_does_not_drain(pipe: Pipeline) -> None:
    pipe.processor.bind(asyncio.get_running_loop())
    pipe.root()
    # flush off the loop thread must not touch the mapping concurrently with the loop
    # (the loop thread is blocked in join(): only the other thread could drain)
    th = threading.Thread(target=pipe.processor.flush)
    th.start()
    th.join(10)
    assert pipe.events == []
    assert len(pipe.processor._pending) == 1
    await asyncio.sleep(0)
    assert pipe.types() == ["graph_topology"]


async def test_unbind_flushes_then_drops(pipe: Pipeline) -> None:
    pipe.processor.bind(asyncio.get_running_loop())
    root = pipe.root()
    pipe.processor.unbind()
    assert pipe.types() == ["graph_topology"]
    root.end()
    assert pipe.processor.dropped == 1
    await asyncio.sleep(0)
    assert pipe.types() == ["graph_topology"]


async def test_events_keep_span_order_across_drains(pipe: Pipeline) -> None:
    pipe.processor.bind(asyncio.get_running_loop())
    root = pipe.root()
    for i in range(50):
        pipe.node(root, f"n{i}")
        if i % 7 == 0:
            await asyncio.sleep(0)
    root.end()
    await asyncio.sleep(0)
    nodes = [e.fields["node"] for e in pipe.events if e.type == "node_started"]
    assert nodes == [f"n{i}" for i in range(50)]
    assert pipe.events[-1].type == "error"  # the root ended with no outcome
    assert len(pipe.processor.state.runs) == 0 and pipe.processor.state.spans == {}
