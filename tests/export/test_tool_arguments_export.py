"""A tool's arguments go out over OTLP on its span (``gen_ai.tool.call.arguments``) as
content: ``RELAY_CAPTURE_CONTENT=false`` strips them from the export, never from the
relay's own events (a graph written for this test, on a real uvicorn, to an in-test
OTLP/gRPC collector)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from relay import GraphAgent, Relay
from tests.conftest import LiveServer, events_of, stream_post
from tests.export.test_otlp_export import attrs, start_collector
from tests.zoo.test_failures import ARGS, tools_agent


@pytest.mark.parametrize("capture", ["true", "false"])
def test_tool_arguments_are_exported_as_content(tmp_path: Path, capture: str) -> None:
    grpc_server, collector, port = start_collector()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        RELAY_DATA_DIR=str(tmp_path / "data"),
        RELAY_CAPTURE_CONTENT=capture,
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_INSECURE="true",
        OTEL_BSP_SCHEDULE_DELAY="50",
    )
    relay = Relay.from_env(env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(tools_agent(), name="tools"))
    server = LiveServer(app).start()
    try:
        with httpx.Client(timeout=30) as client:
            events = events_of(
                stream_post(client, f"{server.url}/chat", {"message": "Convert 20.5 to EUR."})
            )
        [started] = [e for e in events if e["type"] == "tool_started"]
        assert started["args"] == ARGS  # the relay keeps the content either way
        # root, 3 nodes (agent, tools, agent), 2 model calls, 1 tool
        spans = collector.wait_for(7)
        [tool] = [s for s in spans if s.name == "execute_tool convert"]
        exported = attrs(tool)
        assert exported["gen_ai.tool.call.id"].string_value == started["call_id"]
        if capture == "true":
            assert json.loads(exported["gen_ai.tool.call.arguments"].string_value) == ARGS
        else:
            assert "gen_ai.tool.call.arguments" not in exported
    finally:
        server.stop()
        grpc_server.stop(0)
