"""overhead and realistic: what the relay adds to a whole turn.

``overhead``: a graph of trivial async nodes (the worst case: nothing to hide the relay's
cost behind), each node in a node span (:func:`relay.langgraph.spans.traced_node`) under a run
root (:func:`relay.langgraph.spans.run_span`). The anchor is that turn with its spans and no relay.
The relay turn adds the :class:`RelaySpanProcessor` and a subscriber that reads the turn's
log on the bus until the terminal event: the turn counts as done when the subscriber has
it, which is what a reader of the stream sees. For context, the same graph without spans
(``ainvoke``) and LangGraph's own ``astream`` in ``updates``/``debug``/``tasks`` modes.
And the floor under any relay on this runtime: the same turn with a span processor that
does nothing, and with one that only keeps each span and wakes a reader task per burst
of phases, as the bus wakes a subscriber (:class:`BurstWaker`), mapping nothing: what a
live reader costs before a single event is made.

``realistic``: the demo agent (``span_relay_demo.graph.build_graph``, the offline model, "How do
refunds work?"), spans-only against spans + relay + subscriber; then the same with a
model call that takes 1 s (a simulated remote model).

Configurations run interleaved inside each round (order reversed every other round), so a
burst of load on the shared machine hits all of them; the figure is the median over
rounds of the per-round ratio.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from opentelemetry.sdk.trace import SpanProcessor

from tests.bench.harness import Figure, median, percentile, rounds, summary

TOPOLOGY_CACHE: dict[int, dict[str, Any]] = {}


class _State(TypedDict):
    x: int


def chain_graph(tracer: Any | None, n: int) -> Any:
    """START -> n0 -> ... -> n{n-1} -> END, each node a trivial async function."""
    from langgraph.graph import END, START, StateGraph

    from relay.langgraph.spans import traced_node

    builder = StateGraph(_State)
    names = [f"n{i}" for i in range(n)]
    for name in names:

        async def node(state: _State, config: RunnableConfig) -> dict[str, int]:
            return {"x": state["x"] + 1}

        builder.add_node(name, traced_node(tracer, name, node) if tracer is not None else node)
    prev = START
    for name in names:
        builder.add_edge(prev, name)
        prev = name
    builder.add_edge(prev, END)
    return builder.compile(name="bench")


def topology(n: int) -> dict[str, Any]:
    if n not in TOPOLOGY_CACHE:
        ids = ["__start__", *(f"n{i}" for i in range(n)), "__end__"]
        TOPOLOGY_CACHE[n] = {
            "nodes": [{"id": i, "label": i} for i in ids],
            "edges": [
                {"source": a, "target": b, "conditional": False} for a, b in itertools.pairwise(ids)
            ],
        }
    return TOPOLOGY_CACHE[n]


class BurstWaker(SpanProcessor):
    """The floor's span processor: keeps each phase and wakes the reader's future, once
    per burst (a woken reader is disarmed until it waits again), as the bus wakes a
    subscriber; maps nothing, publishes nothing."""

    def __init__(self) -> None:
        self.phases = 0
        self.waiter: asyncio.Future[bool] | None = None

    def _phase(self) -> None:
        self.phases += 1
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self._phase()

    def on_end(self, span: Any) -> None:
        self._phase()

    async def read(self, phases: int, deadline_s: float = 10.0) -> None:
        """A reader task's loop, as :func:`drain_turn`: wait, take what came, until the
        turn's ``phases`` phases (its root's end the last) are all there."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(deadline_s):
            while self.phases < phases:
                self.waiter = loop.create_future()
                await self.waiter


