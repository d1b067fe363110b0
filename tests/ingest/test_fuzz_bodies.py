"""hypothesis over the bodies the relay reads that its OpenAPI document does not spell
out: OTLP/JSON and OTLP protobuf (``POST /v1/traces``) and trace files (``POST
/imports``), on a real uvicorn. Generated odd inputs (wrong types where OTLP has objects,
values nested deep, odd ids and numbers, cut or flipped protobuf bytes) answer 2xx or
4xx, never 5xx; the server stays up. Derandomized: the same examples on every run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from span_relay_demo.app import create_app
from tests.conftest import LiveServer

FUZZ = settings(
    max_examples=int(os.environ.get("SPAN_RELAY_FUZZ_EXAMPLES", "25")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data: Path = tmp_path_factory.mktemp("fuzz-bodies")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        {"RELAY_DATA_DIR": str(data), "OTEL_TRACES_EXPORTER": "none", "RELAY_OTLP_HTTP": "1"}
    )
    server = LiveServer(create_app(env)).start()
    yield server
    server.stop()


#: a value the body's text nests 5,000 levels deep in its place (past what ``json.dumps``
#: writes, and past Python's recursion limit when read)
DEEP = "__deep__"


def _text(doc: Any) -> bytes:
    return json.dumps(doc).replace(f'"{DEEP}"', "[" * 5_000 + "]" * 5_000).encode()


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["1" * 32, "0" * 32, "ab" * 8, "²", "1e400", "-1", "0x10", "{{", "[["]),
    st.just(DEEP),  # replaced in the body's text by JSON nested 5,000 levels deep
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
) | st.integers(min_value=100, max_value=800).map(_deep)

attribute = st.fixed_dictionaries(
    {
        "key": st.one_of(
            st.text(max_size=12),
            st.sampled_from(["relay.turn.id", "relay.graph.topology", "relay.turn.interrupts"]),
        ),
        "value": st.one_of(
            values,
            st.fixed_dictionaries(
                {"stringValue": st.one_of(st.text(max_size=20), values.map(json.dumps))}
            ),
            st.fixed_dictionaries({"intValue": values}),
            st.fixed_dictionaries({"arrayValue": st.fixed_dictionaries({"values": values})}),
            st.fixed_dictionaries({"kvlistValue": values}),
        ),
    }
)
span = st.fixed_dictionaries(
    {
        "traceId": st.one_of(st.just("1" * 32), values),
        "spanId": st.one_of(st.just("2" * 16), values),
        "name": values,
        "startTimeUnixNano": st.one_of(st.just("1700000000000000000"), values),
        "endTimeUnixNano": values,
        "attributes": st.one_of(st.lists(attribute, max_size=4), values),
        "status": values,
        "kind": values,
        "events": values,
        "links": values,
    }
)
otlp_docs = st.one_of(
    values,
    st.fixed_dictionaries(
        {
            "resourceSpans": st.one_of(
                values,
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "resource": values,
                            "scopeSpans": st.one_of(
                                values,
                                st.lists(
                                    st.fixed_dictionaries(
                                        {"spans": st.one_of(values, st.lists(span, max_size=3))}
                                    ),
                                    max_size=2,
                                ),
                            ),
                        }
                    ),
                    max_size=2,
                ),
            )
        }
    ),
)


def _no_5xx(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])


@FUZZ
@given(doc=otlp_docs)
def test_otlp_json_bodies(live: LiveServer, doc: Any) -> None:
    body = _text(doc)
    r = httpx.post(
        f"{live.url}/v1/traces",
        content=body,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    _no_5xx(r)


@FUZZ
@given(doc=otlp_docs, lines=st.booleans())
def test_trace_file_bodies(live: LiveServer, doc: Any, lines: bool) -> None:
    if lines:  # JSON lines: the document twice, one a line
        body = _text(doc) + b"\n" + _text(doc) + b"\n"
        media = "application/x-ndjson"
    else:
        body = _text(doc)
        media = "application/json"
    r = httpx.post(f"{live.url}/imports", content=body, headers={"content-type": media}, timeout=30)
    _no_5xx(r)


def _valid_protobuf() -> bytes:
    request = ExportTraceServiceRequest()
    span_pb = request.resource_spans.add().scope_spans.add().spans.add()
    span_pb.trace_id = b"\x01" * 16
    span_pb.span_id = b"\x02" * 8
    span_pb.name = "invoke_agent fuzz"
    span_pb.start_time_unix_nano = 1_700_000_000_000_000_000
    attribute = span_pb.attributes.add()
    attribute.key = "relay.graph.topology"
    attribute.value.string_value = "[" * 300 + "]" * 300
    return request.SerializeToString()


@FUZZ
@given(
    cut=st.integers(min_value=0, max_value=200),
    flips=st.lists(
        st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(0, 255)), max_size=6
    ),
    tail=st.binary(max_size=64),
)
def test_otlp_protobuf_bodies(
    live: LiveServer, cut: int, flips: list[tuple[int, int]], tail: bytes
) -> None:
    body = bytearray(_valid_protobuf())
    for at, byte in flips:
        body[at % len(body)] = byte
    data = bytes(body[: max(0, len(body) - cut)]) + tail
    r = httpx.post(
        f"{live.url}/v1/traces",
        content=data,
        headers={"content-type": "application/x-protobuf"},
        timeout=30,
    )
    _no_5xx(r)
