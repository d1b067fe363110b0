"""``span-relay replay FILE``: a trace file's turns printed as the events they stream."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import IO

from relay.delivery.replay import paced
from relay.delivery.streaming import NDJSONEncoder, SSEEncoder
from relay.mapping.feed import group_turns, stream_replay_events


def replay_file(
    path: str,
    *,
    turn: str | None = None,
    ndjson: bool = False,
    speed: float = 0.0,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """Print the events of a trace file's turns as SSE frames (or NDJSON lines).

    Each turn is replayed on its own (``seq`` from 1), oldest first, each event printed
    as soon as it is derived (and due, at ``speed``). Exit status 0, or 2
    with a message on stderr when the file cannot be read or holds no such turn.
    """
    from relay.ingest.tracefile import TraceFileError, parse_trace_file

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if not math.isfinite(speed) or speed < 0:
        print(f"span-relay replay: --speed {speed!r}: use a number >= 0", file=err)
        return 2
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        _, records = parse_trace_file(data)
    except OSError as exc:
        print(f"span-relay replay: {exc}", file=err)
        return 2
    except TraceFileError as exc:
        print(f"span-relay replay: {path}: {exc}", file=err)
        return 2
    turns = [t for t in group_turns(records) if turn is None or t.turn_id == turn]
    if not turns:
        which = f"turn {turn}" if turn else "a turn (no span carries relay.turn.id)"
        print(f"span-relay replay: {path} holds no {which}", file=err)
        return 2
    encoder: SSEEncoder | NDJSONEncoder = NDJSONEncoder() if ndjson else SSEEncoder(0)
    for found in turns:
        events = (e for batch in stream_replay_events(found.spans) for e in batch)
        start = time.monotonic()
        for event, due in paced(events, speed):
            delay = start + due - time.monotonic()
            if delay > 0:
                out.flush()
                time.sleep(delay)
            out.write(encoder.event(event).decode())
        out.flush()
    return 0
