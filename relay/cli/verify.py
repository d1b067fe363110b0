"""verify-stream: check that a deployed relay streams a turn incrementally.

Usage (wired in as ``span-relay verify-stream``; also ``python -m relay.verify``)::

    span-relay verify-stream URL [--message M] [--token T] [--json] [--timeout S]
                             [--slow-node NODE] [--delay S] [--no-slow-node]

It POSTs ``URL/chat`` with ``Accept: text/event-stream``, stamps the arrival of every SSE
frame with a monotonic clock as the bytes come off the socket, and compares the arrival
gaps with the gaps between the events' own ``ts`` (epoch ms of the span time that
produced each event). A path that streams delivers each event about when its span
happened; a buffering proxy (nginx with ``proxy_buffering``, a compressing CDN, ...)
holds the early events back and delivers them in a bunch at the end.

The key number is the *hold*: for two events ``i`` before ``j`` in arrival order,
``hold(i, j) = (ts_j - ts_i) - (arrival_j - arrival_i)``, how much sooner ``j`` came after
``i`` than its span time says it should. Streaming keeps every hold near zero (network
jitter); buffering makes the hold as large as the span-time gap it swallowed.

A fast turn (a few ms from first to last event) cannot show buffering, so by default the
tool asks the server to slow one node down: it sends ``X-Relay-Fault: generate=delay:0.5``
(``--slow-node``/``--delay``), which the server honours only when it runs with
``RELAY_FAULTS=1``. When the server ignores the header the tool says so and judges by
the turn's own ``ts`` spread; if that is too small to tell, the verdict is
``inconclusive``.

Exit codes: 0 incremental, 10 buffered, 11 no terminal event (stream cut, timed out or
closed early), 12 HTTP error (connection failed, non-2xx status, not an event stream),
13 inconclusive (turn too fast to judge), 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import itertools
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

EXIT_INCREMENTAL = 0
EXIT_BUFFERED = 10
EXIT_NO_TERMINAL = 11
EXIT_HTTP_ERROR = 12
EXIT_INCONCLUSIVE = 13

EXIT_CODES = {
    "incremental": EXIT_INCREMENTAL,
    "buffered": EXIT_BUFFERED,
    "no_terminal": EXIT_NO_TERMINAL,
    "http_error": EXIT_HTTP_ERROR,
    "inconclusive": EXIT_INCONCLUSIVE,
}

TERMINAL_TYPES = frozenset({"turn_completed", "paused", "error"})

DEFAULT_MESSAGE = "How do refunds work?"
DEFAULT_SLOW_NODE = "generate"
DEFAULT_DELAY_S = 0.5
DEFAULT_TIMEOUT_S = 60.0
# Below this spread of the events' own ts, buffering cannot be told from streaming.
DEFAULT_MIN_SPREAD_S = 0.3
# A hold counts as buffering when it reaches half the ts spread, clamped to these bounds.
HOLD_FRACTION = 0.5
HOLD_MIN_S = 0.15
HOLD_MAX_S = 1.0
# Frames arriving within this window of each other count as one burst (evidence only).
BURST_WINDOW_S = 0.01

# Response headers worth showing when a stream misbehaves.
INTERESTING_HEADERS = (
    "content-type",
    "cache-control",
    "x-accel-buffering",
    "content-encoding",
    "transfer-encoding",
    "content-length",
    "server",
    "via",
    "cf-ray",
    "x-cloud-trace-context",
)


@dataclass
class Frame:
    """One SSE frame (or comment line) and when its last byte arrived."""

    kind: str  # "event", "heartbeat", "comment", "retry"
    arrival_s: float  # seconds since the request was sent
    chunk: int  # index of the body chunk that completed it
    type: str | None = None
    seq: int | None = None
    ts: float | None = None  # the event's own ts, epoch ms
    node: str | None = None
    text: str | None = None  # comment text, retry value, or undecodable data
    payload: dict[str, Any] | None = field(default=None, repr=False)  # the event's JSON


@dataclass
class Gap:
    """Between one event and the next in arrival order."""

    from_seq: int | None
    to_seq: int | None
    from_type: str | None
    to_type: str | None
    ts_gap_ms: float
    arrival_gap_ms: float


@dataclass
class Judgement:
    delivery: str  # "incremental", "buffered", "inconclusive"
    ts_spread_s: float | None
    arrival_spread_s: float | None
    max_hold_s: float | None
    hold_threshold_s: float | None
    held_event: dict[str, Any] | None  # the event that was held longest
    largest_ts_gap: Gap | None
    bursts: int
    gaps: list[Gap]
    evidence: list[str]


@dataclass
class StreamReport:
    url: str
    verdict: str  # "incremental", "buffered", "no_terminal", "http_error", "inconclusive"
    exit_code: int
    evidence: list[str] = field(default_factory=list)
    status_code: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    time_to_headers_s: float | None = None
    time_to_first_byte_s: float | None = None
    time_to_first_event_s: float | None = None
    duration_s: float | None = None
    body_chunks: int = 0
    body_bytes: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    heartbeats: int = 0
    heartbeat_arrivals_s: list[float] = field(default_factory=list)
    retry_frame_first: bool = False
    terminal: str | None = None
    turn_id: str | None = None
    thread_id: str | None = None
    trace_id: str | None = None
    fault_header: str | None = None
    fault_honoured: bool | None = None
    slow_node_duration_ms: float | None = None
    delivery: str | None = None
    ts_spread_s: float | None = None
    arrival_spread_s: float | None = None
    max_hold_s: float | None = None
    hold_threshold_s: float | None = None
    held_event: dict[str, Any] | None = None
    largest_ts_gap: dict[str, Any] | None = None
    bursts: int = 0
    gaps: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=False)


# --------------------------------------------------------------------------- parsing


class SSEParser:
    """Incremental SSE parser that stamps each frame with the arrival of its last byte.

    Accepts LF, CRLF and CR line ends. A comment line (``: hb``) is reported as it
    completes; field lines accumulate until the blank line that ends the frame.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""
        self._fields: dict[str, list[str]] = {}
        self._pending_cr = False
        self._first = True

    def feed(self, data: bytes, arrival_s: float, chunk: int) -> list[Frame]:
        text = self._decoder.decode(data)
        if self._first and text.startswith("\ufeff"):
            text = text[1:]
        self._first = False
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = text.endswith("\r")
        self._buf += text.replace("\r\n", "\n").replace("\r", "\n")
        frames: list[Frame] = []
        while True:
            nl = self._buf.find("\n")
            if nl < 0:
                break
            line, self._buf = self._buf[:nl], self._buf[nl + 1 :]
            frame = self._line(line, arrival_s, chunk)
            if frame is not None:
                frames.append(frame)
        return frames

    def _line(self, line: str, arrival_s: float, chunk: int) -> Frame | None:
        if line == "":
            return self._dispatch(arrival_s, chunk)
        if line.startswith(":"):
            text = line[1:].strip()
            kind = "heartbeat" if text in ("hb", "") else "comment"
            return Frame(kind=kind, arrival_s=arrival_s, chunk=chunk, text=text)
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        self._fields.setdefault(name, []).append(value)
        return None

    def _dispatch(self, arrival_s: float, chunk: int) -> Frame | None:
        fields, self._fields = self._fields, {}
        if not fields:
            return None
        if "data" not in fields:
            if "retry" in fields:
                retry = fields["retry"][-1]
                return Frame(kind="retry", arrival_s=arrival_s, chunk=chunk, text=retry)
            return None
        data = "\n".join(fields["data"])
        frame = Frame(kind="event", arrival_s=arrival_s, chunk=chunk)
        frame.type = fields.get("event", [None])[-1]
        sid = fields.get("id", [None])[-1]
        try:
            payload = json.loads(data)
        except ValueError:
            payload = None
            frame.text = data[:200]
        if isinstance(payload, dict):
            frame.type = payload.get("type") or frame.type
            seq = payload.get("seq")
            frame.seq = seq if isinstance(seq, int) else None
            ts = payload.get("ts")
            if isinstance(ts, (int, float)) and not isinstance(ts, bool):
                frame.ts = float(ts)
            node = payload.get("node")
            frame.node = node if isinstance(node, str) else None
            frame.payload = payload
        if frame.seq is None and sid is not None and sid.isdigit():
            frame.seq = int(sid)
        return frame


