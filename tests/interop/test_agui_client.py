"""The real AG-UI client against the real server: ``@ag-ui/client`` 1.0's HttpAgent
(tests/interop/agui/demo.mjs, Node.js 20) runs the demo script through ``POST /agui``.

The client validates every event (zod schemas of the 1.0 spec), strips fields it does not
know and drops events it does not know, each with a ``console.warn``; the script turns any
warning or error into a non-zero exit, so this test fails on the first deviation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import LiveServer, ModelGate
from tests.delivery.agui_checks import check_stream
from tests.interop.agui_client import run_client

pytestmark = pytest.mark.slow


def _run(
    agui_client: Path,
    server: LiveServer,
    tmp_path: Path,
    *flows: str,
    on_delta: Callable[[], None] | None = None,
) -> dict:
    result, report = run_client(
        agui_client, server.url, *flows, out=tmp_path / "report.json", on_delta=on_delta
    )
    transcript = result.stdout + result.stderr
    print(transcript)
    assert result.returncode == 0, f"the AG-UI client reported problems:\n{transcript}"
    assert not report["problems"], report["problems"]
    assert set(report["flows"]) == set(flows)
    for flow in report["flows"].values():  # what the client delivered is valid AG-UI too
        check_stream([e for run in flow["runs"] for e in run["events"]])
    return report["flows"]


def test_demo_script_through_the_real_client(
    agui_client: Path, make_server: Callable[..., LiveServer], tmp_path: Path
) -> None:
    server = make_server()
    flows = _run(
        agui_client, server, tmp_path, "normal", "refusal", "approve", "reject", "fault", "retry"
    )

    normal = flows["normal"]["runs"][0]
    assert normal["outcome"] == "success"
    assert normal["result"]["status"] == "answered"
    assert normal["result"]["citations"], "the ChatResponse is the RUN_FINISHED result"
    last = normal["texts"][-1]
    assert last["deltas"] > 1 and last["text"] == normal["result"]["answer"]

    refusal = flows["refusal"]["runs"][0]
    assert refusal["result"]["status"] == "refused"
    assert refusal["texts"][-1]["text"] == refusal["result"]["answer"]

    for flow, expected in (
        ("approve", "Done: I refunded $20.00"),
        ("reject", "I did not issue the refund"),
    ):
        paused, resumed = flows[flow]["runs"]
        assert paused["outcome"] == "interrupt"
        finished = paused["events"][-1]
        interrupt = finished["outcome"]["interrupts"][0]
        assert interrupt["reason"] == "approval"
        assert interrupt["metadata"]["value"]["args"] == {"order_id": "1234", "amount": 20.0}
        assert resumed["outcome"] == "success"
        assert resumed["result"]["answer"].startswith(expected)
        # the same thread: the resume continues the paused run's turn
        assert resumed["result"]["thread_id"] == paused["events"][0]["threadId"]
        assert resumed["events"][0]["runId"] != paused["events"][0]["runId"]

    fault = flows["fault"]["runs"][0]
    assert fault["events"][-1]["type"] == "RUN_ERROR"
    assert fault["events"][-1]["code"] == "node_failed"

    first, again = flows["retry"]["runs"]
    assert first["result"] == again["result"]


def test_a_frontend_tool_through_the_real_client(
    agui_client: Path, make_server: Callable[..., LiveServer], tmp_path: Path
) -> None:
    """A frontend tool (``RunAgentInput.tools``) that the demo graph calls as a client
    tool: the run ends with the call pending (``pendingToolCallIds``, no result), the
    real client's next run carries the tool message, and the turn answers with it."""
    server = make_server()
    asked, answered = _run(agui_client, server, tmp_path, "frontend_tool")["frontend_tool"]["runs"]
    finished = asked["events"][-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"] == {"type": "success", "pendingToolCallIds": ["call_local_time"]}
    start = next(e for e in asked["events"] if e["type"] == "TOOL_CALL_START")
    assert (start["toolCallId"], start["toolCallName"]) == ("call_local_time", "local_time")
    assert answered["result"]["status"] == "answered"
    assert (
        answered["result"]["turn_id"] == asked["events"][0]["runId"]
        or answered["result"]["thread_id"] == asked["events"][0]["threadId"]
    )


def test_text_arrives_in_several_deltas_over_time(
    agui_client: Path, make_server: Callable[..., LiveServer], tmp_path: Path, model_gate: ModelGate
) -> None:
    """The answer's deltas reach the client as they are written (streamed), not in one
    burst at the end: the model writes word k+1 only once the real client has delivered
    word k's TEXT_MESSAGE_CONTENT. A stream held back anywhere on the way would leave the
    model waiting at the gate (the turn then ends cut short). No arrival times compared."""
    server = make_server()
    model_gate.allow()  # the first word; each delivered delta lets the next one go
    run = _run(agui_client, server, tmp_path, "normal", on_delta=model_gate.allow)["normal"][
        "runs"
    ][0]
    assert not model_gate.timed_out, "a delta did not reach the client while it was written"
    deltas = [e for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert len(deltas) > 10
    assert "".join(e["delta"] for e in deltas) == run["result"]["answer"]
