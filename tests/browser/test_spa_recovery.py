"""The SPA draws a recovered turn (docs/events.md, "Recovery") in a real Chromium: a
``/chat`` stream served to the page with ``page.route``, whose first run is cut mid-node
(``turn_recovered``) and whose recovered run (``run_kind: "recover"``) answers; and one
ended ``interrupted`` (a tool was running) instead."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.test_spa import open_app, send, wait_outcome

pytestmark = pytest.mark.browser

TOPOLOGY = {
    "graph_id": "recovering",
    "nodes": [{"id": n, "label": n} for n in ("__start__", "prepare", "generate", "__end__")],
    "edges": [
        {"source": s, "target": t, "conditional": False}
        for s, t in (("__start__", "prepare"), ("prepare", "generate"), ("generate", "__end__"))
    ],
}
CUT = "a" * 32
RECOVERED = "b" * 32
TOOL_INTERRUPTED = (
    "The server stopped while a tool of this turn was running (charge_card), so the turn "
    "was not taken up again on its own: the tool may have done its work. Sending your "
    "message again runs it again."
)


def recovery_stream(turn: str, *, recovered: bool) -> str:
    """The events of a turn whose first run is cut in ``generate``, as SSE; then either
    the recovered run to its answer, or the claimer's ``interrupted`` (a tool was running)."""
    events: list[dict[str, Any]] = []

    def ev(type_: str, trace: str, ts: float, **fields: Any) -> None:
        envelope = {"v": 1, "thread_id": f"th-{turn}", "turn_id": turn, "trace_id": trace}
        events.append({**envelope, "type": type_, "seq": len(events) + 1, "ts": ts, **fields})

    ev("graph_topology", CUT, 1000.0, run_kind="chat", **TOPOLOGY)
    ev("node_started", CUT, 1001.0, node="prepare", span_id="p1", parent_span_id="r1", step=1)
    ev("node_completed", CUT, 1011.0, node="prepare", span_id="p1", status="ok", duration_ms=10.0)
    ev("node_started", CUT, 1012.0, node="generate", span_id="g1", parent_span_id="r1", step=2)
    ev("tool_started", CUT, 1020.0, tool="charge_card", span_id="t1", node="generate", args={})
    if recovered:
        fields = {"attempt": 1, "reason": "owner_lost", "resumed_from": "1f0c-ckpt"}
        ev("turn_recovered", RECOVERED, 16000.0, **fields)
        ev("graph_topology", RECOVERED, 16000.0, run_kind="recover", **TOPOLOGY)
        ev("node_started", RECOVERED, 16001.0, node="generate", span_id="g2", step=2)
        ev("node_completed", RECOVERED, 16010.0, node="generate", span_id="g2", status="ok")
        response = {
            "thread_id": f"th-{turn}",
            "turn_id": turn,
            "trace_id": RECOVERED,
            "status": "answered",
            "answer": "Done after all.",
            "citations": [],
            "interrupts": [],
            "nodes": [],
        }
        ev("turn_completed", RECOVERED, 16011.0, response=response)
    else:
        message = TOOL_INTERRUPTED
        ev(
            "error",
            CUT,
            16000.0,
            code="interrupted",
            message=message,
            retryable=True,
            reason="tool_running",
            tools=["lookup"],
        )
    frames = ["retry: 2000\n\n"]
    for e in events:
        frames.append(f"id: {e['seq']}\nevent: {e['type']}\ndata: {json.dumps(e)}\n\n")
    return "".join(frames)


def serve(page: Any, body: str) -> None:
    """``POST /chat`` as a stream answers ``body``."""

    def fulfill(route: Any) -> None:
        if "text/event-stream" in (route.request.headers.get("accept") or ""):
            route.fulfill(
                status=200,
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
                body=body,
            )
        else:
            route.continue_()

    page.route("**/chat", fulfill)


def test_a_recovered_turn_shows_its_cut_run_and_the_run_that_answered(page):
    open_app(page)
    serve(page, recovery_stream("t-recovered", recovered=True))
    send(page, "recover")
    wait_outcome(page, "answered")
    assert page.eval_on_selector_all(".tl-run", "els => els.map(e => e.textContent)") == [
        "Run 1",
        "Recovered run 2 (recovery 1)",
    ]
    cut = page.locator(".tl-row.tl-node[data-tl-node='generate']")
    assert cut.evaluate_all("els => els.map(e => e.dataset.tlState)") == ["cut", "ok"]
    segments = page.locator("[data-node='generate'] .lat-seg")
    assert segments.evaluate_all("els => els.map(e => e.dataset.instanceState)") == ["cut", "ok"]
    assert page.get_attribute("[data-node='prepare']", "data-state") == "ok"
    assert page.get_attribute("[data-node='generate']", "data-state") == "ok"
    assert "another server took it up again from its last checkpoint" in page.inner_text(
        ".msg-info"
    )
    assert page.locator(".msg-agent .msg-body").last.inner_text() == "Done after all."


def test_a_turn_ended_because_a_tool_was_running_shows_its_message(page):
    open_app(page)
    serve(page, recovery_stream("t-tool-interrupted", recovered=False))
    send(page, "end")
    wait_outcome(page, "error")
    assert page.get_attribute("[data-node='generate']", "data-state") == "cut"
    assert page.get_attribute("[data-node='prepare']", "data-state") == "ok"
    assert page.locator(".msg-error .msg-body").last.inner_text() == TOOL_INTERRUPTED