# --------------------------------------------------------------------------- judging


def _label(frame: Frame) -> str:
    parts = [frame.type or "?"]
    if frame.node:
        parts.append(frame.node)
    if frame.seq is not None:
        parts.append(f"(seq {frame.seq})")
    return " ".join(parts)


def judge(events: list[Frame], *, min_spread_s: float = DEFAULT_MIN_SPREAD_S) -> Judgement:
    """Decide incremental / buffered / inconclusive from events' arrival times and ts.

    ``events`` are in arrival order. Pure function: the unit tests feed it timings.
    """
    timed = [e for e in events if e.ts is not None]
    evidence: list[str] = []
    gaps: list[Gap] = []
    if len(timed) < 2:
        evidence.append(f"only {len(timed)} event(s) carry a ts: nothing to compare")
        return Judgement(
            "inconclusive", None, None, None, None, None, None, len(timed), gaps, evidence
        )

    for a, b in itertools.pairwise(timed):
        gaps.append(
            Gap(
                from_seq=a.seq,
                to_seq=b.seq,
                from_type=a.type,
                to_type=b.type,
                ts_gap_ms=round(b.ts - a.ts, 3),  # type: ignore[operator]
                arrival_gap_ms=round((b.arrival_s - a.arrival_s) * 1000.0, 3),
            )
        )
    ts_values = [e.ts for e in timed]
    ts_spread_s = (max(ts_values) - min(ts_values)) / 1000.0  # type: ignore[type-var,operator]
    arrival_spread_s = timed[-1].arrival_s - timed[0].arrival_s

    # offset_k = ts_k - arrival_k; hold(i, j) = offset_j - offset_i for i before j.
    max_hold = 0.0
    held: Frame | None = None
    best_offset = None
    best_frame: Frame | None = None
    for e in timed:
        offset = e.ts / 1000.0 - e.arrival_s  # type: ignore[operator]
        if best_offset is not None and offset - best_offset > max_hold:
            max_hold = offset - best_offset
            held = best_frame
        if best_offset is None or offset < best_offset:
            best_offset, best_frame = offset, e

    bursts = 1
    for a, b in itertools.pairwise(events):
        if b.arrival_s - a.arrival_s > BURST_WINDOW_S:
            bursts += 1

    largest = max(gaps, key=lambda g: g.ts_gap_ms)
    threshold = min(max(HOLD_FRACTION * ts_spread_s, HOLD_MIN_S), HOLD_MAX_S)
    evidence.append(
        f"{len(timed)} events spread over {ts_spread_s * 1000:.1f} ms by their own ts "
        f"arrived over {arrival_spread_s * 1000:.1f} ms, in {bursts} burst(s)"
    )
    evidence.append(
        f"largest ts gap: {largest.ts_gap_ms:.1f} ms, between {largest.from_type} "
        f"(seq {largest.from_seq}) and {largest.to_type} (seq {largest.to_seq}); "
        f"their arrival gap: {largest.arrival_gap_ms:.1f} ms"
    )
    held_info = None
    if held is not None:
        held_info = {"seq": held.seq, "type": held.type, "node": held.node}
    if ts_spread_s < min_spread_s:
        delivery = "inconclusive"
        evidence.append(
            f"the turn's ts spread ({ts_spread_s * 1000:.1f} ms) is below "
            f"{min_spread_s * 1000:.0f} ms: too fast to tell streaming from buffering "
            "(slow a node down with the fault header)"
        )
    elif max_hold >= threshold:
        delivery = "buffered"
        evidence.append(
            f"{_label(held) if held else 'an event'} was held back {max_hold * 1000:.1f} ms "
            f"(threshold {threshold * 1000:.0f} ms): something between the server "
            "and this client buffers"
        )
    else:
        delivery = "incremental"
        evidence.append(
            f"max hold {max_hold * 1000:.1f} ms (threshold {threshold * 1000:.0f} ms): "
            "events arrived as their spans happened"
        )
    return Judgement(
        delivery=delivery,
        ts_spread_s=round(ts_spread_s, 6),
        arrival_spread_s=round(arrival_spread_s, 6),
        max_hold_s=round(max_hold, 6),
        hold_threshold_s=round(threshold, 6),
        held_event=held_info,
        largest_ts_gap=largest,
        bursts=bursts,
        gaps=gaps,
        evidence=evidence,
    )


