"""A replay from stored spans streams while it derives, over a real uvicorn: the client
has the first events while the store's read of the turn is held after its first chunk
(a gate in the real SQLite store's reader), and the whole stream, once the gate opens,
equals the reference replay; cursors and 204/400 past the end still answer."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest

from relay import conventions as c
from relay.mapping.feed import replay_events
from relay.spans import SpanRecord
from relay.store import reading
from tests.conftest import LiveServer
from tests.contract import reference_events

N_NODES = 400


def stored_turn(n_nodes: int) -> tuple[str, list[SpanRecord]]:
    """A finished turn: a run root and ``n_nodes`` node spans one after another."""
    trace_id = uuid.uuid4().hex
    turn_id = str(uuid.uuid4())
    t0 = 1_700_000_000_000_000_000
    root_id = "f" * 16
    spans = [
        SpanRecord(
            trace_id,
            f"{k + 1:016x}",
            root_id,
            f"node n{k}",
            t0 + 1_000 * (2 * k + 1),
            t0 + 1_000 * (2 * k + 2),
            {c.NODE_NAME: f"n{k}", c.NODE_STEP: k + 1, c.NODE_OUTCOME: "ok"},
            status="ok",
        )
        for k in range(n_nodes)
    ]
    spans.append(
        SpanRecord(
            trace_id,
            root_id,
            None,
            "invoke_agent replay-test",
            t0,
            t0 + 1_000 * (2 * n_nodes + 1),
            {
                c.OPERATION: c.OP_INVOKE_AGENT,
                c.TURN_ID: turn_id,
                c.CONVERSATION_ID: "replay-test",
                c.RUN_KIND: "chat",
                c.GRAPH_ID: "replay-test",
                c.TURN_OUTCOME: "answered",
            },
            status="ok",
        )
    )
    return turn_id, spans


class HeldRead:
    """The store's chunked read, held after its first chunk until :meth:`release`."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.gate = threading.Event()
        self.chunks_read = 0

    def wrap(self, chunks: Iterator[list[SpanRecord]]) -> Iterator[list[SpanRecord]]:
        for chunk in chunks:
            self.chunks_read += 1
            yield chunk
            if self.chunks_read == 1:
                self.held.set()
                assert self.gate.wait(60), "the test never released the read"

    def release(self) -> None:
        self.gate.set()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldRead]:
    hold = HeldRead()
    plain = reading.SpanStream.__iter__

    def held_iter(self: reading.SpanStream) -> Iterator[list[SpanRecord]]:
        return hold.wrap(plain(self))

    monkeypatch.setattr(reading.SpanStream, "__iter__", held_iter)
    yield hold
    hold.release()


def _frames(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    frame: dict[str, str] = {}
    for line in lines:
        if not line:
            if "data" in frame:
                yield frame
            frame = {}
        elif not line.startswith((":", "retry:")):
            key, _, value = line.partition(": ")
            frame[key] = value


def test_first_events_arrive_while_the_turn_is_still_being_read(
    server: LiveServer, held: HeldRead
) -> None:
    turn_id, spans = stored_turn(N_NODES)
    server.relay.store.write(spans)
    reference = [e.to_json() for e in reference_events(spans)]
    url = f"{server.url}/turns/{turn_id}/events?source=spans&speed=0"
    with httpx.Client(timeout=30) as client, client.stream("GET", url) as response:
        assert response.status_code == 200
        frames = _frames(response.iter_lines())
        first = next(frames)
        # event 1 is here, and the store has handed over one chunk of the turn's spans:
        # the rest is not read yet (the read waits at the gate)
        assert first["id"] == "1" and first["data"] == reference[0]
        # (the worker asks for the second chunk just after it hands over the first batch)
        assert held.held.wait(60) and not held.gate.is_set() and held.chunks_read == 1
        held.release()
        rest = list(frames)
    assert [first["data"], *(f["data"] for f in rest)] == reference
    assert [int(f["id"]) for f in rest] == list(range(2, len(reference) + 1))
    assert held.chunks_read > 1


def test_cursors_past_and_at_the_end(server: LiveServer, held: HeldRead) -> None:
    held.release()  # not held here: the answers need the count
    turn_id, spans = stored_turn(50)
    server.relay.store.write(spans)
    count = len(replay_events(spans))
    base = f"{server.url}/turns/{turn_id}/events?source=spans&speed=0"
    with httpx.Client(timeout=30) as client:
        assert client.get(f"{base}&after={count}").status_code == 204
        too_far = client.get(f"{base}&after={count + 1}")
        assert too_far.status_code == 400 and too_far.json()["error"]["code"] == "invalid_cursor"
        resumed = client.get(base, headers={"Last-Event-ID": str(count - 3)})
        ids = [f["id"] for f in _frames(iter(resumed.text.split("\n")))]
        assert ids == [str(n) for n in range(count - 2, count + 1)]
        assert (
            client.get(f"{server.url}/turns/{uuid.uuid4()}/events?source=spans").status_code == 404
        )
