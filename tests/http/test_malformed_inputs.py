"""Malformed inputs answer 4xx in the error envelope, never 500, on a real uvicorn: JSON
nested 10,000 levels deep on every route that reads a JSON body (the OTLP receiver in its
own google.rpc.Status body), and event ids that are not plain ASCII digits or are too
long, in ``Last-Event-ID`` and in ``?after=``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from span_relay_demo.app import create_app
from tests.conftest import LiveServer

DEEP = b"[" * 10_000 + b"]" * 10_000
#: the deep value inside an object, as each route's body is one
BODY = b'{"message": ' + DEEP + b', "thread_id": "t", "turn_id": "u", "resume": 1}'


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data: Path = tmp_path_factory.mktemp("malformed")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        {
            "RELAY_DATA_DIR": str(data),
            "OTEL_TRACES_EXPORTER": "none",
            "RELAY_OFFLINE_WORD_DELAY_S": "0",
            "RELAY_OTLP_HTTP": "1",
        }
    )
    server = LiveServer(create_app(env)).start()
    yield server
    server.stop()


@pytest.mark.parametrize("path", ["/chat", "/chat/resume", "/agui", "/imports"])
def test_deep_json_body_is_400(live: LiveServer, path: str) -> None:
    r = httpx.post(
        live.url + path, content=BODY, headers={"content-type": "application/json"}, timeout=30
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "json_too_deep"
    assert "128 levels" in r.json()["error"]["message"]


def test_deep_otlp_json_is_400_in_status_body(live: LiveServer) -> None:
    r = httpx.post(
        live.url + "/v1/traces",
        content=b'{"resourceSpans": ' + DEEP + b"}",
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 400, r.text
    assert r.json()["code"] == 3  # google.rpc.Status INVALID_ARGUMENT
    assert "nests deeper than 128 levels" in r.json()["message"]


def test_deep_json_in_attribute_value_is_400(live: LiveServer) -> None:
    """A deep AnyValue spelled in JSON (arrays in arrays): the body's own depth."""
    value = b'{"stringValue": "x"}'
    for _ in range(2_000):
        value = b'{"arrayValue": {"values": [' + value + b"]}}"
    body = (
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "'
        + b"1" * 32
        + b'", "spanId": "'
        + b"2" * 16
        + b'", "name": "x", "startTimeUnixNano": "1", "attributes": [{"key": "k", "value": '
        + value
        + b"}]}]}]}]}"
    )
    r = httpx.post(
        live.url + "/v1/traces",
        content=body,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 400, r.text


def test_deep_trace_file_lines_are_400(live: LiveServer) -> None:
    r = httpx.post(
        live.url + "/imports",
        content=b'{"resourceSpans": []}\n{"resourceSpans": ' + DEEP + b"}\n",
        headers={"content-type": "application/x-ndjson"},
        timeout=30,
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "json_too_deep"


ODD_IDS = [
    "²",  # str.isdigit() says yes, int() says no
    "¹¹",
    "٣",  # an Arabic-Indic digit: int() takes it, an event id it is not
    "9" * 5_000,  # past int()'s 4,300 digits
    "1" * 19,  # past 18 digits
    "-1",
    "+1",
    "1_0",
    "0x10",
    "",
]


@pytest.mark.parametrize("value", ODD_IDS, ids=range(len(ODD_IDS)))
def test_odd_last_event_id_is_400(live: LiveServer, value: str) -> None:
    r = httpx.get(
        live.url + "/turns/any-turn/events",
        headers={"last-event-id": value.encode("utf-8")},
        timeout=30,
    )
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_cursor"
    assert "Last-Event-ID" in error["message"]


def test_last_event_id_latin1_superscript_is_400(live: LiveServer) -> None:
    """``²`` as one latin-1 byte (how a header's bytes reach Starlette): '²'.isdigit()."""
    r = httpx.get(
        live.url + "/turns/any-turn/events", headers={"last-event-id": b"\xb2"}, timeout=30
    )
    assert r.status_code == 400, r.text
    assert "Last-Event-ID" in r.json()["error"]["message"]


@pytest.mark.parametrize("value", ODD_IDS[:-1], ids=range(len(ODD_IDS) - 1))
def test_odd_after_is_4xx(live: LiveServer, value: str) -> None:
    r = httpx.get(live.url + "/turns/any-turn/events", params={"after": value}, timeout=30)
    assert r.status_code in (400, 422), r.text
    error = r.json()["error"]
    assert error["code"] in ("invalid_cursor", "invalid_request")
    assert "after" in error["message"]


def test_plain_event_id_is_read(live: LiveServer) -> None:
    """A plain id of 18 digits is a cursor: the unknown turn is what is wrong (404)."""
    r = httpx.get(
        live.url + "/turns/any-turn/events", headers={"last-event-id": "9" * 18}, timeout=30
    )
    assert r.status_code == 404, r.text
