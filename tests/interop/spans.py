"""Spans of a made-up graph, sent to the relay the way an external agent would."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from relay import conventions as c
from relay.langgraph.spans import child_span, run_span, traced_node

TOPOLOGY = {
    "nodes": [
        {"id": "__start__", "label": "__start__"},
        {"id": "plan", "label": "plan"},
        {"id": "act", "label": "act"},
        {"id": "__end__", "label": "__end__"},
    ],
    "edges": [
        {"source": "__start__", "target": "plan", "conditional": False},
        {"source": "plan", "target": "act", "conditional": False},
        {"source": "act", "target": "__end__", "conditional": False},
    ],
}


class Collecting(SpanExporter):
    """Keeps finished spans (to send them later, in any order, any number of times)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def provider_with(exporter: SpanExporter, service: str = "external-agent") -> TracerProvider:
    """Every span is exported the moment it ends (so start markers arrive at once)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def made_up_run(
    provider: TracerProvider,
    *,
    turn_id: str | None = None,
    thread_id: str = "ext-thread",
    markers: bool = True,
    while_running: Callable[[str], None] | None = None,
    fail_node: str | None = None,
) -> str:
    """One run of the made-up graph plan -> act (a model call, a tool call) through the
    span helpers a user copies (relay/langgraph/spans.py). Returns the turn id.

    ``while_running(node)`` is called inside each node, before its spans end (its start
    marker, if any, is exported by then): a test holds the node there until a reader has
    seen what it expects, instead of sleeping and measuring arrival times."""
    tracer = provider.get_tracer("external-agent")
    turn_id = turn_id or uuid.uuid4().hex

    def running(node: str) -> None:
        if while_running is not None:
            while_running(node)

    def plan(state: Any, config: Any) -> dict[str, Any]:
        with child_span(
            tracer, "chat tiny-model", c.OP_CHAT, {c.REQUEST_MODEL: "tiny-model"}
        ) as span:
            running("plan")
            span.set_attribute(c.INPUT_TOKENS, 11)
            span.set_attribute(c.OUTPUT_TOKENS, 4)
        if fail_node == "plan":
            raise RuntimeError("plan failed")
        return {}

    def act(state: Any, config: Any) -> dict[str, Any]:
        with child_span(
            tracer,
            "execute_tool lookup",
            c.OP_TOOL,
            {c.TOOL_NAME: "lookup", c.TOOL_CALL_ID: "call-1"},
        ):
            running("act")
        return {}

    response = {
        "thread_id": thread_id,
        "turn_id": turn_id,
        "trace_id": "",
        "status": "answered",
        "answer": "done",
        "citations": [],
        "interrupts": [],
        "nodes": [],
    }
    with run_span(
        tracer,
        agent="external",
        thread_id=thread_id,
        turn_id=turn_id,
        run_kind="chat",
        graph_id="made_up",
        topology=TOPOLOGY,
        message="hello",
        start_markers=markers,
    ) as run:
        try:
            for step, (name, fn) in enumerate((("plan", plan), ("act", act)), start=1):
                config = {
                    "metadata": {
                        "langgraph_step": step,
                        "langgraph_checkpoint_ns": f"{name}:task-{step}",
                    }
                }
                traced_node(tracer, name, fn, start_markers=markers)({}, config)
        except RuntimeError:
            run.finish(
                "error",
                **{
                    c.ERROR_CODE: "node_failed",
                    c.ERROR_NODE: fail_node,
                    c.ERROR_MESSAGE: "It failed.",
                },
            )
        else:
            run.finish("answered", **{c.TURN_RESPONSE: response})
    return turn_id


# -- OTLP payloads built by hand ---------------------------------------------------------------


def protobuf_body(spans: Sequence[ReadableSpan]) -> bytes:
    return encode_spans(list(spans)).SerializeToString()


def json_body(spans: Sequence[ReadableSpan], *, hex_ids: bool = True) -> bytes:
    """OTLP/JSON of SDK spans: the protobuf JSON mapping, ids turned to hex (the OTLP/JSON
    rule); ``hex_ids=False`` leaves them base64, as a wrong encoder would."""
    from google.protobuf.json_format import MessageToDict

    doc = MessageToDict(encode_spans(list(spans)))
    if hex_ids:
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64decode(span[key]).hex()
                    for link in span.get("links", []):
                        for key in ("traceId", "spanId"):
                            link[key] = base64.b64decode(link[key]).hex()
    return json.dumps(doc).encode()


def span_named(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span
