"""Raw SSE parsing and the reconnect arithmetic of the side-by-side benchmark.

:class:`SSEParser` takes the body's bytes as they arrive (any chunking) and returns whole
events (the WHATWG rules the two servers need: ``id``/``event``/``data`` fields in any
order, multi-line ``data``, comment lines, LF or CRLF). :func:`lost_and_duplicated`
compares what a cut-and-resumed reader got with an uncut read of the same run (in all, or
per event type: :func:`per_event`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str  # "message" when the frame names none
    data: str
    id: str | None  # the frame's own ``id:`` field (None: it had none)


class SSEParser:
    """Incremental: ``feed(chunk)`` returns the events that chunk completed."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self.last_id: str | None = None  # the stream's last event id, as a browser keeps it
        self.comments = 0  # heartbeats and other comment lines

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buffer += chunk
        events: list[SSEEvent] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                return events
            line = self._buffer[:end].rstrip(b"\r").decode("utf-8")
            self._buffer = self._buffer[end + 1 :]
            event = self._line(line)
            if event is not None:
                events.append(event)

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # retry: and unknown fields change nothing we count

    def _dispatch(self) -> SSEEvent | None:
        if self._id is not None:
            self.last_id = self._id
        if not self._data:  # a frame without data (``retry:``, a lone id) is no event
            self._event = ""
            self._id = None
            return None
        event = SSEEvent(self._event or "message", "\n".join(self._data), self._id)
        self._event = ""
        self._data = []
        self._id = None
        return event


@dataclass(frozen=True, slots=True)
class Resumed:
    lost: int  # events of the uncut read that the cut + resumed reads never got
    duplicated: int  # events the cut + resumed reads got more often than the uncut read has
    resent: int = 0  # events of the resume beyond the run's rest that the reader had already


def _key(e: SSEEvent) -> tuple[str, str]:
    return (e.event, e.data)


def lost_and_duplicated(
    uncut: Iterable[SSEEvent], before_cut: Iterable[SSEEvent], after_resume: Iterable[SSEEvent]
) -> Resumed:
    """An event is its type and data (ids are what is being tested, so they are not part of
    an event's identity); counted as multisets. ``resent``: what the resume sent beyond
    the rest of the run (the uncut read less what the reader had), counted where it is an
    event the reader had before the cut (a duplicate that the resume sent twice itself,
    or that no read of the run has, is a duplicate but not a resent one)."""
    want = Counter(map(_key, uncut))
    before = Counter(map(_key, before_cut))
    after = Counter(map(_key, after_resume))
    got = before + after
    beyond_rest = after - (want - before)
    return Resumed(
        lost=sum((want - got).values()),
        duplicated=sum((got - want).values()),
        resent=sum((beyond_rest & before).values()),
    )


def differences(
    uncut: Iterable[SSEEvent], before_cut: Iterable[SSEEvent], after_resume: Iterable[SSEEvent]
) -> dict[str, list[str]]:
    """Which events were lost and which duplicated (``event: data``, cut at 120
    characters): what a report shows of a cut that went wrong."""
    want = Counter(map(_key, uncut))
    got = Counter(map(_key, before_cut))
    got.update(map(_key, after_resume))

    def shown(c: Counter[tuple[str, str]]) -> list[str]:
        return [f"{e}: {d[:120]}" for (e, d), n in c.items() for _ in range(n)]

    return {"lost_events": shown(want - got), "duplicated_events": shown(got - want)}


def per_event(
    uncut: list[SSEEvent], before_cut: list[SSEEvent], after_resume: list[SSEEvent]
) -> dict[str, Resumed]:
    """:func:`lost_and_duplicated` for each event type (``messages``, ``updates``, ...)
    that any of the three reads has."""
    names = {e.event for e in (*uncut, *before_cut, *after_resume)}
    return {
        name: lost_and_duplicated(
            [e for e in uncut if e.event == name],
            [e for e in before_cut if e.event == name],
            [e for e in after_resume if e.event == name],
        )
        for name in sorted(names)
    }


def distinct_ids(events: Iterable[SSEEvent]) -> int:
    return len({e.id for e in events if e.id is not None})
