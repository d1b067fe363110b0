"""A turn received over OTLP (``serve --relay-only``, RELAY_AUTH=jwt) whose run root names
its user in ``enduser.id`` is that user's: others get 404, as for any user's turn. The
receiver itself takes the collector's credential (RELAY_API_TOKEN), not a user's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from relay import conventions as c
from tests.auth.issuer import Issuer, bearer
from tests.conftest import LiveServer
from tests.interop.conftest import wait_until
from tests.interop.spans import provider_with

COLLECTOR = "collector-token-0123"


def test_a_received_turn_is_the_user_its_root_names(
    make_relay: Callable[..., LiveServer], tmp_path: Path
) -> None:
    issuer = Issuer()
    server = make_relay(
        **issuer.env(issuer.write_jwks(tmp_path / "jwks.json")), RELAY_API_TOKEN=COLLECTOR
    )
    alice = bearer(issuer.token("alice"))
    bob = bearer(issuer.token("bob"))
    # a user's token is not the receiver's credential
    refused = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", headers=alice)
    provider = provider_with(
        OTLPSpanExporter(
            endpoint=f"{server.url}/v1/traces", headers={"authorization": f"Bearer {COLLECTOR}"}
        )
    )
    tracer = provider.get_tracer("another-process")
    with tracer.start_as_current_span(
        "invoke_agent helper",
        attributes={
            c.OPERATION: c.OP_INVOKE_AGENT,
            c.AGENT_NAME: "helper",
            c.CONVERSATION_ID: "ext-thread-1",
            c.ENDUSER_ID: "alice",
        },
    ) as root:
        with tracer.start_as_current_span(
            "execute_tool lookup",
            attributes={c.OPERATION: c.OP_TOOL, c.TOOL_NAME: "lookup", c.TOOL_CALL_ID: "call-1"},
        ):
            pass
    turn_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    with httpx.Client(timeout=30) as client:
        record = wait_until(
            lambda: (
                (r := client.get(f"{server.url}/turns/{turn_id}", headers=alice)).status_code == 200
                and r.json()["status"] != "running"
                and r.json()
            ),
            what="the received turn's record",
        )
        assert record["turn_id"] == turn_id
        for path in (
            f"/turns/{turn_id}",
            f"/turns/{turn_id}/events",
            f"/turns/{turn_id}/events?source=spans",
        ):
            assert client.get(f"{server.url}{path}", headers=bob).status_code == 404, path
        assert turn_id not in {
            t["turn_id"] for t in client.get(f"{server.url}/turns", headers=bob).json()["turns"]
        }
        assert turn_id in {
            t["turn_id"] for t in client.get(f"{server.url}/turns", headers=alice).json()["turns"]
        }
    from opentelemetry.sdk.trace.export import SpanExportResult

    assert refused.export([root]) == SpanExportResult.FAILURE  # type: ignore[list-item]
    refused.shutdown()
