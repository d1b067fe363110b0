"""The newer Agent Server protocol (``@langchain/react`` v1's ``useStream``), as the
same-client benchmark (same_client.py) reads it on both servers:

- a run starts with ``POST /threads`` (``{"thread_id"}``) and ``POST
  /threads/{id}/commands`` ``{"id": 1, "method": "run.start", "params": {"assistant_id",
  "input"}}`` (``{"type": "success", "result": {"run_id"}}``);
- ``POST /threads/{id}/stream/events`` ``{"channels": [...], "since": seq}`` is the
  thread's event stream: SSE frames named by the event's ``method``, whose data is
  ``{"type": "event", "event_id", "seq", "method", "params": {"namespace", "timestamp",
  "data"}}``; ``since`` is the protocol's cursor (the last ``seq`` the client has: only
  later events are sent). The stream is the thread's, not the run's: the reader stops at
  the root namespace's ``lifecycle`` event ``completed``, ``failed`` or ``interrupted``.

An event's identity in the comparison (sse.py ``lost_and_duplicated``) is its ``method``,
namespace and data: ``seq``, ``event_id`` and ``timestamp`` belong to the transport (the
cursor is what is tested).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx

from tests.bench.peer.client import message_input
from tests.bench.peer.figures import client_for
from tests.bench.peer.servers import Server
from tests.bench.peer.sse import (
    SSEEvent,
    SSEParser,
    differences,
    distinct_ids,
    lost_and_duplicated,
    per_event,
)

CHANNELS = ["values", "updates", "messages", "lifecycle"]
TERMINAL = frozenset({"completed", "failed", "interrupted"})


@dataclass
class EventsReading:
    status: int
    events: list[SSEEvent]  # normalised: id = the seq, data = namespace + data
    last_seq: int | None
    ended: bool  # the run's terminal lifecycle event came
    first_event_s: float | None


def normalised(frame: SSEEvent) -> tuple[SSEEvent, int | None, bool]:
    """The frame as the comparison sees it, its ``seq``, and whether it ends the run."""
    try:
        body = json.loads(frame.data)
    except ValueError:
        return frame, None, False
    params = body.get("params") if isinstance(body, dict) else None
    if not isinstance(params, dict):
        return frame, None, False
    seq = body.get("seq")
    data = params.get("data")
    namespace = params.get("namespace") or []
    identity = json.dumps({"namespace": namespace, "data": data}, sort_keys=True)
    method = str(body.get("method") or frame.event)
    ends = (
        method == "lifecycle"
        and not namespace
        and isinstance(data, dict)
        and data.get("event") in TERMINAL
    )
    return (
        SSEEvent(method, identity, None if seq is None else str(seq)),
        seq if isinstance(seq, int) else None,
        ends,
    )


async def start(client: httpx.AsyncClient, graph: str, graph_input: dict[str, Any]) -> str:
    """A new thread with a run of ``graph`` on it; the thread's id."""
    thread_id = str(uuid.uuid4())
    r = await client.post("/threads", json={"thread_id": thread_id})
    if r.status_code != 200:
        raise RuntimeError(f"POST /threads answered {r.status_code}")
    await run_on(client, thread_id, graph, graph_input)
    return thread_id


async def run_on(
    client: httpx.AsyncClient, thread_id: str, graph: str, graph_input: dict[str, Any]
) -> None:
    """``run.start`` on the thread (the thread's runs before it have ended)."""
    r = await client.post(
        f"/threads/{thread_id}/commands",
        json={
            "id": 1,
            "method": "run.start",
            "params": {"assistant_id": graph, "input": graph_input},
        },
    )
    answer = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
    if r.status_code != 200 or answer.get("type") != "success":
        raise RuntimeError(f"POST /threads/{{id}}/commands answered {r.status_code}")


async def read_events(
    client: httpx.AsyncClient,
    thread_id: str,
    since: int | None = None,
    stop_after: int | None = None,
    timeout_s: float = 30.0,
    end_after: int | None = None,
) -> EventsReading:
    """The thread's events (after ``since``), until the run's end or ``stop_after``
    events (then the connection is closed: a cut). ``end_after``: only a terminal event
    whose ``seq`` is above it ends the reading (a replay of the thread's earlier runs
    passes theirs)."""
    body: dict[str, Any] = {"channels": CHANNELS}
    if since is not None:
        body["since"] = since
    parser = SSEParser()
    events: list[SSEEvent] = []
    last_seq: int | None = None
    ended = False
    first_event = None
    status = 0
    t0 = time.perf_counter()

    def done() -> bool:
        return ended or (stop_after is not None and len(events) >= stop_after)

    try:
        async with (
            asyncio.timeout(timeout_s),
            client.stream(
                "POST",
                f"/threads/{thread_id}/stream/events",
                json=body,
                headers={"Accept": "text/event-stream"},
                timeout=timeout_s,
            ) as response,
        ):
            status = response.status_code
            if status == 200:
                async for chunk in response.aiter_raw():
                    for frame in parser.feed(chunk):
                        if first_event is None:
                            first_event = time.perf_counter() - t0
                        event, seq, ends = normalised(frame)
                        events.append(event)
                        last_seq = seq if seq is not None else last_seq
                        ended = ended or (ends and (end_after is None or (seq or 0) > end_after))
                        if done():
                            break
                    if done():
                        break
    except (TimeoutError, httpx.TimeoutException):
        pass  # what came is the reading; ``ended`` says the run's end did not
    return EventsReading(status, events, last_seq, ended, first_event)