# --------------------------------------------------------------------------- running


def chat_url(url: str) -> str:
    base = url.rstrip("/")
    return base if base.endswith("/chat") else base + "/chat"


def _finish(report: StreamReport, verdict: str) -> StreamReport:
    report.verdict = verdict
    report.exit_code = EXIT_CODES[verdict]
    return report


async def verify_stream(
    url: str,
    *,
    message: str = DEFAULT_MESSAGE,
    token: str | None = None,
    deadline_s: float = DEFAULT_TIMEOUT_S,
    slow_node: str | None = DEFAULT_SLOW_NODE,
    delay: float = DEFAULT_DELAY_S,
    min_spread_s: float = DEFAULT_MIN_SPREAD_S,
    extra_headers: dict[str, str] | None = None,
    verify_tls: bool = True,
) -> StreamReport:
    """Run one turn through ``url`` and report how its events were delivered."""
    target = chat_url(url)
    report = StreamReport(url=target, verdict="http_error", exit_code=EXIT_HTTP_ERROR)
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if slow_node and delay > 0:
        report.fault_header = f"{slow_node}=delay:{delay:g}"
        headers["X-Relay-Fault"] = report.fault_header
    headers.update(extra_headers or {})

    frames: list[Frame] = []
    parser = SSEParser()
    clock = time.perf_counter
    t0 = clock()
    client_timeout = httpx.Timeout(connect=min(10.0, deadline_s), read=None, write=10.0, pool=10.0)
    try:
        async with asyncio.timeout(deadline_s):
            async with httpx.AsyncClient(timeout=client_timeout, verify=verify_tls) as client:
                t0 = clock()
                body = {"message": message}
                async with client.stream("POST", target, json=body, headers=headers) as resp:
                    report.time_to_headers_s = round(clock() - t0, 6)
                    report.status_code = resp.status_code
                    report.headers = {
                        h: resp.headers[h] for h in INTERESTING_HEADERS if h in resp.headers
                    }
                    ctype = resp.headers.get("content-type", "")
                    if resp.status_code >= 400 or not ctype.startswith("text/event-stream"):
                        text = (await resp.aread())[:500].decode("utf-8", "replace").strip()
                        if resp.status_code >= 400:
                            report.error = f"HTTP {resp.status_code}: {text}"
                        else:
                            report.error = (
                                f"not an event stream (Content-Type: {ctype or 'none'}): {text}"
                            )
                        report.evidence.append(report.error)
                        return _finish(report, "http_error")
                    chunk = 0
                    async for data in resp.aiter_bytes():
                        now = clock() - t0
                        if not data:
                            continue
                        if report.time_to_first_byte_s is None:
                            report.time_to_first_byte_s = round(now, 6)
                        report.body_bytes += len(data)
                        new = parser.feed(data, now, chunk)
                        chunk += 1
                        report.body_chunks = chunk
                        frames.extend(new)
                        if any(f.kind == "event" and f.type in TERMINAL_TYPES for f in new):
                            break
    except TimeoutError:
        report.error = f"timed out after {deadline_s:g} s"
    except httpx.HTTPError as exc:
        report.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if report.status_code is None:
            report.evidence.append(f"request failed: {report.error}")
            report.duration_s = round(clock() - t0, 6)
            return _finish(report, "http_error")
    report.duration_s = round(clock() - t0, 6)
    return _analyse(report, frames, slow_node=slow_node, delay=delay, min_spread_s=min_spread_s)


