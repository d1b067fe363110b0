"""Trace files: OTLP JSON (Collector file exporter), Jaeger v2 API answers and Jaeger UI
JSON, made from our own agent's spans (fixtures/, see make_fixtures.py), replay to the
live events recorded with them: through the parser, ``span-relay replay FILE`` and
``POST /imports``. Bad files get a 4xx that names the problem, and nothing is stored."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from relay.cli.replay import replay_file
from relay.ingest.tracefile import JAEGER_UI, JAEGER_V2, OTLP_JSON, TraceFileError, parse_trace_file
from relay.mapping.feed import group_turns, replay_events
from tests.store.conftest import Launcher, fixture_file, recorded
from tests.store.support import (
    REPO,
    RelayProcess,
    assert_same,
    parse_frames,
    replayed_events,
)

FILES = [
    ("refund", "otlp.jsonl", OTLP_JSON),
    ("refund", "jaeger-v2.json", JAEGER_V2),
    ("refund", "jaeger-ui.json", JAEGER_UI),
    ("failed", "otlp.jsonl", OTLP_JSON),
    ("failed", "jaeger-v2.json", JAEGER_V2),
    ("failed", "jaeger-ui.json", JAEGER_UI),
]
# -- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(("turn", "suffix", "fmt"), FILES)
def test_fixture_files_replay_to_the_recorded_live_events(turn: str, suffix: str, fmt: str) -> None:
    found, records = parse_trace_file(fixture_file(f"{turn}.{suffix}").read_bytes())
    assert found == fmt
    (only,) = group_turns(records)
    live = recorded(turn)
    assert only.turn_id == live[0]["turn_id"] and only.thread_id == live[0]["thread_id"]
    assert only.trace_ids == list(dict.fromkeys(e["trace_id"] for e in live))
    assert_same([e.to_dict() for e in replay_events(only.spans)], live, fmt)


def test_formats_agree_on_kind_status_events_links_and_resource() -> None:
    def by_id(name: str) -> dict[str, Any]:
        return {r.span_id: r for r in parse_trace_file(fixture_file(name).read_bytes())[1]}

    otlp = by_id("failed.otlp.jsonl")
    v2 = by_id("failed.jaeger-v2.json")
    ui = by_id("failed.jaeger-ui.json")
    assert otlp == v2
    assert otlp.keys() == ui.keys()
    for span_id, a in otlp.items():
        b = ui[span_id]
        assert (a.parent_span_id, a.name, a.kind, a.status, a.status_message) == (
            b.parent_span_id,
            b.name,
            b.kind,
            b.status,
            b.status_message,
        )
        assert a.attributes == b.attributes and a.resource == b.resource
        assert [e["name"] for e in a.events] == [e["name"] for e in b.events]
        assert a.start_ns // 1000 * 1000 == b.start_ns
    errors = [r for r in otlp.values() if r.status == "error"]
    assert errors and any(e["name"] == "exception" for r in errors for e in r.events)
    resumed = [
        r
        for r in parse_trace_file(fixture_file("refund.jaeger-ui.json").read_bytes())[1]
        if r.links
    ]
    assert len(resumed) == 1 and resumed[0].parent_span_id is None


def test_ids_are_hex_not_base64() -> None:
    doc = json.loads(fixture_file("failed.otlp.jsonl").read_text().splitlines()[0])
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"] = base64.b64encode(bytes.fromhex(span["traceId"])).decode()
    with pytest.raises(TraceFileError, match="base64"):
        parse_trace_file(json.dumps(doc))


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", "empty_file"),
        (b"\xff\xfe not utf-8", "not_json"),
        (b"<html>not json</html>", "not_json"),
        (b'{"hello": "world"}', "unknown_format"),
        (b'{"error": {"code": 404, "message": "trace not found"}}', "unknown_format"),
        (b'{"resourceSpans": []}', "no_spans"),
        (b'{"data": [{"traceID": "1", "spans": [{"spanID": "2"}]}]}', "invalid_span"),
    ],
)
def test_bad_files_say_what_is_wrong(body: bytes, code: str) -> None:
    with pytest.raises(TraceFileError) as caught:
        parse_trace_file(body)
    assert caught.value.code == code


def test_a_truncated_file_is_named_truncated() -> None:
    for name in ("refund.jaeger-v2.json", "refund.jaeger-ui.json"):
        text = fixture_file(name).read_text()
        with pytest.raises(TraceFileError, match="truncated") as caught:
            parse_trace_file(text[: len(text) // 2])
        assert caught.value.code == "truncated_file"
    lines = fixture_file("refund.otlp.jsonl").read_text()
    with pytest.raises(TraceFileError, match="truncated"):
        parse_trace_file(lines[: len(lines) - 40])


# -- span-relay replay FILE ---------------------------------------------------------------


def test_cli_prints_the_turn_as_sse() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "relay.cli", "replay", str(fixture_file("refund.otlp.jsonl"))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    frames = list(parse_frames(iter([done.stdout])))
    assert [f.id for f in frames] == [str(i) for i in range(1, len(frames) + 1)]
    assert [f.event for f in frames] == [e["type"] for e in recorded("refund")]
    assert_same([f.data for f in frames if f.data], recorded("refund"))


def test_cli_ndjson_turn_selection_and_errors() -> None:
    out = io.StringIO()
    err = io.StringIO()
    path = str(fixture_file("failed.jaeger-ui.json"))
    live = recorded("failed")
    assert replay_file(path, ndjson=True, turn=live[0]["turn_id"], out=out, err=err) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert_same(lines, live, JAEGER_UI)
    assert replay_file(path, turn="nope", out=io.StringIO(), err=err) == 2
    assert "holds no turn nope" in err.getvalue()
    err = io.StringIO()
    assert replay_file(str(fixture_file("make_fixtures.py")), out=io.StringIO(), err=err) == 2
    assert "not JSON" in err.getvalue()


# -- POST /imports ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def importer(launcher: Launcher) -> RelayProcess:
    return launcher.start(RELAY_IMPORT_MAX_BYTES=str(64 * 1024))


@pytest.mark.parametrize(("turn", "suffix", "fmt"), FILES)
def test_imported_turn_replays_like_the_live_one(
    importer: RelayProcess, turn: str, suffix: str, fmt: str
) -> None:
    body = fixture_file(f"{turn}.{suffix}").read_bytes()
    r = httpx.post(
        f"{importer.url}/imports", content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 201, r.text
    answer = r.json()
    live = recorded(turn)
    assert answer["format"] == fmt and answer["ignored_spans"] == 0
    (summary,) = answer["turns"]
    assert summary["turn_id"] == live[0]["turn_id"]
    replayed = replayed_events(importer.url, summary["turn_id"], speed=0)
    assert_same(replayed, live, fmt)
    listed = httpx.get(f"{importer.url}/turns", params={"limit": 50}).json()["turns"]
    mine = next(t for t in listed if t["turn_id"] == summary["turn_id"])
    assert mine["thread_id"] == live[0]["thread_id"] and mine["message"]
    assert mine["status"] == ("answered" if turn == "refund" else "error")
    got = httpx.get(f"{importer.url}/turns/{summary['turn_id']}").json()
    assert got["response"]["status"] == mine["status"]


def _expect(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code
    return str(r.json()["error"]["message"])


JSON = {"Content-Type": "application/json"}


def test_imports_refuse_bad_files(importer: RelayProcess) -> None:
    url = f"{importer.url}/imports"
    message = _expect(httpx.post(url, content=b"not json at all", headers=JSON), 400, "not_json")
    assert "OTLP JSON" in message
    text = fixture_file("refund.jaeger-v2.json").read_text()
    _expect(httpx.post(url, content=text[:5000], headers=JSON), 400, "truncated_file")
    _expect(httpx.post(url, content=b'{"spans": []}', headers=JSON), 422, "unknown_format")
    _expect(httpx.post(url, content=b"", headers=JSON), 400, "empty_file")
    big = b" " * (64 * 1024 + 1)
    message = _expect(httpx.post(url, content=big, headers=JSON), 413, "import_too_large")
    assert "RELAY_IMPORT_MAX_BYTES" in message and str(64 * 1024) in message
    _expect(
        httpx.post(url, content=iter([big[:40_000], big[40_000:]]), headers=JSON),
        413,
        "import_too_large",
    )  # chunked: no Content-Length, cut while reading
    # a trace file is JSON and says so: a form (text/plain) or no type at all is a 415
    for headers in ({"Content-Type": "text/plain"}, {}):
        message = _expect(
            httpx.post(url, content=text, headers=headers), 415, "unsupported_media_type"
        )
        assert "application/json" in message

    def without(*keys: str) -> dict[str, Any]:
        doc = json.loads(fixture_file("failed.otlp.jsonl").read_text().splitlines()[0])
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["attributes"] = [
                        kv for kv in span.get("attributes", []) if not kv["key"].startswith(keys)
                    ]
        return doc

    # no span says it is a graph run: nothing to replay
    _expect(httpx.post(url, json=without("relay.", "gen_ai.")), 422, "no_turns")
    # without relay.turn.id its root is still a GenAI invoke_agent: a foreign turn,
    # keyed by its trace id
    r = httpx.post(url, json=without("relay.turn.id"))
    assert r.status_code == 201, r.text
    [turn] = r.json()["turns"]
    assert turn["turn_id"] == turn["trace_ids"][0]


def test_a_file_bad_halfway_imports_nothing(importer: RelayProcess) -> None:
    lines = fixture_file("refund.otlp.jsonl").read_text().splitlines()
    old_turn = recorded("refund")[0]["turn_id"]
    new_turn = "feedfacefeedfacefeedfacefeedface"
    good = [line.replace(old_turn, new_turn) for line in lines]
    bad = json.loads(good[-1])
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"][-1]["spanId"] = "not-hex"
    body = "\n".join([*good[:-1], json.dumps(bad)]) + "\n"
    ndjson = {"Content-Type": "application/x-ndjson"}
    message = _expect(
        httpx.post(f"{importer.url}/imports", content=body, headers=ndjson), 422, "invalid_span"
    )
    assert "spanId" in message and "not-hex" in message
    r = httpx.get(f"{importer.url}/turns/{new_turn}/events", params={"source": "spans"})
    assert r.status_code == 404
    r = httpx.post(f"{importer.url}/imports", content="\n".join(good), headers=ndjson)
    assert r.status_code == 201, r.text
    assert replayed_events(importer.url, new_turn)[-1]["type"] == "turn_completed"
