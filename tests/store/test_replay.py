"""Replay order and the exporter, in process: the live processor and the replay of the
stored spans give the same events, also when spans share a timestamp."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from relay import conventions as c
from relay.delivery.replay import schedule
from relay.events import Event
from relay.ingest.processor import RelaySpanProcessor
from relay.mapping.feed import NESTING_SLACK_NS, ordered_phases, replay_events
from relay.spans import SpanRecord, from_sdk_span
from relay.store import STORED
from relay.store.exporter import add_span_store
from relay.store.sqlite import SQLiteSpanStore

T0 = 1_800_000_000_000_000_000
TOPOLOGY = json.dumps({"nodes": [], "edges": []})


def rec(span_id: str, parent: str | None, start: int, end: int | None, **attrs: Any) -> SpanRecord:
    return SpanRecord(
        "a" * 32,
        span_id.ljust(16, "0"),
        parent.ljust(16, "0") if parent else None,
        span_id,
        start,
        end,
        attrs,
    )


def names(phases: list[tuple[SpanRecord, str, Any]]) -> list[str]:
    return [
        f"{r.name} {kind}" + (f" {event['name']}" if event else "") for r, kind, event in phases
    ]


# -- the order rules ----------------------------------------------------------------------


def test_ends_come_before_starts_at_equal_times() -> None:
    spans = [rec("root", None, 0, 100), rec("a", "root", 10, 50), rec("b", "root", 50, 90)]
    assert names(ordered_phases(spans)) == [
        "root start",
        "a start",
        "a end",
        "b start",
        "b end",
        "root end",
    ]


def test_parent_starts_before_child_and_child_ends_before_parent_at_equal_times() -> None:
    spans = [rec("child", "node", 10, 50), rec("node", "root", 10, 50), rec("root", None, 0, 50)]
    assert names(ordered_phases(spans)) == [
        "root start",
        "node start",
        "child start",
        "child end",
        "node end",
        "root end",
    ]


def test_a_zero_duration_span_starts_then_ends() -> None:
    spans = [
        rec("root", None, 0, 100),
        rec("a", "root", 10, 50),
        rec("z", "a", 50, 50),
        rec("b", "root", 50, 90),
    ]
    assert names(ordered_phases(spans)) == [
        "root start",
        "a start",
        "z start",
        "z end",
        "a end",
        "b start",
        "b end",
        "root end",
    ]


def test_microsecond_cut_child_end_stays_inside_its_parent() -> None:
    spans = [
        rec("root", None, 0, 100_000),
        rec("node", "root", 1_000, 9_000),
        rec("tool", "node", 5_000, 9_000 + NESTING_SLACK_NS // 2),
        rec("next", "root", 9_500, 20_000),
    ]
    assert names(ordered_phases(spans)) == [
        "root start",
        "node start",
        "tool start",
        "tool end",
        "node end",
        "next start",
        "next end",
        "root end",
    ]


def test_schedule_scales_the_gaps() -> None:
    evs = [Event("x", "t", "u", "r", ts) for ts in (1000.0, 1500.0, 1500.0, 3000.0)]
    assert schedule(evs, 1) == [0.0, 0.5, 0.5, 2.0]
    assert schedule(evs, 4) == [0.0, 0.125, 0.125, 0.5]
    assert schedule(evs, 0) == [0.0] * 4
    assert schedule(evs, 1, max_gap_s=1) == [0.0, 0.5, 0.5, 1.5]


# -- live processor vs replay of the stored spans ------------------------------------------


def _run_live(provider: TracerProvider) -> None:
    """One run whose spans share timestamps (explicit times), in the live call order."""
    tracer = provider.get_tracer("test")
    root = tracer.start_span(
        "invoke_agent a",
        start_time=T0,
        attributes={
            c.TURN_ID: "turn-1",
            c.CONVERSATION_ID: "thread-1",
            c.RUN_KIND: "chat",
            c.GRAPH_ID: "g",
            c.GRAPH_TOPOLOGY: TOPOLOGY,
        },
    )
    ctx = set_span_in_context(root)
    t1 = T0 + 1000
    t2 = T0 + 2000
    t3 = T0 + 3000
    t4 = T0 + 4000
    a = tracer.start_span("node a", ctx, start_time=t1, attributes={c.NODE_NAME: "a"})
    tool = tracer.start_span(
        "execute_tool refund",
        set_span_in_context(a),
        start_time=t1,
        attributes={c.OPERATION: c.OP_TOOL, c.TOOL_NAME: "refund", c.TOOL_CALL_ID: "call_1"},
    )
    tool.end(end_time=t2)
    a.set_attribute(c.NODE_OUTCOME, "ok")
    a.end(end_time=t2)
    b = tracer.start_span("node b", ctx, start_time=t2, attributes={c.NODE_NAME: "b"})
    guard = tracer.start_span(
        "apply_guardrail p",
        set_span_in_context(b),
        start_time=t3,
        attributes={c.OPERATION: c.OP_GUARDRAIL},
    )
    guard.set_attribute(c.GUARDRAIL_DECISION, "block")
    guard.set_status(Status(StatusCode.ERROR, "blocked"))
    guard.end(end_time=t3)
    b.end(end_time=t3)
    last = tracer.start_span("node c", ctx, start_time=t3, attributes={c.NODE_NAME: "c"})
    last.end(end_time=t4)
    root.set_attribute(c.TURN_OUTCOME, "answered")
    root.set_attribute(c.TURN_RESPONSE, json.dumps({"status": "answered"}))
    root.end(end_time=t4)


def test_live_events_equal_replayed_events_from_the_store(tmp_path: Path) -> None:
    store = SQLiteSpanStore(tmp_path / "spans.db", retention_s=3600, max_turns=100)
    writers: list[str] = []
    original = store.write

    def write(records: Any, **kw: Any) -> int:
        writers.append(threading.current_thread().name)
        return original(records, **kw)

    store.write = write  # type: ignore[method-assign]
    live: list[Event] = []

    async def main() -> None:
        provider = TracerProvider()
        processor = RelaySpanProcessor(lambda e: live.append(e.with_seq(len(live) + 1)))
        processor.bind(asyncio.get_running_loop())
        provider.add_span_processor(processor)
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        batch = add_span_store(provider, store)
        _run_live(provider)
        processor.flush()
        await asyncio.to_thread(batch.force_flush)
        provider.shutdown()
        sdk_records = sorted(
            (from_sdk_span(s, True) for s in memory.get_finished_spans()), key=lambda r: r.span_id
        )
        state, stored = store.turn_spans("turn-1")
        assert state == STORED
        assert sorted(stored, key=lambda r: r.span_id) == sdk_records

    asyncio.run(main())
    assert writers and threading.main_thread().name not in writers
    _, stored = store.turn_spans("turn-1")
    replayed = replay_events(stored)
    assert [e.to_dict() for e in replayed] == [e.to_dict() for e in live]
    assert [e.type for e in live] == [
        "graph_topology",
        "node_started",
        "tool_started",
        "tool_completed",
        "node_completed",
        "node_started",
        "node_completed",
        "node_started",
        "node_completed",
        "turn_completed",
    ]
    store.close()


# -- the replay stream --------------------------------------------------------------------


def test_replay_stream_paces_beats_and_hands_off_on_shutdown() -> None:
    from relay.delivery.replay import replay_stream
    from relay.delivery.streaming import SSEEncoder

    evs = [
        Event("node_started", "t", "u", "r", ts, seq=i + 1)
        for i, ts in enumerate((1000.0, 1000.0, 1300.0, 60_000.0))
    ]

    async def main() -> list[bytes]:
        closing = asyncio.Event()
        sent: list[bytes] = []
        stream = replay_stream(evs, SSEEncoder(2000), speed=1, heartbeat_s=0.1, closing=closing)

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                sent.append(message["body"])
                # the server shuts down during the long gap: once event 3 is out and a
                # heartbeat followed it (an order, not a time: the test stays right
                # however slowly this machine runs)
                body = b"".join(sent)
                if b"id: 3\n" in body and body.rfind(b": hb\n\n") > body.index(b"id: 3\n"):
                    closing.set()

        async def receive() -> dict[str, Any]:
            await asyncio.Event().wait()
            return {}

        # event 4 is due 59.7 s after event 3: a stream that did not hand off on closing
        # would still be waiting for it when this bound on a hang runs out
        await asyncio.wait_for(stream({}, receive, send), 30)
        return sent

    sent = asyncio.run(main())
    body = b"".join(sent).decode()
    assert body.startswith("retry: 2000\n\nid: 1\n")
    assert body.index("id: 2\n") < body.index("id: 3\n")
    assert "id: 4\n" not in body and ": hb\n\n" in body
    assert (
        'event: reconnect\ndata: {"v":1,"type":"reconnect","reason":"server_shutdown",'
        '"last_seq":3' in body
    )
    assert sent[-1] == b""


def test_span_events_replay_between_their_span_start_and_end() -> None:
    chat = rec("chat", "node", 100, 300)
    chat.events = [
        {"name": "a", "time_ns": 100, "attributes": {}},
        {"name": "b", "time_ns": 200, "attributes": {}},
        {"name": "c", "time_ns": 300, "attributes": {}},
    ]
    spans = [rec("root", None, 0, 400), rec("node", "root", 50, 300), chat]
    assert names(ordered_phases(spans)) == [
        "root start",
        "node start",
        "chat start",
        "chat event a",
        "chat event b",
        "chat event c",
        "chat end",
        "node end",
        "root end",
    ]


def test_text_deltas_replay_like_live() -> None:
    """Span events the live processor hands over (text as it is written) replay equal."""
    live: list[Event] = []
    memory = InMemorySpanExporter()

    async def main() -> None:
        provider = TracerProvider()
        processor = RelaySpanProcessor(lambda e: live.append(e.with_seq(len(live) + 1)))
        processor.bind(asyncio.get_running_loop())
        provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("test")
        root = tracer.start_span(
            "invoke_agent a",
            attributes={
                c.TURN_ID: "turn-2",
                c.CONVERSATION_ID: "thread-2",
                c.RUN_KIND: "chat",
                c.GRAPH_ID: "g",
                c.GRAPH_TOPOLOGY: TOPOLOGY,
            },
        )
        node = tracer.start_span(
            "node generate", set_span_in_context(root), attributes={c.NODE_NAME: "generate"}
        )
        chat = tracer.start_span(
            "chat m", set_span_in_context(node), attributes={c.OPERATION: c.OP_CHAT}
        )
        for chunk in ("Refunds ", "take ", "5 days."):
            processor.add_event(chat, c.DELTA_EVENT, {c.DELTA_TEXT: chunk})
        chat.end()
        node.end()
        root.set_attribute(c.TURN_OUTCOME, "answered")
        root.set_attribute(c.TURN_RESPONSE, json.dumps({"status": "answered"}))
        root.end()
        processor.flush()
        provider.shutdown()

    asyncio.run(main())
    stored = [from_sdk_span(s, True) for s in memory.get_finished_spans()]
    assert [e.type for e in live].count("text_delta") == 3
    assert [e.to_dict() for e in replay_events(stored)] == [e.to_dict() for e in live]
