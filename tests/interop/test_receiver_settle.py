"""The receiver's settle window and what waits on received turns, on a real uvicorn:
spans sent one per request in the reverse of the order they ran come out in order; a
root that says its span count goes out when they are all in; a span after its run's end
is late (counted, stored, not streamed); ``GET /turns/{id}/events?wait=S`` waits for a
turn that has not arrived; ``GET /turns`` as an event stream shows it begin and end."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import httpx
from opentelemetry.sdk.trace import ReadableSpan

from relay import conventions as c
from tests.conftest import iter_frames
from tests.interop.conftest import TurnReader, assert_well_formed, wait_until
from tests.interop.spans import Collecting, made_up_run, protobuf_body, provider_with

PROTOBUF = {"Content-Type": "application/x-protobuf"}
NODES = ["plan", "act"]


def collected(**kwargs: Any) -> tuple[str, list[ReadableSpan]]:
    exporter = Collecting()
    provider = provider_with(exporter)
    turn_id = made_up_run(provider, markers=False, **kwargs)
    provider.shutdown()
    return turn_id, exporter.spans


def post(url: str, spans: list[ReadableSpan]) -> None:
    r = httpx.post(f"{url}/v1/traces", content=protobuf_body(spans), headers=PROTOBUF, timeout=10)
    assert r.status_code == 200, r.text


def counted(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The spans, the root saying how many there are (``relay.run.span_count``)."""
    root = next(s for s in spans if s.parent is None)
    root._attributes = {**root.attributes, c.RUN_SPAN_COUNT: len(spans)}  # type: ignore[attr-defined]
    return spans


def test_spans_sent_one_by_one_backwards_stream_in_order(make_relay) -> None:
    """The root first, then its children, the latest first, each in its own request.
    The window is a minute and the root says its span count: the run goes out when the
    last span is in, however slowly the requests come (nothing here depends on time)."""
    server = make_relay(RELAY_OTLP_SETTLE_MS="60000")
    turn_id, spans = collected()
    reader = TurnReader(server.url, turn_id, timeout=20).start()
    for span in reversed(counted(spans)):
        post(server.url, [span])
    events = reader.join(20)
    assert_well_formed(events)
    assert [e["node"] for e in events if e["type"] == "node_started"] == NODES
    assert [e["node"] for e in events if e["type"] == "node_completed"] == NODES
    assert [e["type"] for e in events if e["type"].startswith("tool_")] == [
        "tool_started",
        "tool_completed",
    ]
    assert server.relay.receiver.stats["late"] == 0


def test_a_span_after_its_runs_end_is_late(make_relay) -> None:
    server = make_relay(RELAY_OTLP_SETTLE_MS="0")  # no window: the root's end goes at once
    turn_id, spans = collected()
    tool = next(s for s in spans if s.name.startswith("execute_tool"))
    reader = TurnReader(server.url, turn_id).start()
    post(server.url, [s for s in spans if s is not tool])
    events = reader.join()
    assert events[-1]["type"] == "turn_completed"
    assert not any(e["type"] == "tool_started" for e in events)
    post(server.url, [tool])
    stats = server.relay.receiver.stats
    assert stats["late"] == 1
    wait_until(lambda: stats["stored"] == len(spans), what="the late span stored")
    replay = httpx.get(f"{server.url}/turns/{turn_id}/events?source=spans", timeout=10)
    assert "event: tool_started" in replay.text  # stored: the replay has it


def test_waiting_for_a_turn_that_has_not_arrived(relay_server) -> None:
    turn_id, spans = collected()
    got: dict[str, Any] = {}

    def read() -> None:
        with httpx.stream(
            "GET", f"{relay_server.url}/turns/{turn_id}/events?wait=30", timeout=40
        ) as response:
            got["status"] = response.status_code
            got["types"] = [f.event for f in iter_frames(response) if f.event]

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    # the reader is waiting (it watches the turn feed) before the spans are sent
    wait_until(lambda: relay_server.relay.feed.watched, what="the reader waiting")
    post(relay_server.url, spans)
    thread.join(40)
    assert got["status"] == 200 and got["types"][-1] == "turn_completed"
    unknown = httpx.get(f"{relay_server.url}/turns/{uuid.uuid4().hex}/events?wait=0.2")
    assert unknown.status_code == 404 and "?wait=" in unknown.json()["error"]["message"]
    assert httpx.get(f"{relay_server.url}/turns/x/events?wait=301").status_code == 422


def test_the_turn_feed_shows_a_received_turn_begin_and_end(relay_server) -> None:
    turn_id, spans = collected()
    frames: list[tuple[str, Any]] = []
    ended = threading.Event()

    def watch() -> None:
        with httpx.stream(
            "GET", f"{relay_server.url}/turns", headers={"Accept": "text/event-stream"}, timeout=40
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for frame in iter_frames(response):
                if frame.event:
                    frames.append((frame.event, json.loads(frame.data)))
                    if frame.event == "turn" and frames[-1][1]["status"] == "answered":
                        break
        ended.set()

    threading.Thread(target=watch, daemon=True).start()
    wait_until(lambda: frames, what="the first frame")
    assert frames[0] == ("turns", {"turns": []})
    post(relay_server.url, spans)
    assert ended.wait(30)
    changes = [(data["turn_id"], data["status"]) for event, data in frames[1:]]
    assert changes[0] == (turn_id, "running") and changes[-1] == (turn_id, "answered")
    assert frames[-1][1]["message"] == "hello"
    listed = httpx.get(f"{relay_server.url}/turns").json()["turns"]
    assert [t["turn_id"] for t in listed] == [turn_id]