class Rig:
    """Tracers with and without the relay, one bus, one loop; and the floor's: a
    processor that does nothing, one that wakes a reader (:class:`BurstWaker`)."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import TracerProvider

        from relay.bus import MemoryBus
        from relay.ingest.processor import RelaySpanProcessor

        self.bus = MemoryBus()
        self.processor = RelaySpanProcessor(self.bus.publish)
        self.processor.bind(asyncio.get_running_loop())
        self.plain_provider = TracerProvider()
        self.relay_provider = TracerProvider()
        self.relay_provider.add_span_processor(self.processor)
        self.spans_tracer = self.plain_provider.get_tracer("bench")
        self.relay_tracer = self.relay_provider.get_tracer("bench")
        self.null_provider = TracerProvider()
        self.null_provider.add_span_processor(SpanProcessor())  # its methods do nothing
        self.null_tracer = self.null_provider.get_tracer("bench")
        self.waker = BurstWaker()
        self.waker_provider = TracerProvider()
        self.waker_provider.add_span_processor(self.waker)
        self.waker_tracer = self.waker_provider.get_tracer("bench")

    def close(self) -> None:
        self.processor.unbind()


async def drain_turn(reader: Any, deadline_s: float = 10.0, lags: list[float] | None = None) -> int:
    """Read a turn's log until its run-terminal event, as ``Relay.subscribe`` does (a wait
    with no timer of its own); bounded in time by one timeout for the whole turn. With
    ``lags``: per ``node_completed``, ms from the node span's end (the event's ``ts``) to
    the reader having it."""
    from relay.events import NODE_COMPLETED, RUN_TERMINAL

    seen = 0
    try:
        async with asyncio.timeout(deadline_s):
            while True:
                for event in reader.take():
                    seen += 1
                    if lags is not None and event.type == NODE_COMPLETED:
                        lags.append(time.time() * 1000 - event.ts)
                    if event.type in RUN_TERMINAL:
                        return seen
                await reader.wait(None)
    except TimeoutError:
        raise TimeoutError("the subscriber saw no terminal event") from None


async def relay_turn(rig: Rig, body: Callable[[str], Awaitable[Any]]) -> int:
    """Open the turn's log, attach a subscriber, run ``body(turn_id)``, wait for the reader."""
    turn_id = uuid.uuid4().hex
    rig.bus.open_turn(turn_id)
    reader = rig.bus.reader(turn_id, 0)
    sub = asyncio.create_task(drain_turn(reader))
    try:
        await body(turn_id)
        return await sub
    finally:
        reader.close()


class RelayRig:
    """A whole :class:`relay.Relay` (the memory bus, its records in SQLite under a
    temporary folder), started on the loop, and a tracer whose spans go to its span
    processor only: the same turn read through ``Relay.subscribe`` (the public in-process
    reader) or through a reader of the relay's bus (:func:`drain_turn`), side by side.
    Each reader notes, per ``node_completed``, how long after the node span's end (the
    event's ``ts``) it had the event."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import TracerProvider

        from relay import Relay

        self._tmp = tempfile.TemporaryDirectory(prefix="bench-subscribe-")
        self.relay = Relay.from_env(
            {"RELAY_DATA_DIR": self._tmp.name, "OTEL_TRACES_EXPORTER": "none"}
        )
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.relay.span_processor)
        self.tracer = self.provider.get_tracer("bench")
        #: node end -> reader, ms, per ``node_completed`` (the caller empties them per round)
        self.lags: dict[str, list[float]] = {"subscribe": [], "reader": []}

    async def start(self) -> None:
        await self.relay.start()

    async def close(self) -> None:
        await self.relay.stop()
        self._tmp.cleanup()

    async def reader_turn(self, body: Callable[[str], Awaitable[Any]]) -> int:
        """:func:`relay_turn` on the relay's bus: a reader of the turn's log."""
        turn_id = uuid.uuid4().hex
        bus = self.relay.bus
        bus.open_turn(turn_id)
        reader = bus.reader(turn_id, 0)
        sub = asyncio.create_task(drain_turn(reader, lags=self.lags["reader"]))
        try:
            await body(turn_id)
            return await sub
        finally:
            reader.close()

    async def subscribe_turn(self, body: Callable[[str], Awaitable[Any]]) -> int:
        """The same turn read through ``Relay.subscribe(turn_id)``, to its terminal event."""
        turn_id = uuid.uuid4().hex
        self.relay.bus.open_turn(turn_id)
        sub = asyncio.create_task(self._subscribe(turn_id))
        await body(turn_id)
        return await sub

    async def _subscribe(self, turn_id: str, deadline_s: float = 10.0) -> int:
        from relay.events import NODE_COMPLETED

        lags = self.lags["subscribe"]
        seen = 0
        async with asyncio.timeout(deadline_s):
            async for event in self.relay.subscribe(turn_id):
                seen += 1
                if event.type == NODE_COMPLETED:
                    lags.append(time.time() * 1000 - event.ts)
        return seen


async def _unread_turn(rig: Rig, body: Callable[[str], Awaitable[Any]]) -> None:
    """:func:`relay_turn` without its subscriber: the turn's log opened, nobody reads it."""
    turn_id = uuid.uuid4().hex
    rig.bus.open_turn(turn_id)
    await body(turn_id)


