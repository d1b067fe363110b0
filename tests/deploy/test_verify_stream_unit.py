"""verify-stream's parsing and judging, on synthetic timings (no server needed)."""

from __future__ import annotations

import json
import random
import socket

import pytest

from relay.cli import verify
from relay.cli.verify.report import (
    EXIT_BUFFERED,
    EXIT_HTTP_ERROR,
    EXIT_INCONCLUSIVE,
    EXIT_INCREMENTAL,
    EXIT_NO_TERMINAL,
    StreamReport,
)
from relay.cli.verify.sse import Frame, SSEParser
from relay.cli.verify.verdict import judge

T0 = 1_760_000_000_000.0  # epoch ms

# (type, node, ms after the turn started): a turn whose generate node sleeps 500 ms.
TURN = [
    ("graph_topology", None, 0.0),
    ("node_started", "guardrail_pre", 0.4),
    ("node_completed", "guardrail_pre", 0.9),
    ("node_started", "retrieve_context", 1.0),
    ("node_completed", "retrieve_context", 4.0),
    ("node_started", "generate", 4.2),
    ("node_completed", "generate", 506.0),
    ("node_started", "guardrail_post", 506.3),
    ("node_completed", "guardrail_post", 507.0),
    ("turn_completed", None, 507.5),
]


def event(seq: int, type_: str, node: str | None, ts: float, arrival_s: float, **extra) -> Frame:
    payload = {"v": 1, "type": type_, "seq": seq, "ts": ts, "turn_id": "t1", **extra}
    if node:
        payload["node"] = node
    return Frame(
        kind="event",
        arrival_s=arrival_s,
        chunk=seq,
        type=type_,
        seq=seq,
        ts=ts,
        node=node,
        payload=payload,
    )


def streamed(lag_s: float = 0.002, jitter_s: float = 0.001, start_lag_s: float = 0.0):
    rng = random.Random(7)
    return [
        event(i + 1, t, n, T0 + ms, start_lag_s + lag_s + ms / 1000 + rng.uniform(0, jitter_s))
        for i, (t, n, ms) in enumerate(TURN)
    ]


def buffered(flush_at_s: float = 0.52):
    return [
        event(i + 1, t, n, T0 + ms, flush_at_s + i * 0.00001) for i, (t, n, ms) in enumerate(TURN)
    ]


def sse_bytes(frames: list[Frame]) -> bytes:
    out = [b"retry: 2000\n\n"]
    for f in frames:
        out.append(f"id: {f.seq}\nevent: {f.type}\ndata: {json.dumps(f.payload)}\n\n".encode())
        if f.type == "node_started" and f.node == "generate":
            out.append(b": hb\n\n")
    return b"".join(out)


# --------------------------------------------------------------------------- parser


def test_parser_frames_and_arrival_of_last_byte():
    data = sse_bytes(streamed())
    parser = SSEParser()
    frames = []
    # one byte at a time: each frame is stamped with the chunk that completed it
    for i in range(len(data)):
        frames += parser.feed(data[i : i + 1], arrival_s=i / 1000, chunk=i)
    kinds = [f.kind for f in frames]
    assert kinds[0] == "retry" and frames[0].text == "2000"
    assert kinds.count("heartbeat") == 1
    events = [f for f in frames if f.kind == "event"]
    assert [e.type for e in events] == [t for t, _, _ in TURN]
    assert [e.seq for e in events] == list(range(1, len(TURN) + 1))
    assert events[5].node == "generate" and events[5].ts == T0 + 4.2
    # an event is stamped with the byte that ends it (the blank line's LF); a comment
    # line with the LF that ends the line
    ends = [i for i in range(1, len(data)) if data[i - 1 : i + 1] == b"\n\n"]
    expected = [i - 1 if data[: i - 1].endswith(b": hb") else i for i in ends]
    assert [f.chunk for f in frames] == expected


def test_parser_crlf_multiline_data_and_split_utf8():
    fields = {"type": "turn_completed", "seq": 9, "ts": 5.0, "answer": "café ✓"}
    payload = json.dumps(fields, ensure_ascii=False)
    half = len(payload) // 2
    raw = (
        f"id: 9\r\nevent: turn_completed\r\n"
        f"data: {payload[:half]}\r\ndata: {payload[half:]}\r\n\r\n"
    )
    raw_bytes = raw.encode()
    cut = raw_bytes.index("é".encode()) + 1  # split inside the two-byte é
    parser = SSEParser()
    frames = parser.feed(raw_bytes[:cut], 0.1, 0) + parser.feed(raw_bytes[cut:], 0.2, 1)
    assert len(frames) == 1
    # two data lines join with LF, which here lands inside the JSON: not parseable
    assert frames[0].type == "turn_completed" and frames[0].seq == 9
    whole = SSEParser().feed(f"data: {payload}\r\n\r\n".encode(), 0.3, 0)
    assert whole[0].payload["answer"] == "café ✓" and whole[0].ts == 5.0


def test_parser_comment_kinds_and_bom():
    frames = SSEParser().feed("\ufeff: hb\n\n: proxy says hi\n\nretry: 2000\n\n".encode(), 0, 0)
    assert [f.kind for f in frames] == ["heartbeat", "comment", "retry"]


# --------------------------------------------------------------------------- judge