def _analyse(
    report: StreamReport,
    frames: list[Frame],
    *,
    slow_node: str | None,
    delay: float,
    min_spread_s: float,
) -> StreamReport:
    events = [f for f in frames if f.kind == "event"]
    beats = [f for f in frames if f.kind == "heartbeat"]
    report.retry_frame_first = bool(frames) and frames[0].kind == "retry"
    report.heartbeats = len(beats)
    report.heartbeat_arrivals_s = [round(b.arrival_s, 6) for b in beats]
    report.events = [
        {
            "seq": e.seq,
            "type": e.type,
            "node": e.node,
            "ts": e.ts,
            "arrival_s": round(e.arrival_s, 6),
            "chunk": e.chunk,
        }
        for e in events
    ]
    if events:
        report.time_to_first_event_s = round(events[0].arrival_s, 6)
    for e in events:
        payload = e.payload or {}
        report.turn_id = report.turn_id or payload.get("turn_id")
        report.thread_id = report.thread_id or payload.get("thread_id")
        report.trace_id = report.trace_id or payload.get("trace_id")
        if e.type in TERMINAL_TYPES:
            report.terminal = e.type

    # Did the server honour the slow-node fault?
    if report.fault_header:
        durations = [
            (e.payload or {}).get("duration_ms")
            for e in events
            if e.type == "node_completed" and e.node == slow_node
        ]
        durations = [d for d in durations if isinstance(d, (int, float))]
        if durations:
            report.slow_node_duration_ms = float(max(durations))
            report.fault_honoured = report.slow_node_duration_ms >= 0.9 * delay * 1000.0
        elif report.terminal:
            report.fault_honoured = False
        if report.fault_honoured:
            report.evidence.append(
                f"server honoured X-Relay-Fault: {report.fault_header} "
                f"({slow_node} took {report.slow_node_duration_ms:.0f} ms)"
            )
        elif report.fault_honoured is False:
            report.evidence.append(
                f"server ignored X-Relay-Fault: {report.fault_header} (it needs RELAY_FAULTS=1); "
                "judging by the turn's own ts spread"
            )

    judgement = judge(events, min_spread_s=min_spread_s)
    report.delivery = judgement.delivery
    report.ts_spread_s = judgement.ts_spread_s
    report.arrival_spread_s = judgement.arrival_spread_s
    report.max_hold_s = judgement.max_hold_s
    report.hold_threshold_s = judgement.hold_threshold_s
    report.held_event = judgement.held_event
    report.largest_ts_gap = asdict(judgement.largest_ts_gap) if judgement.largest_ts_gap else None
    report.bursts = judgement.bursts
    report.gaps = [asdict(g) for g in judgement.gaps]
    report.evidence.extend(judgement.evidence)
    report.evidence.append(f"{report.heartbeats} heartbeat(s) seen")
    if report.headers.get("content-encoding"):
        report.evidence.append(
            f"response is compressed (Content-Encoding: {report.headers['content-encoding']}): "
            "compression on the path usually buffers"
        )
    first_byte = report.time_to_first_byte_s
    if (
        judgement.delivery == "buffered"
        and first_byte is not None
        and report.duration_s
        and judgement.ts_spread_s
        and first_byte >= 0.8 * judgement.ts_spread_s
    ):
        report.evidence.append(
            f"nothing reached this client for {first_byte * 1000:.0f} ms "
            f"(headers after {(report.time_to_headers_s or 0) * 1000:.0f} ms): "
            "the whole response was held until the turn ended"
        )
    if frames and not report.retry_frame_first:
        report.evidence.append("the first frame was not `retry:`")

    if report.terminal is None:
        cause = report.error or "the stream ended"
        report.evidence.append(f"no terminal event (turn_completed, paused or error): {cause}")
        return _finish(report, "no_terminal")
    report.evidence.append(f"terminal event: {report.terminal}")
    return _finish(report, judgement.delivery)


