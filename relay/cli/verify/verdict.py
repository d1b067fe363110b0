"""verify-stream's verdict: frames with their arrival times -> incremental, buffered, ...

Pure analysis, no I/O (the unit tests feed it timings). The key number is the *hold*: for
two events ``i`` before ``j`` in arrival order, ``hold(i, j) = (ts_j - ts_i) - (arrival_j -
arrival_i)``, how much sooner ``j`` came after ``i`` than its span time says it should.
Streaming keeps every hold near zero (network jitter); buffering makes the hold as large
as the span-time gap it swallowed. :func:`judge` weighs the holds; :func:`analyse` fills a
:class:`~relay.cli.verify.report.StreamReport` from a run's frames (the terminal event,
whether the slow-node fault was honoured, the evidence) and gives it its verdict.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

from relay.cli.verify.report import StreamReport, finish
from relay.cli.verify.sse import Frame

TERMINAL_TYPES = frozenset({"turn_completed", "paused", "error"})

# Below this spread of the events' own ts, buffering cannot be told from streaming.
DEFAULT_MIN_SPREAD_S = 0.3
# A hold counts as buffering when it reaches half the ts spread, clamped to these bounds.
HOLD_FRACTION = 0.5
HOLD_MIN_S = 0.15
HOLD_MAX_S = 1.0
# Frames arriving within this window of each other count as one burst (evidence only).
BURST_WINDOW_S = 0.01


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
            delivery="inconclusive",
            ts_spread_s=None,
            arrival_spread_s=None,
            max_hold_s=None,
            hold_threshold_s=None,
            held_event=None,
            largest_ts_gap=None,
            bursts=len(timed),
            gaps=gaps,
            evidence=evidence,
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
            best_offset = offset
            best_frame = e

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


def analyse(
    report: StreamReport,
    frames: list[Frame],
    *,
    slow_node: str | None,
    delay: float,
    min_spread_s: float,
) -> StreamReport:
    """Fill ``report`` from the frames a run received and give it its verdict."""
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
        numbers = [float(d) for d in durations if isinstance(d, (int, float))]
        if numbers:
            report.slow_node_duration_ms = max(numbers)
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
        return finish(report, "no_terminal")
    report.evidence.append(f"terminal event: {report.terminal}")
    return finish(report, judgement.delivery)
