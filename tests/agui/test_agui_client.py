"""The real AG-UI client against the real server: ``@ag-ui/client`` 1.0's HttpAgent
(tests/agui/client/demo.mjs, Node.js 20) runs the demo script through ``POST /agui``.

The client validates every event (zod schemas of the 1.0 spec), strips fields it does not
know and drops events it does not know, each with a ``console.warn``; the script turns any
warning or error into a non-zero exit, so this test fails on the first deviation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agui.conftest import check_stream, run_client
from tests.conftest import LiveServer

pytestmark = pytest.mark.slow


def _run(agui_client: Path, server: LiveServer, tmp_path: Path, *flows: str) -> dict:
    result, report = run_client(agui_client, server.url, *flows, out=tmp_path / "report.json")
    transcript = result.stdout + result.stderr
    print(transcript)
    assert result.returncode == 0, f"the AG-UI client reported problems:\n{transcript}"
    assert not report["problems"], report["problems"]
    assert set(report["flows"]) == set(flows)
    for flow in report["flows"].values():  # what the client delivered is valid AG-UI too
        check_stream([e for run in flow["runs"] for e in run["events"]])
    return report["flows"]


def test_demo_script_through_the_real_client(agui_client: Path,
                                             make_server: Callable[..., LiveServer],
                                             tmp_path: Path) -> None:
    server = make_server()
    flows = _run(agui_client, server, tmp_path,
                 "normal", "refusal", "approve", "reject", "fault", "retry")

    normal = flows["normal"]["runs"][0]
    assert normal["outcome"] == "success"
    assert normal["result"]["status"] == "answered"
    assert normal["result"]["citations"], "the ChatResponse is the RUN_FINISHED result"
    last = normal["texts"][-1]
    assert last["deltas"] > 1 and last["text"] == normal["result"]["answer"]

    refusal = flows["refusal"]["runs"][0]
    assert refusal["result"]["status"] == "refused"
    assert refusal["texts"][-1]["text"] == refusal["result"]["answer"]

    for flow, expected in (("approve", "Done: I refunded $20.00"),
                           ("reject", "I did not issue the refund")):
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


def test_text_arrives_in_several_deltas_over_time(agui_client: Path,
                                                  make_server: Callable[..., LiveServer],
                                                  tmp_path: Path) -> None:
    """With the offline model's pacing on, the answer's deltas reach the client spread over
    time (streamed), not in one burst at the end."""
    server = make_server(RELAY_OFFLINE_WORD_DELAY_S="0.01")
    run = _run(agui_client, server, tmp_path, "normal")["normal"]["runs"][0]
    times = [t for t, e in zip(run["times"], run["events"], strict=True)
             if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert len(times) > 10
    assert times[-1] - times[0] >= 100, f"the deltas arrived within {times[-1] - times[0]} ms"
