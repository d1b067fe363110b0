"""Received runs sent the way a collector sends them: through the real OTLP/HTTP exporter
with the receiver's credential (RELAY_API_TOKEN), on a thread and for a user the test
chooses, at a time it chooses. Shared by tests/auth/test_received_takeover.py and
tests/replicas/test_received_takeover.py."""

from __future__ import annotations

from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from relay import conventions as c
from tests.conftest import LiveServer
from tests.interop.conftest import wait_until
from tests.interop.spans import provider_with

COLLECTOR = "collector-token-0123"
DAY_NS = 86_400 * 10**9
SECRET = "the sender's words, never logged"


def send_run(
    server: LiveServer,
    thread_id: str,
    user: str | None,
    start_ns: int,
    turn_id: str | None = None,
) -> str:
    """One run (a root and a tool span) on ``thread_id`` through the real OTLP exporter,
    with the collector's credential; its trace id, which is its turn id unless
    ``turn_id`` names one (in ``relay.turn.id``, as our instrumentation's roots do)."""
    provider = provider_with(
        OTLPSpanExporter(
            endpoint=f"{server.url}/v1/traces", headers={"authorization": f"Bearer {COLLECTOR}"}
        )
    )
    tracer = provider.get_tracer("another-process")
    attributes: dict[str, Any] = {
        c.OPERATION: c.OP_INVOKE_AGENT,
        c.AGENT_NAME: "helper",
        c.CONVERSATION_ID: thread_id,
        "gen_ai.input.messages": SECRET,
    }
    if user is not None:
        attributes[c.ENDUSER_ID] = user
    if turn_id is not None:
        attributes.update({c.TURN_ID: turn_id, c.RUN_KIND: "chat", c.GRAPH_ID: "helper"})
    root = tracer.start_span("invoke_agent helper", attributes=attributes, start_time=start_ns)
    with trace.use_span(root, end_on_exit=False):
        tool = tracer.start_span(
            "execute_tool lookup",
            attributes={c.OPERATION: c.OP_TOOL, c.TOOL_NAME: "lookup", c.TOOL_CALL_ID: "call-1"},
            start_time=start_ns + 1000,
        )
        tool.end(end_time=start_ns + 2000)
    root.end(end_time=start_ns + 3000)
    provider.shutdown()
    return format(root.get_span_context().trace_id, "032x")


def settled(client: httpx.Client, server: LiveServer, turn_id: str, headers: dict[str, str]) -> Any:
    return wait_until(
        lambda: (
            (r := client.get(f"{server.url}/turns/{turn_id}", headers=headers)).status_code == 200
            and r.json()["status"] != "running"
            and r.json()
        ),
        what=f"the received turn {turn_id}'s record",
    )
