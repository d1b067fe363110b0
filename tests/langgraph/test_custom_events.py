"""``custom`` events (docs/events.md): what a node sends through LangGraph's stream writer
and LangChain's custom callback events, on a graph written for the test
(tests/langgraph/progress_graph.py), served by a real uvicorn, held against LangGraph's
own ``astream(stream_mode=["updates", "custom"], subgraphs=True)`` and LangChain's
``astream_events``; the replay (the bus's log and the stored spans) equals live; AG-UI
sends them as ``CUSTOM``; a payload past the limit is cut and marked."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from relay import GraphAgent, Relay
from relay import conventions as c
from relay.langgraph.custom_events import MAX_KEPT_TEXT, MAX_PER_NODE, CustomEvents, encode
from tests.conftest import LiveServer, events_of, stream_get, stream_post
from tests.contract import check_event
from tests.delivery.agui_checks import post_agui
from tests.export.test_otlp_export import attrs, start_collector
from tests.langgraph import progress_graph
from tests.zoo.reference import strip_task_ids

INPUT = {"messages": [{"role": "user", "content": "How many rows?"}]}
#: what a payload past the size limit keeps: its top-level scalars, a string cut
CUT_REPORT = {"stage": "report", "progress": 0.9, "blob": "x" * MAX_KEPT_TEXT}


@pytest.fixture
def served(app_env: dict[str, str]) -> Iterator[LiveServer]:
    relay = Relay.from_env(app_env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(progress_graph.build(), name="progress"))
    relay.mount(app, GraphAgent(progress_graph.build_fanout(), name="fanout"))
    relay.mount(app, GraphAgent(progress_graph.build_chatty(), name="chatty"))
    server = LiveServer(app).start()
    yield server
    server.stop()


async def reference() -> tuple[list[tuple[Any, ...]], list[tuple[str, Any, str]]]:
    """LangGraph's view: the stream writer's payloads among the node updates, in stream
    order, namespaces without task ids; LangChain's: the custom callback events."""
    graph = progress_graph.build()
    seen: list[tuple[Any, ...]] = []
    async for ns, mode, chunk in graph.astream(
        INPUT, stream_mode=["updates", "custom"], subgraphs=True
    ):
        if mode == "custom":
            seen.append(("custom", strip_task_ids(ns), chunk))
        else:
            seen += [("update", strip_task_ids(ns), node) for node in chunk]
    dispatched = [
        (e["name"], e["data"], e["metadata"]["langgraph_node"])
        async for e in progress_graph.build().astream_events(INPUT, version="v2")
        if e["event"] == "on_custom_event"
    ]
    return seen, dispatched