async def floor_turn(rig: Rig, body: Callable[[str], Awaitable[Any]], phases: int) -> None:
    """:func:`relay_turn` on the floor: a reader task woken per burst by
    :class:`BurstWaker`, the turn done when the reader has seen its ``phases`` phases."""
    rig.waker.phases = 0
    sub = asyncio.create_task(rig.waker.read(phases))
    await body(uuid.uuid4().hex)
    await sub


def _span_turn(
    graph: Any, tracer: Any, n: int, instrument: bool = False
) -> Callable[[str], Awaitable[Any]]:
    """One turn under its run root; ``instrument``: the node spans come from GraphAgent's
    callback handler (relay/langgraph/instrument.py) instead of ``traced_node``."""
    from relay import conventions as c
    from relay.langgraph.instrument import GraphInstrumentation
    from relay.langgraph.spans import run_span

    topo = topology(n)

    async def body(turn_id: str) -> Any:
        with run_span(
            tracer,
            agent="bench",
            thread_id="bench-thread",
            turn_id=turn_id,
            run_kind="chat",
            graph_id="bench",
            topology=topo,
        ) as run:
            config: Any = (
                {"callbacks": [GraphInstrumentation(tracer, None, run.node_log)]}
                if instrument
                else None
            )
            out = await graph.ainvoke({"x": 0}, config)
            run.finish(
                "answered", **{c.TURN_RESPONSE: {"status": "answered", "answer": str(out["x"])}}
            )
        return out

    return body


async def _timed(fn: Callable[[], Awaitable[Any]], k: int) -> float:
    """Mean µs of ``k`` sequential awaits of ``fn()``."""
    t0 = time.perf_counter()
    for _ in range(k):
        await fn()
    return (time.perf_counter() - t0) / k * 1e6