# --------------------------------------------------------------------------- CLI


def format_report(report: StreamReport) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.1f} ms"

    lines = [
        f"verify-stream {report.url}",
        f"  verdict:            {report.verdict} (exit {report.exit_code})",
        f"  HTTP status:        {report.status_code if report.status_code is not None else '-'}",
    ]
    for name, value in report.headers.items():
        lines.append(f"  {name + ':':<20}{value}")
    lines += [
        f"  time to headers:    {ms(report.time_to_headers_s)}",
        f"  time to first byte: {ms(report.time_to_first_byte_s)}",
        f"  first event:        {ms(report.time_to_first_event_s)}",
        f"  duration:           {ms(report.duration_s)}",
        f"  events:             {len(report.events)} in {report.body_chunks} body chunk(s), "
        f"{report.bursts} burst(s)",
        f"  heartbeats:         {report.heartbeats}",
        f"  terminal event:     {report.terminal or 'NONE'}",
        f"  fault header:       {report.fault_header or '-'}"
        + ("" if report.fault_honoured is None else f" (honoured: {report.fault_honoured})"),
        f"  ts spread:          {ms(report.ts_spread_s)}; "
        f"arrival spread: {ms(report.arrival_spread_s)}",
        f"  max hold:           {ms(report.max_hold_s)} (threshold {ms(report.hold_threshold_s)})",
    ]
    if report.turn_id:
        lines.append(f"  turn / trace:       {report.turn_id} / {report.trace_id}")
    if report.events:
        lines.append("  arrivals (ms since request; ts gap vs arrival gap to the previous event):")
        prev = None
        for e in report.events:
            if prev is None or e["ts"] is None or prev["ts"] is None:
                gap = ""
            else:
                ts_gap = e["ts"] - prev["ts"]
                arrival_gap = (e["arrival_s"] - prev["arrival_s"]) * 1000
                gap = f"  ts +{ts_gap:8.1f}  arrival +{arrival_gap:8.1f}"
            label = f"{e['seq']} {e['type']}" + (f" {e['node']}" if e["node"] else "")
            lines.append(f"    {e['arrival_s'] * 1000:9.1f}  {label:<36}{gap}")
            prev = e
    lines.append("  evidence:")
    lines += [f"    - {item}" for item in report.evidence]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="span-relay verify-stream",
        description="Run one turn through a deployed relay and check that its events "
        "stream incrementally.",
        epilog="Exit codes: 0 incremental, 10 buffered, 11 no terminal event, "
        "12 HTTP error, 13 inconclusive, 2 usage.",
    )
    p.add_argument(
        "url", help="base URL of the relay (or of the proxy in front of it); POSTs URL/chat"
    )
    p.add_argument(
        "--message", default=DEFAULT_MESSAGE, help=f"chat message (default: {DEFAULT_MESSAGE!r})"
    )
    p.add_argument(
        "--token",
        default=os.environ.get("RELAY_API_TOKEN"),
        help="bearer token (default: $RELAY_API_TOKEN)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds for the whole turn (default 60)",
    )
    p.add_argument(
        "--slow-node",
        default=DEFAULT_SLOW_NODE,
        help="node to slow down with X-Relay-Fault so that buffering shows even on a fast "
        "turn (default: generate; honoured only by a server run with RELAY_FAULTS=1)",
    )
    p.add_argument(
        "--delay",
        type=float,
        default=DEFAULT_DELAY_S,
        help="seconds of delay for --slow-node (default 0.5)",
    )
    p.add_argument(
        "--no-slow-node",
        action="store_true",
        help="send no fault header; judge by the turn's own ts spread",
    )
    p.add_argument(
        "--min-spread",
        type=float,
        default=DEFAULT_MIN_SPREAD_S,
        help="seconds of ts spread needed to judge (default 0.3); below: inconclusive",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="extra request header (repeatable)",
    )
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    extra: dict[str, str] = {}
    for item in args.header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            print(f"verify-stream: bad --header {item!r}, expected NAME:VALUE", file=sys.stderr)
            return 2
        extra[name.strip()] = value.strip()
    report = asyncio.run(
        verify_stream(
            args.url,
            message=args.message,
            token=args.token,
            deadline_s=args.timeout,
            slow_node=None if args.no_slow_node else args.slow_node,
            delay=args.delay,
            min_spread_s=args.min_spread,
            extra_headers=extra,
            verify_tls=not args.insecure,
        )
    )
    print(report.to_json() if args.json else format_report(report))
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
