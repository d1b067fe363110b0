"""per_event, bus, replay: the relay's per-span and per-event costs, in process.

``per_event``
  - the anchor: one SDK span (start + end, a node span under a run root) with a no-op
    processor, on the loop thread;
  - ``added_hot_us``: what the :class:`RelaySpanProcessor` adds to that on the agent's side
    (``on_start``/``on_end``: a deque append and, once per batch, ``call_soon``), loop thread;
  - ``added_thread_us``: the same from a worker thread (``call_soon_threadsafe``), while
    the loop drains concurrently;
  - ``drain_us``: the loop's work per span: convert, ``map_span`` for start and end,
    publish (the work the agent does not wait for, but the loop does);
  - ``deliver_us``: loop time added per event by a subscriber reading the turn's log
    (MemoryBus reader), amortised over a turn of 10 events published one loop iteration
    apart; ``deliver_latency_us``: mean publish -> ``take()`` time of those events.

``bus``: events per second from ``publish`` to subscribers, memory bus: 10 turns with a
subscriber each, 10 events per turn per loop iteration; and one event per iteration.
The Redis Streams bus runs the same loop when ``RELAY_BENCH_REDIS_URL`` is set and
``relay.bus.redis`` exists.

``replay``: a synthetic turn of 10,000 spans (a root, nodes with model / retrieval / tool
children): ``map_span`` over its phases in a fresh :class:`MappingState`, with and
without JSON encoding; ``relay.mapping.feed.replay_events`` (order + map) when it exists; and
the same from a SQLite span store (write once, then read + replay timed).

``ingest``: OTLP/HTTP spans/s into a real uvicorn (see :mod:`tests.bench.bench_http`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import importlib.util
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

from tests.bench.harness import Figure, median, na, rounds, summary

SPANS_PER_BATCH = 10  # a root and 9 node spans: one small turn


# -- per_event --------------------------------------------------------------------------


def _span_batch(tracer: Any, turn_id: str) -> float:
    """Start and end a root and 9 node spans; µs per span (start + end)."""
    from opentelemetry import trace

    from relay import conventions as c

    t0 = time.perf_counter()
    root = tracer.start_span(
        "invoke_agent bench",
        attributes={
            c.TURN_ID: turn_id,
            c.CONVERSATION_ID: "bench",
            c.RUN_KIND: "chat",
            c.GRAPH_ID: "bench",
            c.GRAPH_TOPOLOGY: '{"nodes":[],"edges":[]}',
        },
    )
    ctx = trace.set_span_in_context(root)
    for i in range(SPANS_PER_BATCH - 1):
        span = tracer.start_span(
            "node n",
            context=ctx,
            attributes={c.NODE_NAME: "n", c.NODE_STEP: i, c.NODE_TASK_ID: "task"},
        )
        span.set_attribute(c.NODE_OUTCOME, "ok")
        span.end()
    root.set_attribute(c.TURN_OUTCOME, "error")
    root.end()
    return (time.perf_counter() - t0) / SPANS_PER_BATCH * 1e6


async def _per_event(quick: bool) -> list[Figure]:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    from relay.bus import MemoryBus
    from relay.ingest.processor import RelaySpanProcessor

    class NoopProcessor(SpanProcessor):
        """Does nothing but hold the span until after the timing, as the relay's deque
        does: both sides then free their spans outside the timed section."""

        held: ClassVar[list[Any]] = []

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            return None

        def on_end(self, span: Any) -> None:
            self.held.append(span)

    loop = asyncio.get_running_loop()
    bus = MemoryBus(max_finished_turns=100)
    processor = RelaySpanProcessor(bus.publish)
    processor.bind(loop)
    noop_provider = TracerProvider()
    relay_provider = TracerProvider()
    noop_provider.add_span_processor(NoopProcessor())
    relay_provider.add_span_processor(processor)
    noop = noop_provider.get_tracer("bench")
    relay = relay_provider.get_tracer("bench")
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="bench-agent")

    batches = 5 if quick else 60
    per: dict[str, list[float]] = {k: [] for k in ("noop", "relay", "drain", "noop_t", "relay_t")}
    for _ in range(3):  # warm up
        _span_batch(noop, "w")
        NoopProcessor.held.clear()
        _span_batch(relay, uuid.uuid4().hex)
        processor.flush()
    for _ in rounds(3 if quick else 15, 3 if quick else 25, minimum=2):
        gc.collect()
        s: dict[str, list[float]] = {k: [] for k in per}
        for i in range(batches):
            # alternate the order batch by batch: whichever runs first pays for colder caches
            for which in ("noop", "relay") if i % 2 == 0 else ("relay", "noop"):
                if which == "noop":
                    s["noop"].append(_span_batch(noop, uuid.uuid4().hex))
                    NoopProcessor.held.clear()
                else:
                    s["relay"].append(_span_batch(relay, uuid.uuid4().hex))
                    t0 = time.perf_counter()
                    processor.flush()  # the drain the loop would run next, timed on its own
                    s["drain"].append((time.perf_counter() - t0) / SPANS_PER_BATCH * 1e6)
            await asyncio.sleep(0)
            for which in ("noop", "relay") if i % 2 == 0 else ("relay", "noop"):
                tracer = noop if which == "noop" else relay
                s[f"{which}_t"].append(
                    await loop.run_in_executor(pool, _span_batch, tracer, uuid.uuid4().hex)
                )
                NoopProcessor.held.clear()
                await asyncio.sleep(0)  # the relay's drain, woken by call_soon_threadsafe
        for k in per:
            per[k].append(median(s[k]))
    pool.shutdown()
    processor.unbind()

    deliver, latency = await _deliver(quick)
    sdk = median(per["noop"])
    anchor = {"anchor": "SDK span, no-op processor", "anchor_value": sdk, "anchor_unit": "us"}
    return [
        summary(
            "per_event.sdk_span_us",
            "SDK span start+end, no-op processor (the anchor)",
            per["noop"],
            "us",
            note="loop thread",
        ),
        summary(
            "per_event.added_hot_us",
            "added per span by the processor, loop thread",
            [r - n for n, r in zip(per["noop"], per["relay"], strict=True)],
            "us",
            target="<= 3",
            limit=3.0,
            **anchor,
            params={"relay_us": median(per["relay"])},
        ),
        summary(
            "per_event.added_thread_us",
            "added per span by the processor, other thread",
            [r - n for n, r in zip(per["noop_t"], per["relay_t"], strict=True)],
            "us",
            target="<= 3",
            limit=3.0,
            anchor="SDK span, no-op processor, thread",
            anchor_value=median(per["noop_t"]),
            anchor_unit="us",
        ),
        summary(
            "per_event.drain_us",
            "loop work per span: convert + map + publish (2 events)",
            per["drain"],
            "us",
            **anchor,
        ),
        summary(
            "per_event.deliver_us",
            "loop time added per event by a bus subscriber, over a 10-event turn",
            deliver,
            "us",
            target="<= 5",
            limit=5.0,
            anchor="publish, no subscriber",
        ),
        summary(
            "per_event.deliver_latency_us", "  publish -> subscriber take(), mean", latency, "us"
        ),
    ]


async def _deliver(quick: bool) -> tuple[list[float], list[float]]:
    """Per round: median loop µs added per event by a subscriber, and mean latency µs."""
    from relay.bus import MemoryBus
    from relay.events import Event

    bus = MemoryBus(max_finished_turns=100)
    n = SPANS_PER_BATCH

    async def one_turn(with_sub: bool) -> tuple[float, float]:
        turn_id = uuid.uuid4().hex
        bus.open_turn(turn_id)
        events = [
            Event("node_started", "bench", turn_id, "0" * 32, 1.0, {"node": "n"}) for _ in range(n)
        ]
        stamps: list[float] = []
        got: list[float] = []
        task = None
        if with_sub:
            reader = bus.reader(turn_id, 0)

            async def sub() -> None:
                end = time.monotonic() + 5
                while len(got) < n and time.monotonic() < end:
                    batch = reader.take()
                    now = time.perf_counter()
                    got.extend(now for _ in batch)
                    if len(got) < n:
                        await reader.wait(1.0)
                reader.close()

            task = asyncio.create_task(sub())
            await asyncio.sleep(0)  # the subscriber is waiting, as a stream would be
        t0 = time.perf_counter()
        for event in events:
            stamps.append(time.perf_counter())
            bus.publish(event)
            await asyncio.sleep(0)
        if task is not None:
            await task
        total = (time.perf_counter() - t0) * 1e6
        lat = sum(g - s for g, s in zip(got, stamps, strict=False)) / max(1, len(got)) * 1e6
        return total, lat

    for _ in range(20):
        await one_turn(True)
        await one_turn(False)
    added: list[float] = []
    latency: list[float] = []
    for _ in rounds(3 if quick else 15, 3 if quick else 15, minimum=2):
        gc.collect()
        with_sub = []
        without = []
        lats = []
        for _ in range(10 if quick else 100):
            total, lat = await one_turn(True)
            with_sub.append(total)
            lats.append(lat)
            without.append((await one_turn(False))[0])
        added.append((median(with_sub) - median(without)) / n)
        latency.append(median(lats))
    return added, latency


def run_per_event(quick: bool) -> list[Figure]:
    return asyncio.run(_per_event(quick))


# -- bus ---------------------------------------------------------------------------------


async def _bus_rate(bus: Any, turns: int, per_yield: int, total: int, budget_s: float) -> float:
    """Events/s from publish to ``turns`` subscribers (each reads its own turn's log)."""
    from relay.events import Event

    ids = [uuid.uuid4().hex for _ in range(turns)]
    for t in ids:
        bus.open_turn(t)
    readers = [bus.reader(t, 0) for t in ids]
    events = [Event("node_started", "bench", t, "0" * 32, 1.0, {"node": "n"}) for t in ids]
    per_turn = total // turns
    got = [0] * turns
    deadline = time.monotonic() + budget_s

    async def sub(i: int) -> None:
        reader = readers[i]
        while got[i] < per_turn and time.monotonic() < deadline:
            got[i] += len(reader.take())
            if got[i] < per_turn:
                await reader.wait(1.0)
        reader.close()

    tasks = [asyncio.create_task(sub(i)) for i in range(turns)]
    await asyncio.sleep(0)
    t0 = time.perf_counter()
    published = 0
    while published < per_turn and time.monotonic() < deadline:
        step = min(per_yield, per_turn - published)
        for event in events:
            for _ in range(step):
                bus.publish(event)
        published += step
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - t0
    return sum(got) / elapsed


DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


async def _redis_url() -> str | None:
    """The hook for the Redis Streams bus: a reachable Redis URL, or None.

    ``RELAY_BENCH_REDIS_URL`` if set (``off`` disables), else a local Redis on the default
    port if one answers PING within half a second."""
    url = os.environ.get("RELAY_BENCH_REDIS_URL", DEFAULT_REDIS_URL)
    if url == "off" or importlib.util.find_spec("redis") is None:
        return None
    import redis.asyncio as aioredis

    client = aioredis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        await client.ping()
        return url
    except Exception:
        return None
    finally:
        await client.aclose()


async def _redis_remote_rate(url: str, turns: int, total: int, budget_s: float) -> float:
    """Events/s from ``publish`` on one RedisBus (the instance running the turns) to
    readers on another (an instance serving their streams), through Redis Streams."""
    from relay.bus.redis import RedisBus  # type: ignore[import-not-found]
    from relay.events import TURN_COMPLETED, Event

    prefix = f"relay-bench:{uuid.uuid4().hex[:8]}:"
    owner = RedisBus(url, prefix=prefix, retention_s=60)
    other = RedisBus(url, prefix=prefix, retention_s=60)
    await owner.start()
    await other.start()
    try:
        ids = [uuid.uuid4().hex for _ in range(turns)]
        per_turn = total // turns
        for t in ids:
            owner.open_turn(t)
        readers = [other.reader(t, 0) for t in ids]
        got = [0] * turns
        deadline = time.monotonic() + budget_s

        async def sub(i: int) -> None:
            reader = readers[i]
            while got[i] < per_turn and time.monotonic() < deadline:
                if await reader.wait(1.0):
                    got[i] += len(reader.take())
            reader.close()

        tasks = [asyncio.create_task(sub(i)) for i in range(turns)]
        t0 = time.perf_counter()
        for n in range(0, per_turn, 10):
            for t in ids:
                for k in range(n, min(n + 10, per_turn)):
                    kind = TURN_COMPLETED if k == per_turn - 1 else "node_started"
                    owner.publish(Event(kind, "bench", t, "0" * 32, 1.0, {"node": "n"}))
            await asyncio.sleep(0)
            if time.monotonic() > deadline:
                break
        await asyncio.gather(*tasks)
        return sum(got) / (time.perf_counter() - t0)
    finally:
        await owner.stop()
        await other.stop()
        with contextlib.suppress(Exception):
            import redis.asyncio as aioredis

            client = aioredis.from_url(url)
            keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
            if keys:
                await client.delete(*keys)
            await client.aclose()


async def _bus(quick: bool) -> list[Figure]:
    from relay.bus import MemoryBus

    total = 10_000 if quick else 100_000  # 10 turns: below max_events_per_turn
    total_1 = 5_000 if quick else 50_000
    batch = []
    single = []
    await _bus_rate(MemoryBus(), 10, 10, 5_000, 5)
    for _ in rounds(2 if quick else 5, 3 if quick else 20, minimum=2):
        gc.collect()
        batch.append(await _bus_rate(MemoryBus(), 10, 10, total, 10))
        single.append(await _bus_rate(MemoryBus(), 1, 1, total_1, 10))
    long_turn = []
    for _ in rounds(2 if quick else 3, 3 if quick else 15, minimum=1):
        gc.collect()
        # one turn longer than max_events_per_turn (10,000): every publish trims the log
        long_turn.append(
            await _bus_rate(MemoryBus(), 1, 10, 3 * total_1 if not quick else 12_000, 10)
        )
    figs = [
        summary(
            "bus.memory",
            "memory bus, 10 turns x 10 events per loop iteration",
            batch,
            "ev/s",
            target=">= 100k/s",
            limit=100_000,
            higher_is_better=True,
            params={"events": total},
        ),
        summary(
            "bus.memory_1",
            "  1 turn, 1 event per loop iteration (a wake per event)",
            single,
            "ev/s",
            params={"events": total_1},
        ),
        summary(
            "bus.memory_long",
            "  1 turn past max_events_per_turn (10k): trimming",
            long_turn,
            "ev/s",
        ),
    ]
    label = "Redis Streams bus: publish on one instance -> 10 readers on another"
    if importlib.util.find_spec("relay.bus.redis") is None:
        figs.append(na("bus.redis", label, "ev/s", "not built", target=">= 20k/s"))
        return figs
    url = await _redis_url()
    if url is None:
        figs.append(
            na("bus.redis", label, "ev/s", "no Redis: set RELAY_BENCH_REDIS_URL", target=">= 20k/s")
        )
        return figs
    try:
        n = 2_000 if quick else 20_000
        rates = [
            await _redis_remote_rate(url, 10, n, 30)
            for _ in rounds(2 if quick else 3, 10 if quick else 40, minimum=1)
        ]
        figs.append(
            summary(
                "bus.redis",
                label,
                rates,
                "ev/s",
                target=">= 20k/s",
                limit=20_000,
                higher_is_better=True,
                params={"events": n, "url": url.rsplit("@", 1)[-1]},
            )
        )
    except Exception as exc:  # the Redis bus is being built: report, do not fail
        figs.append(na("bus.redis", label, "ev/s", f"{type(exc).__name__}: {exc}"))
    return figs


def run_bus(quick: bool) -> list[Figure]:
    return asyncio.run(_bus(quick))


# -- replay ------------------------------------------------------------------------------


def synthetic_turn(n_spans: int) -> tuple[list[tuple[Any, bool]], list[Any]]:
    """One turn of ``n_spans`` spans: (phases in live order as (record, ended), end records).

    A root, then nodes, each with a model, a retrieval and a tool child, the last node
    cut short so the total is exactly ``n_spans``. Start records carry start attributes
    only, as the live processor reads them.
    """
    from relay import conventions as c
    from relay.spans import SpanRecord

    trace_id = uuid.uuid4().hex
    turn_id = uuid.uuid4().hex
    ids = iter(range(1, 10 * n_spans))
    t = [1_700_000_000_000_000_000]

    def tick() -> int:
        t[0] += 1_000
        return t[0]

    def sid() -> str:
        return format(next(ids), "016x")

    phases: list[tuple[Any, bool]] = []
    ends: list[Any] = []

    def open_(name: str, parent: str | None, attrs: dict[str, Any]) -> SpanRecord:
        rec = SpanRecord(trace_id, sid(), parent, name, tick(), None, dict(attrs))
        phases.append((rec, False))
        return rec

    def close(rec: SpanRecord, end_attrs: dict[str, Any]) -> None:
        done = SpanRecord(
            rec.trace_id,
            rec.span_id,
            rec.parent_span_id,
            rec.name,
            rec.start_ns,
            tick(),
            {**rec.attributes, **end_attrs},
            status="ok",
        )
        phases.append((done, True))
        ends.append(done)

    root = open_(
        "invoke_agent bench",
        None,
        {
            c.OPERATION: c.OP_INVOKE_AGENT,
            c.TURN_ID: turn_id,
            c.CONVERSATION_ID: "bench",
            c.RUN_KIND: "chat",
            c.GRAPH_ID: "bench",
            c.GRAPH_TOPOLOGY: json.dumps({"nodes": [{"id": "n", "label": "n"}], "edges": []}),
        },
    )
    made = 1
    step = 0
    children = (
        (
            "chat offline",
            {c.OPERATION: c.OP_CHAT, c.REQUEST_MODEL: "offline"},
            {c.INPUT_TOKENS: 120, c.OUTPUT_TOKENS: 40},
        ),
        ("retrieval kb", {c.OPERATION: c.OP_RETRIEVAL}, {c.RETRIEVAL_DOCUMENTS: 3}),
        (
            "execute_tool lookup",
            {c.OPERATION: c.OP_TOOL, c.TOOL_NAME: "lookup", c.TOOL_CALL_ID: "call"},
            {},
        ),
    )
    while made < n_spans:
        step += 1
        node = open_(
            f"node n{step % 7}",
            root.span_id,
            {c.NODE_NAME: f"n{step % 7}", c.NODE_STEP: step, c.NODE_TASK_ID: f"task{step}"},
        )
        made += 1
        for name, start_attrs, end_attrs in children:
            if made >= n_spans:
                break
            child = open_(name, node.span_id, start_attrs)
            close(child, end_attrs)
            made += 1
        close(node, {c.NODE_OUTCOME: "ok"})
    close(
        root,
        {
            c.TURN_OUTCOME: "answered",
            c.TURN_RESPONSE: json.dumps({"status": "answered", "answer": "ok"}),
        },
    )
    return phases, ends


def _map_all(phases: list[tuple[Any, bool]], encode: bool) -> tuple[float, int]:
    from relay.mapping import MappingState, map_span

    t0 = time.perf_counter()
    state = MappingState()
    n = 0
    for record, ended in phases:
        for event in map_span(state, record, ended):
            n += 1
            if encode:
                event.seq = n
                event.to_json()
    return (time.perf_counter() - t0) * 1000, n


def _replay(quick: bool) -> list[Figure]:
    n_spans = 1_000 if quick else 10_000
    phases, ends = synthetic_turn(n_spans)
    n_rounds = 3 if quick else 7
    _map_all(phases, True)
    mapped = []
    encoded = []
    events = 0
    for _ in rounds(n_rounds, 20, minimum=2):
        gc.collect()
        ms, events = _map_all(phases, False)
        mapped.append(ms)
        encoded.append(_map_all(phases, True)[0])
    label = f"{n_spans:,} spans ({events:,} events): map_span, fresh MappingState"
    figs = [
        summary(
            "replay.map",
            label,
            mapped,
            "ms",
            target="<= 100",
            limit=100.0,
            params={"spans": n_spans, "events": events},
        ),
        summary(
            "replay.map_encode",
            "  the same + JSON encoding of every event",
            encoded,
            "ms",
            params={"spans": n_spans},
        ),
    ]
    figs.extend(_replay_store(phases, ends, n_spans, n_rounds))
    return figs


def _replay_store(
    phases: list[tuple[Any, bool]], ends: list[Any], n_spans: int, n_rounds: int
) -> list[Figure]:
    """relay.mapping.feed.replay_events, from memory and from a SQLite span store (hooks)."""
    from relay import conventions as c

    figs: list[Figure] = []
    try:
        from relay.mapping.feed import replay_events
    except ImportError:
        return [
            na("replay.events", "relay.mapping.feed.replay_events", "ms", "not built"),
            na("replay.sqlite", "from the SQLite span store", "ms", "not built"),
        ]
    turn_id = next(r.attributes[c.TURN_ID] for r in ends if c.TURN_ID in r.attributes)
    replay_events(ends)
    times = []
    for _ in rounds(n_rounds, 20, minimum=2):
        gc.collect()
        t0 = time.perf_counter()
        events = replay_events(ends)
        times.append((time.perf_counter() - t0) * 1000)
    figs.append(
        summary(
            "replay.events",
            f"  relay.mapping.feed.replay_events ({len(events):,} events: order + map)",
            times,
            "ms",
            target="<= 100",
            limit=100.0,
        )
    )
    try:
        from relay.store.sqlite import SQLiteSpanStore
    except ImportError:
        return [*figs, na("replay.sqlite", "from the SQLite span store", "ms", "not built")]
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        try:
            store = SQLiteSpanStore(Path(tmp) / "spans.db", retention_s=3600.0, max_turns=100)
            t0 = time.perf_counter()
            store.write(ends)
            write_ms = (time.perf_counter() - t0) * 1000
            times = []
            firsts = []
            whole_list = []
            cpu = []
            map_cpu = []
            streaming = importlib.util.find_spec("relay.store.reading") is not None
            for _ in rounds(n_rounds, 30, minimum=2):
                gc.collect()
                t0 = time.perf_counter()
                state, spans = store.turn_spans(turn_id)
                events = replay_events(spans)
                whole_list.append((time.perf_counter() - t0) * 1000)
                if streaming:
                    gc.collect()
                    c0 = time.process_time()
                    first_ms, whole_ms, n_events = asyncio.run(_replay_streamed(store, turn_id))
                    cpu.append((time.process_time() - c0) * 1000)
                    firsts.append(first_ms)
                    times.append(whole_ms)
                    gc.collect()  # the mapping alone, in the same round (the CPU anchor)
                    c0 = time.process_time()
                    _map_all(phases, False)
                    map_cpu.append((time.process_time() - c0) * 1000)
            params = {"write_ms": write_ms, "events": len(events)}
            if streaming:
                figs.append(
                    summary(
                        "replay.first_event",
                        "  from SQLite, request -> first event (the HTTP route's path, in process)",
                        firsts,
                        "ms",
                        target="<= 20",
                        limit=20.0,
                        note="read in start order, derived while streamed",
                    )
                )
                figs.append(
                    summary(
                        "replay.sqlite",
                        "  from SQLite, request -> last event (the same path)",
                        times,
                        "ms",
                        target="<= 100",
                        limit=100.0,
                        note=f"{n_events:,} events; list path: {median(whole_list):.0f} ms",
                        params=params,
                    )
                )
            if streaming:
                ratios = [a / b for a, b in zip(cpu, map_cpu, strict=True)]
                figs.append(
                    summary(
                        "replay.sqlite_cpu",
                        "  the same, process CPU time (worker + loop; ratio: x the mapping alone)",
                        cpu,
                        "ms",
                        anchor="map_span alone, CPU",
                        anchor_value=median(map_cpu),
                        anchor_unit="ms",
                        note=f"{median(ratios):.2f}x the mapping alone (min "
                        f"{min(ratios):.2f}x): less sensitive to other processes",
                        params={"ratio_to_map": median(ratios)},
                    )
                )
            if streaming:
                figs.append(_replay_steady(store, turn_id, n_rounds))
            figs.append(
                summary(
                    "replay.sqlite_list",
                    "  from SQLite: turn_spans + replay_events (whole list)",
                    whole_list,
                    "ms",
                    note=f"state={state}, {len(spans):,} spans",
                    params=params,
                )
            )
            store.close()
        except Exception as exc:  # the store is being built: report, do not fail
            figs.append(
                na(
                    "replay.sqlite",
                    "from the SQLite span store",
                    "ms",
                    f"{type(exc).__name__}: {exc}",
                )
            )
    return figs


def _replay_steady(store: Any, turn_id: str, n_rounds: int) -> Figure:
    """The streamed replay back to back, with no ``gc.collect()`` between replays (the
    rows above collect before each round), in a heap frozen as ``span-relay serve``
    freezes it once started (``RelayServer``: ``gc.freeze()``): what a serving process
    pays, the collections a replay's surviving objects set off included (process CPU per
    replay)."""
    asyncio.run(_replay_streamed(store, turn_id))
    gc.collect()
    gc.freeze()
    try:
        full_before = gc.get_stats()[2]["collections"]
        cpu = []
        for _ in rounds(n_rounds, 30, minimum=2):
            c0 = time.process_time()
            asyncio.run(_replay_streamed(store, turn_id))
            cpu.append((time.process_time() - c0) * 1000)
        full = gc.get_stats()[2]["collections"] - full_before
    finally:
        gc.unfreeze()
    return summary(
        "replay.sqlite_steady",
        "  the same back to back, no gc.collect() between, heap frozen as served (CPU per replay)",
        cpu,
        "ms",
        note=f"{full} full collections in {len(cpu)} replays",
        params={"full_collections": full, "replays": len(cpu)},
    )


async def _replay_streamed(store: Any, turn_id: str) -> tuple[float, float, int]:
    """What GET /turns/{id}/events?source=spans does before its writer sends: the
    store's ordered read, derived in a worker while the loop takes the events (ms to
    the first event, ms to the last, events)."""
    from relay.delivery.replay import start_derivation

    t0 = time.perf_counter()
    _, stream = await asyncio.to_thread(store.turn_span_stream, turn_id)
    assert stream is not None
    derived = start_derivation(stream, stream, None, close=stream.close)
    await derived.until(0)
    first = (time.perf_counter() - t0) * 1000
    while not derived.done:
        await derived.until(len(derived.events))
    return first, (time.perf_counter() - t0) * 1000, len(derived.events)


def run_replay(quick: bool) -> list[Figure]:
    return _replay(quick)