async def interleaved(
    configs: dict[str, Callable[[], Awaitable[Any]]],
    k: int | dict[str, int],
    n_rounds: int,
    budget_s: float,
    min_rounds: int = 2,
    after_round: Callable[[], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per round, run every config ``k`` times, alternating config by config turn by turn
    (order reversed every other round), so a burst of load on a shared machine lands on
    all of them alike. Returns, per config, the per-round median wall µs of one turn and
    the per-round mean process-CPU µs of one turn. ``after_round()`` is called at the end
    of each round (to take what the configs noted in it)."""
    wall: dict[str, list[float]] = {name: [] for name in configs}
    cpu: dict[str, list[float]] = {name: [] for name in configs}
    order = list(configs)
    ks = k if isinstance(k, dict) else dict.fromkeys(configs, k)
    for r in rounds(n_rounds, budget_s, minimum=min_rounds):
        gc.collect()
        samples: dict[str, list[float]] = {name: [] for name in configs}
        cpu_sum = dict.fromkeys(configs, 0.0)
        for i in range(max(ks.values())):
            for name in order if (r + i) % 2 == 0 else order[::-1]:
                if i >= ks[name]:
                    continue
                c0 = time.process_time()
                t0 = time.perf_counter()
                await configs[name]()
                samples[name].append((time.perf_counter() - t0) * 1e6)
                cpu_sum[name] += (time.process_time() - c0) * 1e6
        for name in configs:
            wall[name].append(median(samples[name]))
            cpu[name].append(cpu_sum[name] / ks[name])
        if after_round is not None:
            after_round()
    return wall, cpu


async def _overhead(quick: bool) -> list[Figure]:
    rig = Rig()
    whole = RelayRig()
    await whole.start()
    sizes = (4, 16)
    graphs = {
        n: (
            chain_graph(rig.spans_tracer, n),
            chain_graph(rig.relay_tracer, n),
            chain_graph(None, n),
        )
        for n in sizes
    }
    configs: dict[str, Callable[[], Awaitable[Any]]] = {}
    for n in sizes:
        spans_g, relay_g, plain_g = graphs[n]
        spans_body = _span_turn(spans_g, rig.spans_tracer, n)
        relay_body = _span_turn(relay_g, rig.relay_tracer, n)
        configs[f"spans{n}"] = lambda b=spans_body: b(uuid.uuid4().hex)
        configs[f"relay{n}"] = lambda b=relay_body: relay_turn(rig, b)
        if n == 4:
            configs["plain4"] = lambda g=plain_g: g.ainvoke({"x": 0})
            configs["noreader4"] = lambda b=relay_body: _unread_turn(rig, b)
            null_body = _span_turn(chain_graph(rig.null_tracer, n), rig.null_tracer, n)
            configs["null4"] = lambda b=null_body: b(uuid.uuid4().hex)
            floor_body = _span_turn(chain_graph(rig.waker_tracer, n), rig.waker_tracer, n)
            configs["floor4"] = lambda b=floor_body, k=2 * (n + 1): floor_turn(rig, b, k)
            whole_body = _span_turn(chain_graph(whole.tracer, n), whole.tracer, n)
            configs["reader4"] = lambda b=whole_body: whole.reader_turn(b)
            configs["subscribe4"] = lambda b=whole_body: whole.subscribe_turn(b)
            callbacks_body = _span_turn(plain_g, rig.spans_tracer, n, instrument=True)
            configs["callbacks4"] = lambda b=callbacks_body: b(uuid.uuid4().hex)
            for mode in ("updates", "debug", "tasks"):

                async def stream(g: Any = plain_g, m: str = mode) -> None:
                    async for _ in g.astream({"x": 0}, stream_mode=m):
                        pass

                configs[f"{mode}4"] = stream
    k = {4: 4 if quick else 40, 16: 2 if quick else 12}
    for fn in configs.values():  # warm up every path (imports, caches)
        for _ in range(1 if quick else 20):
            await fn()
    lag_p50: dict[str, list[float]] = {name: [] for name in whole.lags}

    def take_lags() -> None:  # per round: the p50 of node end -> reader, per reader
        for name, lags in whole.lags.items():
            lag_p50[name].append(percentile(lags, 50))
            lags.clear()

    take_lags()  # the warm-up's go
    for values in lag_p50.values():
        values.clear()
    per, cpu = await interleaved(
        configs,
        {n: k[16 if n.endswith("16") else 4] for n in configs},
        1 if quick else 15,
        4 if quick else 60,
        1 if quick else 5,
        after_round=take_lags,
    )
    rig.close()
    await whole.close()

    def ratio(a: str, b: str) -> list[float]:
        return [y / x for x, y in zip(per[a], per[b], strict=True)]

    def added(a: str, b: str) -> list[float]:
        return [y - x for x, y in zip(per[a], per[b], strict=True)]

    spans4 = median(per["spans4"])
    common = {"anchor": "spans only (4 nodes)", "anchor_value": spans4, "anchor_unit": "us"}
    figs = [
        summary(
            "overhead.relay",
            "turn, 4 trivial async nodes: spans + relay + subscriber",
            ratio("spans4", "relay4"),
            "x",
            target="<= 1.03",
            limit=1.03,
            params={
                "nodes": 4,
                "turns_per_round": k[4],
                "cpu_ratio": median(
                    [y / x for x, y in zip(cpu["spans4"], cpu["relay4"], strict=True)]
                ),
            },
            **common,
        ),
        summary(
            "overhead.relay_cpu",
            "  the same, ratio of process CPU time per turn",
            [y / x for x, y in zip(cpu["spans4"], cpu["relay4"], strict=True)],
            "x",
            anchor="spans only, CPU",
            anchor_value=median(cpu["spans4"]),
            anchor_unit="us",
            note="less sensitive to other processes",
        ),
        summary(
            "overhead.relay_us",
            "  the same, as µs added per turn",
            added("spans4", "relay4"),
            "us",
            anchor="spans only",
            params={"nodes": 4},
            note="10 span starts/ends -> 10 events per turn",
        ),
        summary(
            "overhead.relay_subscribe",
            "  the same read through relay.subscribe() (a whole Relay)",
            ratio("spans4", "subscribe4"),
            "x",
            params={"via_bus_reader": median(ratio("spans4", "reader4"))},
            note="through the relay's bus reader: params.via_bus_reader",
            **common,
        ),
        summary(
            "overhead.subscribe_vs_reader",
            "  relay.subscribe() against a reader of the relay's bus, same turn",
            ratio("reader4", "subscribe4"),
            "x",
            anchor="the same turn, the bus reader",
            anchor_value=median(per["reader4"]),
            anchor_unit="us",
            target="<= 1.05",
            limit=1.05,
        ),
        summary(
            "overhead.subscribe_lag_p50",
            "  node end -> relay.subscribe() reader, p50",
            lag_p50["subscribe"],
            "ms",
            target="< 0.1",
            limit=0.1,
            anchor="the bus reader's p50",
            anchor_value=median(lag_p50["reader"]),
            anchor_unit="ms",
        ),
        summary(
            "overhead.reader_lag_p50",
            "  node end -> the bus reader, p50",
            lag_p50["reader"],
            "ms",
        ),
        summary(
            "overhead.relay_noreader",
            "  the same without the subscriber (the relay alone)",
            ratio("spans4", "noreader4"),
            "x",
            **common,
        ),
        summary(
            "overhead.floor",
            "  floor: a processor that maps nothing + a reader woken per burst",
            ratio("spans4", "floor4"),
            "x",
            **common,
            note="any relay's least, on this runtime (BurstWaker)",
        ),
        summary(
            "overhead.floor_processor",
            "  floor: a span processor that does nothing",
            ratio("spans4", "null4"),
            "x",
            **common,
        ),
        summary(
            "overhead.ainvoke_plain",
            "  context: ainvoke, no spans",
            ratio("spans4", "plain4"),
            "x",
            **common,
        ),
        summary(
            "overhead.instrument",
            "  context: the same spans from GraphAgent's callbacks, not traced_node",
            ratio("spans4", "callbacks4"),
            "x",
            note="no relay: the instrumentation's own cost",
            **common,
        ),
    ]
    for mode in ("updates", "debug", "tasks"):
        figs.append(
            summary(
                f"overhead.astream_{mode}",
                f"  context: astream(stream_mode='{mode}'), no spans",
                ratio("spans4", f"{mode}4"),
                "x",
                **common,
            )
        )
    per_node = [
        (b16 - b4) / (sizes[1] - sizes[0])
        for b4, b16 in zip(added("spans4", "relay4"), added("spans16", "relay16"), strict=True)
    ]
    figs.append(
        summary(
            "overhead.per_node_us",
            "  growth: µs added per extra node (16 vs 4 nodes)",
            per_node,
            "us",
            anchor="spans only (16 nodes)",
            anchor_value=median(per["spans16"]),
            anchor_unit="us",
            params={"ratio16": median(ratio("spans16", "relay16"))},
        )
    )
    return figs


# -- realistic ------------------------------------------------------------------------------


class _NoTurns:
    async def update(self, *args: Any, **kwargs: Any) -> None:
        return None


def _offline_model(delay_s: float) -> Any:
    """The demo's offline model with no per-word pacing, behind a simulated remote call
    of ``delay_s`` (0: none), whichever of ``ainvoke``/``astream`` the node uses."""
    from span_relay_demo.model import OfflineSupportModel

    class SlowOfflineModel(OfflineSupportModel):
        delay_s: float = 0.0

        async def _agenerate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            return self._generate(messages, stop=stop, **kwargs)

        if hasattr(OfflineSupportModel, "_astream"):

            async def _astream(
                self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
            ) -> Any:
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                    yield chunk

    fields = getattr(OfflineSupportModel, "model_fields", {})
    kwargs: dict[str, Any] = {"delay_s": delay_s}
    if "word_delay_s" in fields:  # the demo paces streamed words; a bench does not
        kwargs["word_delay_s"] = 0.0
    return SlowOfflineModel(**kwargs)


async def _realistic(quick: bool) -> list[Figure]:
    from langgraph.checkpoint.memory import InMemorySaver

    from relay.turns.records import TurnRecord
    from span_relay_demo.app import support_agent
    from span_relay_demo.graph import build_graph
    from span_relay_demo.model import OFFLINE_MODEL_NAME, ModelChoice
    from span_relay_demo.nodes import NodeDeps
    from span_relay_demo.retrieval import KnowledgeBase
    from span_relay_demo.tools.refund import RefundLedger

    rig = Rig()
    kb = KnowledgeBase()
    tmp = tempfile.TemporaryDirectory(prefix="bench-realistic-")
    ledger = RefundLedger(Path(tmp.name) / "refunds.db")
    offline = ModelChoice(_offline_model(0.0), OFFLINE_MODEL_NAME, "offline")
    slow = ModelChoice(_offline_model(0.05 if quick else 1.0), OFFLINE_MODEL_NAME, "offline")

    def agent(tracer: Any, model: Any) -> Any:
        extra: dict[str, Any] = {}
        if (
            tracer is rig.relay_tracer
            and "span_events" in getattr(NodeDeps, "__dataclass_fields__", {})
            and hasattr(rig.processor, "add_event")
        ):
            extra["span_events"] = rig.processor.add_event  # as span_relay_demo/app.py wires it
        deps = NodeDeps(tracer, kb, model, ledger, **extra)
        a = support_agent(build_graph(deps, InMemorySaver()))
        a.bind(
            tracer=tracer,
            turns=_NoTurns(),
            messages=None,  # type: ignore[arg-type]
            add_event=extra.get("span_events"),
            turn_timeout_s=120.0,
        )
        return a

    agents = {
        ("spans", "offline"): agent(rig.spans_tracer, offline),
        ("relay", "offline"): agent(rig.relay_tracer, offline),
        ("spans", "slow"): agent(rig.spans_tracer, slow),
        ("relay", "slow"): agent(rig.relay_tracer, slow),
    }
    message = "How do refunds work?"

    def record(turn_id: str | None = None) -> TurnRecord:
        return TurnRecord(
            turn_id=turn_id or uuid.uuid4().hex,
            thread_id=uuid.uuid4().hex,
            status="running",
            message=message,
            started_at=time.time() * 1000,
        )

    async def spans_turn(a: Any) -> None:
        r = record()
        response = await a.chat(r, a.input_of(message, r))
        assert response.status == "answered", response

    async def relay_run(a: Any) -> None:
        async def body(turn_id: str) -> None:
            r = record(turn_id)
            response = await a.chat(r, a.input_of(message, r))
            assert response.status == "answered", response

        await relay_turn(rig, body)

    figs: list[Figure] = []
    try:
        for model, k, n_rounds, budget, label in (
            (
                "offline",
                2 if quick else 10,
                1 if quick else 12,
                5 if quick else 40,
                "demo agent turn, offline model, 'How do refunds work?'",
            ),
            (
                "slow",
                1,
                1 if quick else 3,
                5 if quick else 20,
                "  the same with a simulated 1 s model call",
            ),
        ):
            a_spans = agents[("spans", model)]
            a_relay = agents[("relay", model)]
            for _ in range(1 if model == "slow" or quick else 10):
                await spans_turn(a_spans)
                await relay_run(a_relay)
            per, cpu = await interleaved(
                {"spans": lambda a=a_spans: spans_turn(a), "relay": lambda a=a_relay: relay_run(a)},
                k,
                n_rounds,
                budget,
                min(2, n_rounds),
            )
            ratios = [b / a for a, b in zip(per["spans"], per["relay"], strict=True)]
            added = [b - a for a, b in zip(per["spans"], per["relay"], strict=True)]
            key = "realistic.offline" if model == "offline" else "realistic.model_1s"
            if quick and model == "slow":
                label = "  the same with a simulated model call (50 ms in --quick)"
            figs.append(
                summary(
                    key,
                    label,
                    ratios,
                    "x",
                    anchor="spans only",
                    anchor_value=median(per["spans"]) / 1000,
                    anchor_unit="ms",
                    target="report",
                    note=f"added {median(added):.0f} µs per turn",
                    params={
                        "added_us": median(added),
                        "turns_per_round": k,
                        "cpu_ratio": median(
                            [y / x for x, y in zip(cpu["spans"], cpu["relay"], strict=True)]
                        ),
                        "checkpointer": "InMemorySaver",
                    },
                )
            )
    finally:
        rig.close()
        ledger.close()
        tmp.cleanup()
    return figs


def run_overhead(quick: bool) -> list[Figure]:
    return asyncio.run(_overhead(quick))


def run_realistic(quick: bool) -> list[Figure]:
    return asyncio.run(_realistic(quick))


if __name__ == "__main__":  # python -m tests.bench.bench_overhead
    for f in run_overhead(quick=False) + run_realistic(quick=False):
        print(json.dumps({"key": f.key, "value": f.value, "lo": f.lo, "hi": f.hi}))
