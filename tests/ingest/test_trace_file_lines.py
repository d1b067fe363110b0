"""A JSON-lines trace file whose strings hold U+2028, U+2029 and U+0085 unescaped (as
JSON writers leave them, the relay's own included; ``str.splitlines()`` splits on them)
reads whole: lines end at a line feed only (relay/ingest/tracefile.py).

The file is what a team gets from the relay itself: ``span-relay serve`` runs a turn whose
message holds those characters (and the control characters ``\\x0b \\x0c \\x1c-\\x1e``,
which JSON must escape), its spans leave through the SDK's real OTLP exporter to a
collector stand-in (tests/store/fixtures/make_fixtures.py's sink), which writes them as
the Collector's file exporter does: one OTLP/JSON request a line, UTF-8, unescaped. That
file goes through ``POST /imports`` and ``span-relay replay FILE``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.ingest.tracefile import OTLP_JSON, parse_trace_file
from tests.store.fixtures.make_fixtures import Sink, to_otlp_json
from tests.store.support import REPO, RelayProcess, events, parse_frames, post_sse

pytestmark = pytest.mark.xdist_group("trace-file-lines")

#: the characters ``str.splitlines()`` splits on besides line feed and carriage return
SEPARATORS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
MESSAGE = "How do refunds work?" + "".join(f" {c}line" for c in SEPARATORS)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The relay's own spans of one turn with :data:`MESSAGE`, as a JSON-lines file; and
    the turn's id."""
    sink = Sink()
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    root = tmp_path_factory.mktemp("lines")
    server = RelayProcess(
        root / "exporter",
        {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        },
    ).start()
    try:
        first = post_sse(f"{server.url}/chat", {"message": MESSAGE})
        turn_id = first[0]["turn_id"]
    finally:
        server.stop()  # flushes the OTLP exporter
        sink.shutdown()
    path = root / "turn.otlp.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for line in _lines([to_otlp_json(request) for request in sink.requests]):
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    yield path, turn_id


def _lines(requests: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One request a span (the collector's batches vary; a file of one line would be read
    as one document, never split)."""
    for request in requests:
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    yield {"resourceSpans": [{**rs, "scopeSpans": [{**ss, "spans": [span]}]}]}


def test_the_file_holds_the_characters_unescaped(exported: tuple[Path, str]) -> None:
    """The case is real: the file's strings hold them raw, so splitlines() would cut them."""
    text = exported[0].read_text(encoding="utf-8")
    for c in "\x85\u2028\u2029":
        assert c in text
    lines = text.rstrip("\n").split("\n")
    assert len(lines) > 1 and len(text.splitlines()) > len(lines)


def test_the_parser_reads_it_whole(exported: tuple[Path, str]) -> None:
    path, turn_id = exported
    fmt, records = parse_trace_file(path.read_bytes())
    assert fmt == OTLP_JSON
    roots = [r for r in records if r.attributes.get("relay.turn.id") == turn_id]
    assert any(r.attributes.get("relay.turn.message") == MESSAGE for r in roots)


def test_imports_take_it_and_keep_the_message(exported: tuple[Path, str], tmp_path: Path) -> None:
    path, turn_id = exported
    importer = RelayProcess(tmp_path / "importer", {}).start()
    try:
        r = httpx.post(
            f"{importer.url}/imports",
            content=path.read_bytes(),
            headers={"Content-Type": "application/x-ndjson"},
        )
        assert r.status_code == 201, r.text
        assert [t["turn_id"] for t in r.json()["turns"]] == [turn_id]
        assert httpx.get(f"{importer.url}/turns/{turn_id}").json()["message"] == MESSAGE
        with httpx.stream(
            "GET",
            f"{importer.url}/turns/{turn_id}/events",
            params={"source": "spans", "speed": 0},
            headers={"Accept": "text/event-stream"},
        ) as stream:
            replayed = events(list(parse_frames(stream.iter_text())))
    finally:
        importer.stop()
    assert {e["turn_id"] for e in replayed} == {turn_id}
    assert "turn_completed" in [e["type"] for e in replayed]


def test_replay_prints_it(exported: tuple[Path, str]) -> None:
    path, turn_id = exported
    out = subprocess.run(
        [sys.executable, "-m", "relay.cli", "replay", "--ndjson", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    replayed = [json.loads(line) for line in out.stdout.split("\n") if line]
    assert {e["turn_id"] for e in replayed} == {turn_id}
    assert "turn_completed" in [e["type"] for e in replayed]
