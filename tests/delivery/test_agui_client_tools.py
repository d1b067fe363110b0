"""relay.agui for client-executed tools: a run paused only on client tools ends as AG-UI's
frontend tool calls (``pendingToolCallIds``, the call without a result); paused on a client
tool and something else, it is an interrupt naming the call; the turn's later runs leave the
answered call out. Checked against the ``ag-ui-protocol`` models and the client's rules."""

from __future__ import annotations

import json
from typing import Any

from relay.events import Event
from tests.delivery.agui_checks import check_stream
from tests.delivery.test_agui import TRACE, TRACE2, answered, ev, node, topology, translate

CALL = {
    "type": "client_tool",
    "name": "local_time",
    "arguments": {"tz": "local"},
    "call_id": "call_t",
    "token": "tok",
    "round": 1,
}
APPROVAL = {"type": "approval", "tool": "issue_refund", "args": {"order_id": "1"}}


def client_run(trace: str = TRACE, interrupts: list[dict[str, Any]] | None = None) -> list[Event]:
    return [
        topology(trace),
        node("started", "tools", "n1", trace),
        ev(
            "tool_started",
            trace=trace,
            tool="local_time",
            span_id="t1",
            node="tools",
            call_id="call_t",
            client=True,
            args={"tz": "local"},
        ),
        ev(
            "tool_completed",
            trace=trace,
            tool="local_time",
            span_id="t1",
            node="tools",
            call_id="call_t",
            duration_ms=0.5,
            status="paused",
        ),
        node("completed", "tools", "n1", trace, status="paused"),
        ev("paused", trace=trace, interrupts=interrupts or [{"id": "i1", "value": CALL}]),
    ]


def test_a_run_paused_on_client_tools_leaves_frontend_tool_calls() -> None:
    out = translate(client_run())
    check_stream(out)
    types = [e["type"] for e in out]
    assert "TOOL_CALL_RESULT" not in types
    args = next(e for e in out if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args["delta"]) == {"tz": "local"}
    assert out[-1]["type"] == "RUN_FINISHED"
    assert out[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["call_t"]}


def test_a_client_tool_beside_an_approval_is_an_interrupt_naming_the_call() -> None:
    out = translate(
        client_run(interrupts=[{"id": "i1", "value": CALL}, {"id": "i2", "value": APPROVAL}])
    )
    check_stream(out)
    outcome = out[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    tool = next(i for i in outcome["interrupts"] if i["id"] == "i1")
    assert tool["reason"] == "client_tool" and tool["toolCallId"] == "call_t"
    assert "TOOL_CALL_RESULT" not in [e["type"] for e in out]


def test_the_later_runs_of_the_turn_leave_the_answered_call_out() -> None:
    resumed = [
        topology(TRACE2, "resume"),
        node("started", "tools", "n2", TRACE2),
        ev(
            "tool_started",
            trace=TRACE2,
            tool="local_time",
            span_id="t2",
            node="tools",
            call_id="call_t",
            client=True,
            args={},
        ),
        ev(
            "tool_completed",
            trace=TRACE2,
            tool="local_time",
            span_id="t2",
            node="tools",
            call_id="call_t",
            duration_ms=0.5,
            status="ok",
        ),
        node("completed", "tools", "n2", TRACE2),
        answered("Noon.", TRACE2),
    ]
    whole = translate([*client_run(), *resumed])  # a turn's stream: both runs
    runs = check_stream(whole)
    assert len(runs) == 2
    assert not [e for e in runs[1] if e["type"].startswith("TOOL_CALL")]
    alone = translate(resumed, interrupts=[{"id": "i1", "value": CALL}])  # POST /agui's
    check_stream(alone)
    assert not [e for e in alone if e["type"].startswith("TOOL_CALL")]
