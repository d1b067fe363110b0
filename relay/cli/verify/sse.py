"""The SSE parser of verify-stream: bytes off the socket -> frames stamped with their arrival.

:class:`SSEParser` is incremental (any chunking, a UTF-8 character split across chunks,
LF / CRLF / CR line ends, a leading BOM) and stamps each :class:`Frame` with the arrival
time and body-chunk index of its last byte, which is what the verdict compares with the
events' own ``ts``. It is the relay's one SSE parser: the relay itself only writes SSE
(:mod:`relay.delivery.streaming`).
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field
from typing import Any


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
            line = self._buf[:nl]
            self._buf = self._buf[nl + 1 :]
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
        fields = self._fields
        self._fields = {}
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
