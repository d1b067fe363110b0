"""verify-stream's report: what one run found, its verdict's exit code, as text or JSON.

Exit codes: 0 incremental, 10 buffered, 11 no terminal event (stream cut, timed out or
closed early), 12 HTTP error (connection failed, non-2xx status, not an event stream),
13 inconclusive (turn too fast to judge); 2 (a usage error) is argparse's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

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


def finish(report: StreamReport, verdict: str) -> StreamReport:
    """``report`` with its verdict and that verdict's exit code."""
    report.verdict = verdict
    report.exit_code = EXIT_CODES[verdict]
    return report


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