def ours(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The relay's view, in the shape of :func:`reference`'s first list: the stream
    writer's payloads (``custom`` without a name) and the nodes as they complete."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if e["type"] == "custom" and e["name"] is None:
            out.append(("custom", tuple(e["namespace"]), e["data"]))
        elif e["type"] == "node_completed":
            out.append(("update", tuple(e["namespace"]), e["node"]))
    return out


def chat(client: httpx.Client, url: str) -> list[dict[str, Any]]:
    return events_of(stream_post(client, f"{url}/chat", {"message": "How many rows?"}), True)


def test_custom_events_match_langgraph_and_replay(served: LiveServer) -> None:
    seen, dispatched = asyncio.run(reference())
    with httpx.Client(timeout=30) as client:
        live = chat(client, served.url)
        assert live[-2]["type"] == "turn_completed", live[-2]
        assert live[-2]["response"]["status"] == "answered"
        assert live[-2]["response"]["answer"] == "Done: 3 rows."
        customs = [e for e in live if e["type"] == "custom"]
        for event in customs:
            check_event(event)  # (not check_stream: a subgraph's nodes in the response
            # carry a namespace, which tests/contract.py's ChatResponse check does not know)

        # the stream writer: LangGraph's payloads, namespaces and order among the nodes
        # (the report, past 8 KiB, cut)
        expected = [
            ("custom", ns, CUT_REPORT if data == progress_graph.REPORT else data)
            for _, ns, data in (x for x in seen if x[0] == "custom")
        ]
        assert [x for x in ours(live) if x[0] == "custom"] == expected
        reference_order = [
            (kind, ns, CUT_REPORT if x == progress_graph.REPORT else x) for kind, ns, x in seen
        ]
        assert ours(live) == reference_order
        assert [
            (e["node"], tuple(e["namespace"]), e["data"]) for e in customs if not e["name"]
        ] == [
            (node, ns, CUT_REPORT if data == progress_graph.REPORT else data)
            for node, ns, data in progress_graph.WRITTEN
        ]
        # the custom callback events: LangChain's own, with their node
        assert [(e["name"], e["data"], e["node"]) for e in customs if e["name"]] == dispatched
        assert dispatched == progress_graph.DISPATCHED
        # each inside its node: after its node_started, before its node_completed; on the
        # node's own span
        for e in customs:
            opened = [x for x in live if x["type"] == "node_started" and x["node"] == e["node"]]
            assert [x["span_id"] for x in opened] == [e["span_id"]], e
            k = live.index(e)
            started = [
                i
                for i, x in enumerate(live[:k])
                if x["type"] == "node_started" and x["node"] == e["node"]
            ]
            ended = [
                i
                for i, x in enumerate(live[:k])
                if x["type"] == "node_completed" and x["node"] == e["node"]
            ]
            assert started and not ended, e
        # the cut, marked; the others whole and unmarked
        cut = [e for e in customs if e.get("truncated")]
        assert [(e["node"], e["data"]) for e in cut] == [("answer", CUT_REPORT)]
        assert all("truncated" not in e for e in customs if e not in cut)

        # replay: the bus's log, then the stored spans, equal live
        turn = live[0]["turn_id"]
        without_trailer = [e for e in live if e["type"] != "message_saved"]
        replayed = events_of(stream_get(client, f"{served.url}/turns/{turn}/events"))
        assert [e for e in replayed if e["type"] != "message_saved"] == without_trailer
        from_spans = events_of(
            stream_get(client, f"{served.url}/turns/{turn}/events", {"source": "spans"})
        )
        assert [e for e in from_spans if e["type"] != "message_saved"] == without_trailer


def test_each_instance_of_a_fanned_out_node_gets_its_own(served: LiveServer) -> None:
    """Three ``Send`` instances of one node side by side: each payload lands on the
    instance that sent it (its ``span_id``), as LangGraph's own stream has them."""

    async def langgraph_payloads() -> list[Any]:
        graph = progress_graph.build_fanout()
        return [
            chunk
            async for ns, mode, chunk in graph.astream(
                INPUT, stream_mode=["updates", "custom"], subgraphs=True
            )
            if mode == "custom"
        ]

    expected = asyncio.run(langgraph_payloads())
    with httpx.Client(timeout=30) as client:
        frames = stream_post(client, f"{served.url}/graphs/fanout/chat", {"message": "Go."})
    live = events_of(frames)
    customs = [e for e in live if e["type"] == "custom"]
    key = lambda d: d["item"]  # noqa: E731 - parallel: the order among them is LangGraph's to pick
    assert sorted((e["data"] for e in customs), key=key) == sorted(expected, key=key)
    started = {e["span_id"]: e for e in live if e["type"] == "node_started" and e["node"] == "work"}
    assert len(started) == 3 and {e["span_id"] for e in customs} == set(started)
    for e in customs:
        k = live.index(e)
        done = [
            x for x in live[:k] if x["type"] == "node_completed" and x["span_id"] == e["span_id"]
        ]
        assert e["node"] == "work" and not done


def test_past_the_per_node_cap_live_and_replay_agree(served: LiveServer) -> None:
    """A node that sends more payloads than its span keeps events: the first
    MAX_PER_NODE go, live and in the replay from the stored spans alike (past the SDK's
    128 events a span, the stored span would have lost the first ones)."""
    with httpx.Client(timeout=30) as client:
        frames = stream_post(client, f"{served.url}/graphs/chatty/chat", {"message": "Count."})
        live = [e for e in events_of(frames) if e["type"] != "message_saved"]
        steps = [e["data"]["step"] for e in live if e["type"] == "custom"]
        assert steps == list(range(MAX_PER_NODE)) and progress_graph.CHATTY > MAX_PER_NODE
        turn = live[0]["turn_id"]
        replayed = events_of(
            stream_get(client, f"{served.url}/turns/{turn}/events", {"source": "spans"})
        )
    assert [e for e in replayed if e["type"] != "message_saved"] == live


def test_agui_sends_custom_events(served: LiveServer) -> None:
    body = {
        "threadId": uuid.uuid4().hex,
        "runId": "run-1",
        "messages": [{"id": "u1", "role": "user", "content": "How many rows?"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with httpx.Client(timeout=30) as client:
        events = post_agui(client, served.url, body)
    assert events[-1]["type"] == "RUN_FINISHED"
    customs = [e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "custom"]
    assert [(v["node"], v.get("name"), v["data"]) for v in customs] == [
        ("prepare", None, {"stage": "prepare", "progress": 0.33}),
        ("prepare", None, {"stage": "prepare", "progress": 0.66}),
        ("fetch", "rows", {"fetched": 3, "query": "sales"}),
        ("fetch", None, {"message": "fetched 3 rows"}),
        ("inner", None, {"stage": "inner", "progress": 1.0}),
        ("inner", "inner_done", {"ok": True}),
        ("answer", None, "writing the answer"),
        ("answer", None, CUT_REPORT),
    ]
    assert customs[4]["namespace"] == ["sub"] and customs[-1]["truncated"] is True
    # inside the node's step: after its STEP_STARTED, before its STEP_FINISHED
    first = next(i for i, e in enumerate(events) if e["type"] == "CUSTOM" and e["name"] == "custom")
    step = next(i for i, e in enumerate(events) if e["type"] == "STEP_STARTED")
    done = next(i for i, e in enumerate(events) if e["type"] == "STEP_FINISHED")
    assert events[step]["stepName"].startswith("prepare#") and step < first < done


def test_the_size_limit_is_a_setting(app_env: dict[str, str]) -> None:
    relay = Relay.from_env({**app_env, "RELAY_CUSTOM_EVENT_MAX_BYTES": "30"})
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(progress_graph.build(), name="progress"))
    server = LiveServer(app).start()
    try:
        with httpx.Client(timeout=30) as client:
            live = chat(client, server.url)
    finally:
        server.stop()
    customs = [(e["data"], e.get("truncated")) for e in live if e["type"] == "custom"]
    # {"stage":"prepare","progress":0.33}: 37 bytes, cut to the fields that fit in 30
    assert customs[0] == ({"stage": "prepare"}, True)
    assert customs[2] == ({"fetched": 3, "query": "sales"}, None)  # 30 bytes: whole
    assert customs[-1] == ({"stage": "report"}, True)


def test_encode() -> None:
    assert encode({"a": 1}, 100) == ('{"a":1}', False)
    assert encode([1] * 100, 20) == ("null", True)  # not an object: nothing kept
    text, cut = encode({"stage": "s", "nested": {"x": "y" * 50}, "n": None}, 30)
    assert (text, cut) == ('{"stage":"s","n":null}', True)
    assert encode({"when": object}, 1000)[0].startswith('{"when":"<class')  # str of it


def test_capture_never_raises_into_the_node() -> None:
    """A payload JSON cannot hold (a cycle) or an add_event that raises: counted, and
    the node goes on."""
    from opentelemetry.sdk.trace import TracerProvider

    span = (
        TracerProvider().get_tracer("t").start_span("node n", attributes={"relay.node.name": "n"})
    )
    recorded: list[Any] = []
    capture = CustomEvents(lambda *a: recorded.append(a), lambda ns: span)
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    capture.record("n:1", cycle, None)
    assert capture.failures == 1 and not recorded

    def broken(*args: Any) -> None:
        raise RuntimeError("the processor is gone")

    CustomEvents(broken, lambda ns: span).record("n:1", {"ok": 1}, "x")  # no raise
    capture.write({"outside": "a graph"})  # no LangGraph config here: counted, not raised
    assert capture.failures == 2


@pytest.mark.parametrize("capture", ["true", "false"])
def test_the_node_spans_carry_them_over_otlp(app_env: dict[str, str], capture: str) -> None:
    """Exported: each payload a ``relay.custom`` event of its node's span, as streamed;
    RELAY_CAPTURE_CONTENT=false leaves them out of the export (the stream keeps them)."""
    grpc_server, collector, port = start_collector()
    env = {
        **app_env,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "RELAY_CAPTURE_CONTENT": capture,
    }
    relay = Relay.from_env(env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(progress_graph.build(), name="progress"))
    server = LiveServer(app).start()
    try:
        with httpx.Client(timeout=30) as client:
            live = chat(client, server.url)
        spans = collector.wait_for(8)  # the root, 5 nodes (inner among them), the tool, save
        while not any(s.name == "save_message" for s in spans):
            spans = collector.wait_for(len(spans) + 1)
    finally:
        server.stop()
        grpc_server.stop(0)
    streamed = [(e["span_id"], e["data"]) for e in live if e["type"] == "custom"]
    assert len(streamed) == 8
    exported = [
        (s.span_id.hex(), json.loads(attrs(ev)[c.CUSTOM_DATA].string_value))
        for s in sorted(spans, key=lambda s: s.start_time_unix_nano)
        for ev in s.events
        if ev.name == c.CUSTOM_EVENT
    ]
    assert exported == (streamed if capture == "true" else [])