async def reconnects(
    client: httpx.AsyncClient, cuts: int, seed: int, events_per_run: int, deadline_s: float
) -> dict[str, Any]:
    """figures.reconnects on this protocol: a `tokens` run's thread stream cut after k
    events (every other run with 5 ms between words), reopened with ``since`` = the last
    ``seq`` received, and both parts compared with a read of the whole thread once the
    run ended (no ``since``). The same keys as figures.reconnects."""
    rng = random.Random(seed)
    lost = duplicated = resent = events = ids = 0
    by_event: dict[str, dict[str, int]] = {}
    points: list[dict[str, Any]] = []
    stop = time.monotonic() + deadline_s
    for i in range(cuts):
        if time.monotonic() > stop:
            break
        k = 1 + int(rng.random() * max(1, events_per_run - 2))
        delay = 0.005 if i % 2 else 0.0
        thread_id = await start(client, "tokens", message_input("Hello", token_delay_s=delay))
        first = await read_events(client, thread_id, stop_after=k)
        resumed = await read_events(client, thread_id, since=first.last_seq)
        uncut = await read_events(client, thread_id)
        counted = lost_and_duplicated(uncut.events, first.events, resumed.events)
        lost += counted.lost
        duplicated += counted.duplicated
        resent += counted.resent
        events += len(uncut.events)
        ids += distinct_ids(uncut.events)
        for name, got in per_event(uncut.events, first.events, resumed.events).items():
            total = by_event.setdefault(name, {"lost": 0, "duplicated": 0, "resent": 0})
            total["lost"] += got.lost
            total["duplicated"] += got.duplicated
            total["resent"] += got.resent
        points.append(
            {
                "k": k,
                "delay_s": delay,
                "since": first.last_seq,
                "lost": counted.lost,
                "duplicated": counted.duplicated,
                "resent": counted.resent,
                "uncut_events": len(uncut.events),
                "resumed_events": len(resumed.events),
                "resume_status": resumed.status,
                "resume_ended": resumed.ended,
                "uncut_ended": uncut.ended,
                **differences(uncut.events, first.events, resumed.events),
            }
        )
    return {
        "cuts": len(points),
        "lost": lost,
        "duplicated": duplicated,
        "resent": resent,
        "by_event": by_event,
        "events": events,
        "distinct_ids": ids,
        "points": points,
    }


async def resent_without_cursor(
    client: httpx.AsyncClient, threads: int, runs: int, seed: int, events_per_run: int
) -> dict[str, Any]:
    """A reconnect as LangGraph's JavaScript client makes it (no ``since``, no
    ``Last-Event-ID``) on a thread's ``runs``-th run: the client follows the thread run
    after run (each stream opened with ``since`` = the last ``seq`` it has), cuts the
    last run's stream after k events, and reopens it without a cursor, until that run's
    end. Resent: the frames of the reopened stream with a ``seq`` the client had."""
    rng = random.Random(seed)
    points: list[dict[str, Any]] = []
    for _ in range(threads):
        k = 1 + int(rng.random() * max(1, events_per_run - 2))
        thread_id = await start(client, "tokens", message_input("Hello"))
        had = await read_events(client, thread_id)
        last = had.last_seq
        for _ in range(runs - 2):
            await run_on(client, thread_id, "tokens", message_input("Hello"))
            reading = await read_events(client, thread_id, since=last)
            last = reading.last_seq
        await run_on(client, thread_id, "tokens", message_input("Hello"))
        cut = await read_events(client, thread_id, since=last, stop_after=k)
        last = cut.last_seq
        reopened = await read_events(client, thread_id, end_after=last)
        seqs = [int(e.id) for e in reopened.events if e.id is not None]
        points.append(
            {
                "k": len(cut.events),
                "had_seq": last,
                "sent": len(reopened.events),
                "resent": sum(1 for q in seqs if last is not None and q <= last),
                "ended": reopened.ended,
            }
        )
    return {
        "threads": len(points),
        "runs": runs,
        "resent": sum(p["resent"] for p in points),
        "points": points,
    }


async def idle_streams(
    server: Server, n: int, hold_s: float = 60.0, settle_s: float = 2.0
) -> dict[str, Any]:
    """figures.idle_streams on this protocol: the server's RSS delta per reader with ``n``
    readers of one thread whose run is running and silent (the `hold` graph), each
    ``POST /threads/{id}/stream/events`` held open once its response headers came."""
    async with client_for(server, n + 10) as client:
        thread_id = await start(client, "hold", message_input("wait", hold_s=hold_s))
        await asyncio.sleep(settle_s)
        rss0 = server.rss_kib()
        opened = 0
        async with AsyncExitStack() as stack:

            async def join() -> None:
                nonlocal opened
                response = await stack.enter_async_context(
                    client.stream(
                        "POST",
                        f"/threads/{thread_id}/stream/events",
                        json={"channels": CHANNELS},
                        headers={"Accept": "text/event-stream"},
                    )
                )
                if response.status_code == 200:
                    opened += 1

            for first in range(0, n, 50):
                await asyncio.wait_for(
                    asyncio.gather(*(join() for _ in range(min(50, n - first)))), timeout=60
                )
            await asyncio.sleep(settle_s)
            rss1 = server.rss_kib()
    return {
        "streams": opened,
        "rss_before_kib": rss0,
        "rss_after_kib": rss1,
        "kib_per_stream": (rss1 - rss0) / max(1, opened),
    }


async def served(client: httpx.AsyncClient) -> tuple[str | None, int]:
    """None when the server serves this protocol (a run started, its events read to its
    end), else why not; and the events of that run."""
    try:
        thread_id = await start(client, "tokens", message_input("Hello"))
    except RuntimeError as e:
        return str(e), 0
    reading = await read_events(client, thread_id)
    if reading.status != 200:
        return f"stream/events answered {reading.status}", 0
    if not reading.ended:
        return f"the run did not end in {len(reading.events)} events", 0
    return None, len(reading.events)