def test_streamed_turn_is_incremental():
    frames = streamed()
    j = judge(frames)
    assert j.delivery == "incremental", j.evidence
    assert j.max_hold_s < 0.01
    gap = j.largest_ts_gap
    assert (gap.from_type, gap.to_type) == ("node_started", "node_completed")
    # the gap as the frames say it: their own arrival times and stamps, nothing measured
    by_seq = {f.seq: f for f in frames}
    first = by_seq[gap.from_seq]
    then = by_seq[gap.to_seq]
    assert gap.arrival_gap_ms == pytest.approx((then.arrival_s - first.arrival_s) * 1000)
    assert gap.ts_gap_ms == pytest.approx(then.ts - first.ts)


def test_late_start_of_the_stream_is_not_buffering():
    # the first events reach the client 80 ms late (stream set-up), the rest on time
    frames = streamed()
    for f in frames[:3]:
        f.arrival_s = frames[3].arrival_s
    assert judge(frames).delivery == "incremental"


def test_bunched_turn_is_buffered():
    j = judge(buffered())
    assert j.delivery == "buffered", j.evidence
    assert j.max_hold_s == pytest.approx(0.5075, abs=0.002)
    assert j.held_event == {"seq": 1, "type": "graph_topology", "node": None}
    assert j.bursts == 1
    assert any("held back" in line for line in j.evidence)


def test_partial_buffering_is_buffered():
    # a proxy that flushes only when a buffer fills: the events before the slow node
    # wait for the ones after it
    frames = streamed()
    for f in frames[:6]:
        f.arrival_s = frames[6].arrival_s
    assert judge(frames).delivery == "buffered"


def test_fast_turn_is_inconclusive():
    fast = [event(i + 1, t, n, T0 + i * 0.5, 0.01 + i * 0.0005) for i, (t, n, _) in enumerate(TURN)]
    j = judge(fast)
    assert j.delivery == "inconclusive"
    assert any("too fast" in line for line in j.evidence)


def test_hold_threshold_scales_and_is_clamped():
    long_turn = [
        event(1, "graph_topology", None, T0, 0.0),
        event(2, "turn_completed", None, T0 + 30_000, 0.0),
    ]
    j = judge(long_turn)
    assert j.hold_threshold_s == verify.HOLD_MAX_S and j.delivery == "buffered"
    long_turn[1].arrival_s = 29.5  # half a second of hold on a 30 s turn: within threshold
    assert judge(long_turn).delivery == "incremental"


# --------------------------------------------------------------------------- report


def analyse(frames: list[Frame], **kw) -> StreamReport:
    report = StreamReport(url="http://x/chat", verdict="http_error", exit_code=EXIT_HTTP_ERROR)
    report.fault_header = kw.pop("fault_header", "generate=delay:0.5")
    return verify._analyse(report, frames, slow_node="generate", delay=0.5, min_spread_s=0.3)


def with_generate_duration(frames: list[Frame], ms: float) -> list[Frame]:
    for f in frames:
        if f.type == "node_completed" and f.node == "generate":
            f.payload["duration_ms"] = ms
    return frames


def test_report_incremental_with_honoured_fault():
    r = analyse(with_generate_duration(streamed(), 501.8))
    assert (r.verdict, r.exit_code) == ("incremental", EXIT_INCREMENTAL)
    assert r.fault_honoured is True and r.terminal == "turn_completed" and r.turn_id == "t1"
    assert any("honoured" in e for e in r.evidence)


def test_report_buffered_exit_code():
    r = analyse(with_generate_duration(buffered(), 501.8))
    assert (r.verdict, r.exit_code) == ("buffered", EXIT_BUFFERED)


def test_report_ignored_fault_falls_back_to_ts_spread():
    fast = [event(i + 1, t, n, T0 + i * 0.5, 0.01 + i * 0.0005) for i, (t, n, _) in enumerate(TURN)]
    r = analyse(with_generate_duration(fast, 0.5))
    assert r.fault_honoured is False
    assert any("RELAY_FAULTS=1" in e for e in r.evidence)
    assert (r.verdict, r.exit_code) == ("inconclusive", EXIT_INCONCLUSIVE)


def test_report_without_terminal_event():
    r = analyse(streamed()[:6])
    assert (r.verdict, r.exit_code) == ("no_terminal", EXIT_NO_TERMINAL)
    assert r.terminal is None


def test_exit_codes_are_distinct():
    codes = [EXIT_INCREMENTAL, EXIT_BUFFERED, EXIT_NO_TERMINAL, EXIT_HTTP_ERROR, EXIT_INCONCLUSIVE]
    assert len(set(codes)) == len(codes) and 2 not in codes  # 2 is argparse's usage error


def test_chat_url():
    assert verify.chat_url("http://h:1") == "http://h:1/chat"
    assert verify.chat_url("http://h:1/") == "http://h:1/chat"
    assert verify.chat_url("https://h/prefix/chat") == "https://h/prefix/chat"


def test_connection_refused_is_http_error(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        code = verify.main([f"http://127.0.0.1:{port}", "--json", "--timeout", "5"])
    report = json.loads(capsys.readouterr().out)
    assert code == EXIT_HTTP_ERROR and report["verdict"] == "http_error"
    assert report["error"]


def test_bad_header_is_usage_error(capsys):
    assert verify.main(["http://127.0.0.1:9", "--header", "no-colon"]) == 2
    assert "NAME:VALUE" in capsys.readouterr().err


def test_human_format_mentions_the_evidence():
    r = analyse(with_generate_duration(buffered(), 501.8))
    text = verify.format_report(r)
    assert "verdict:            buffered (exit 10)" in text
    assert "held back" in text and "node_completed generate" in text
