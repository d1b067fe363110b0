"""Fan-out: many readers of one running turn, over real sockets.

Every reader of ``GET /turns/{id}/events`` must get every event of the turn exactly once,
in order, framed the same (the writer builds each frame once and shares it). The order in
time is made to happen: the turn's model waits at the gate until every reader has its
response head, so every reader is live (waiting on the log) when the events come.
"""

from __future__ import annotations

import asyncio

import httpx

from tests.conftest import SSE_HEADERS, LiveServer, ModelGate, events_of, parse_frame
from tests.contract import check_stream

REFUNDS = "How do refunds work?"
READERS = 200


async def _read_all(url: str, gate: ModelGate) -> list[bytes]:
    opened = 0
    all_open = asyncio.Event()
    limits = httpx.Limits(max_connections=READERS + 10, max_keepalive_connections=0)

    async def one(client: httpx.AsyncClient) -> bytes:
        nonlocal opened
        async with client.stream("GET", url, headers=SSE_HEADERS) as r:
            assert r.status_code == 200
            opened += 1
            if opened == READERS:
                all_open.set()
            return b"".join([chunk async for chunk in r.aiter_raw()])

    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        readers = [asyncio.ensure_future(one(client)) for _ in range(READERS)]
        await asyncio.wait_for(all_open.wait(), 120)
        gate.open()  # only now does the turn go on
        return await asyncio.wait_for(asyncio.gather(*readers), 120)


def _event_frames(body: bytes) -> list[str]:
    """The event frames of an SSE body (no retry, no heartbeats)."""
    return [raw for raw in body.decode("utf-8").split("\n\n") if raw.startswith("id: ")]


def test_every_reader_of_a_running_turn_gets_every_event_once_in_order(
    server: LiveServer, client: httpx.Client, model_gate: ModelGate
) -> None:
    r = client.post(
        f"{server.url}/chat", json={"message": REFUNDS}, headers={"Prefer": "respond-async"}
    )
    assert r.status_code == 202
    turn_id = r.json()["turn_id"]
    url = f"{server.url}/turns/{turn_id}/events"
    bodies = asyncio.run(_read_all(url, model_gate))
    assert not model_gate.timed_out
    with client.stream("GET", url, headers=SSE_HEADERS) as after:  # the log, read whole
        assert after.status_code == 200
        reference = _event_frames(after.read())
    events = events_of([parse_frame(raw, 0.0) for raw in reference])
    check_stream(events)
    assert events[-1]["type"] == "turn_completed"
    assert any(e["type"] == "text_delta" for e in events)  # a turn with a stream of words
    # the answer's message_saved may trail turn_completed, in the log read afterwards and in
    # a reader's stream alike (a reader may have had the terminal event before it came)
    turn = [f for f in reference if "event: message_saved" not in f]
    trailer = reference[len(turn) :]
    for body in bodies:
        assert body.startswith(b"retry: ")
        frames = _event_frames(body)
        assert frames[: len(turn)] == turn
        # after turn_completed: the trailer (the same frame as the log's), nothing else
        extra = frames[len(turn) :]
        assert extra in ([], trailer) if trailer else len(extra) <= 1, extra
        assert all("event: message_saved" in f for f in extra)
        seqs = [int(f.split("\n", 1)[0][4:]) for f in frames]
        assert seqs == list(range(1, len(frames) + 1))
