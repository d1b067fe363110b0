"""The figures, each measured the same way on both servers (tests/bench/peer/client.py).

Every loop is bounded by count and by time; sides alternate within a figure (A, B, A, B)
so that a change in the machine's load falls on both.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import statistics
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.bench.peer.client import Dialect, Reading, message_input, read
from tests.bench.peer.servers import Server
from tests.bench.peer.sse import (
    Resumed,
    differences,
    distinct_ids,
    lost_and_duplicated,
    per_event,
)

WORDS = 70  # graphs.WORDS: tokens per run of the `tokens` graph


@dataclass
class Side:
    dialect: Dialect
    server: Server
    client: httpx.AsyncClient
    broken: list[str] = field(default_factory=list)  # what was wrong with a turn, if anything

    @property
    def name(self) -> str:
        return self.dialect.name


def client_for(server: Server, connections: int = 20) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.base,
        timeout=httpx.Timeout(60.0, pool=120.0),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _check(side: Side, graph: str, reading: Reading) -> None:
    """A turn counts only when the server really served it: 200, no error event, every
    token of a `tokens` run."""
    tokens = sum(1 for e in reading.events if side.dialect.is_token(e))
    problem = None
    if reading.status != 200:
        problem = f"status {reading.status}"
    elif any(e.event == "error" for e in reading.events):
        problem = "error event: " + next(e.data for e in reading.events if e.event == "error")
    elif graph == "tokens" and tokens != WORDS:
        problem = f"{tokens} tokens of {WORDS}"
    if problem:
        side.broken.append(f"{graph}: {problem}")


async def turn(
    side: Side, graph: str, client: httpx.AsyncClient | None = None, **extra: Any
) -> Reading:
    request, _ = side.dialect.start(graph, message_input("Hello there", **extra))
    reading = await read(client or side.client, request, side.dialect)
    _check(side, graph, reading)
    return reading


async def sequential(
    sides: list[Side], graph: str, per_round: int, rounds: int, deadline_s: float
) -> dict[str, dict[str, Any]]:
    """Turns one after another; the server's CPU over each batch."""
    readings: dict[str, list[Reading]] = {s.name: [] for s in sides}
    cpu = dict.fromkeys(readings, 0.0)
    stop = time.monotonic() + deadline_s
    for r in range(rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            before = side.server.cpu_s()
            for _ in range(per_round):
                if time.monotonic() > stop:
                    break
                readings[side.name].append(await turn(side, graph))
            cpu[side.name] += side.server.cpu_s() - before
    out: dict[str, dict[str, Any]] = {}
    for name, got in readings.items():
        n = max(1, len(got))
        out[name] = {
            "turns": len(got),
            "first_byte_ms": [1e3 * r.first_byte_s for r in got if r.first_byte_s is not None],
            "first_event_ms": [1e3 * r.first_event_s for r in got if r.first_event_s is not None],
            "first_token_ms": [1e3 * r.first_token_s for r in got if r.first_token_s is not None],
            "turn_ms": [1e3 * r.total_s for r in got],
            "cpu_ms_per_turn": 1e3 * cpu[name] / n,
            "bytes_per_turn": statistics.median(r.nbytes for r in got) if got else None,
            "events_per_turn": statistics.median(len(r.events) for r in got) if got else None,
        }
    return out


async def concurrent(
    side: Side, graph: str, workers: int, per_worker: int, deadline_s: float
) -> dict[str, Any]:
    """``workers`` clients, each running ``per_worker`` turns back to back."""
    first_bytes: list[float] = []
    first_tokens: list[float] = []
    done = 0
    stop = time.monotonic() + deadline_s
    async with client_for(side.server, workers + 10) as client:

        async def worker() -> None:
            nonlocal done
            for _ in range(per_worker):
                if time.monotonic() > stop:
                    return
                reading = await turn(side, graph, client)
                if reading.first_byte_s is not None:
                    first_bytes.append(1e3 * reading.first_byte_s)
                if reading.first_token_s is not None:
                    first_tokens.append(1e3 * reading.first_token_s)
                done += 1

        t0 = time.perf_counter()
        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        _, pending = await asyncio.wait(tasks, timeout=deadline_s + 30)
        for task in pending:
            task.cancel()
        wall = time.perf_counter() - t0
    return {
        "turns": done,
        "wall_s": wall,
        "turns_per_s": done / wall,
        "first_byte_ms": first_bytes,
        "first_token_ms": first_tokens,
    }


async def concurrent_ab(
    sides: list[Side], graph: str, workers: int, per_worker: int, rounds: int, deadline_s: float
) -> dict[str, dict[str, Any]]:
    """:func:`concurrent` in rounds, the sides alternating (A B B A ...); summed."""
    out: dict[str, dict[str, Any]] = {
        s.name: {"turns": 0, "wall_s": 0.0, "first_byte_ms": [], "first_token_ms": []}
        for s in sides
    }
    for r in range(rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            got = await concurrent(side, graph, workers, per_worker, deadline_s)
            total = out[side.name]
            total["turns"] += got["turns"]
            total["wall_s"] += got["wall_s"]
            total["first_byte_ms"] += got["first_byte_ms"]
            total["first_token_ms"] += got["first_token_ms"]
    for total in out.values():
        total["turns_per_s"] = total["turns"] / max(1e-9, total["wall_s"])
    return out


async def idle_streams(
    side: Side, n: int, hold_s: float = 120.0, settle_s: float = 2.0
) -> dict[str, Any]:
    """RSS delta of the server with ``n`` readers joined to one run that is running and
    silent (the `hold` graph's node waits), per reader. Both servers: one run started with
    no reader, then ``n`` joins of it (span-relay ``GET /turns/{id}/events``, the peer
    ``GET /threads/{t}/runs/{r}/stream``), each open once its response headers came."""
    dialect = side.dialect
    async with client_for(side.server, n + 10) as client:
        handle = await dialect.start_waiting(client, "hold", message_input("wait", hold_s=hold_s))
        await asyncio.sleep(settle_s)
        rss0 = side.server.rss_kib()
        opened = 0
        async with AsyncExitStack() as stack:

            async def join() -> None:
                nonlocal opened
                request = dialect.join(handle, None)
                response = await stack.enter_async_context(
                    client.stream(request.method, request.path, headers=request.headers)
                )
                if response.status_code == 200:
                    opened += 1

            for start in range(0, n, 50):
                await asyncio.wait_for(
                    asyncio.gather(*(join() for _ in range(min(50, n - start)))), timeout=60
                )
            await asyncio.sleep(settle_s)
            rss1 = side.server.rss_kib()
            cancel = dialect.cancel(handle)
            await client.request(cancel.method, cancel.path)
    return {
        "streams": opened,
        "rss_before_kib": rss0,
        "rss_after_kib": rss1,
        "kib_per_stream": (rss1 - rss0) / max(1, opened),
    }


async def reconnects(
    side: Side, cuts: int, seed: int, events_per_run: int, deadline_s: float
) -> dict[str, Any]:
    """Cut a `tokens` run's stream after k events (k seeded-random; every other run has
    5 ms between words, so the resume lands while the run is still going, the others
    resume after it ended), resume with ``Last-Event-ID`` (the last id the cut read got),
    and compare both parts with an uncut read of the same run from the start once it
    ended: lost, duplicated and resent events, in all and per event type."""
    rng = random.Random(seed)
    dialect = side.dialect
    lost = duplicated = resent = events = ids = 0
    by_event: dict[str, dict[str, int]] = {}
    points: list[dict[str, Any]] = []
    stop = time.monotonic() + deadline_s
    for i in range(cuts):
        if time.monotonic() > stop:
            break
        k = 1 + int(rng.random() * max(1, events_per_run - 2))
        delay = 0.005 if i % 2 else 0.0
        request, handle = dialect.start("tokens", message_input("Hello", token_delay_s=delay))
        first = await read(side.client, request, dialect, stop_after=k)
        handle = dialect.handle_of(handle, first)
        resumed = await read(side.client, dialect.join(handle, first.last_id), dialect)
        uncut = await read(side.client, dialect.join(handle, None), dialect)
        counted = lost_and_duplicated(uncut.events, first.events, resumed.events)
        lost += counted.lost
        duplicated += counted.duplicated
        resent += counted.resent
        events += len(uncut.events)
        ids += distinct_ids(uncut.events)
        kinds = per_event(uncut.events, first.events, resumed.events)
        for name, got in kinds.items():
            total = by_event.setdefault(name, {"lost": 0, "duplicated": 0, "resent": 0})
            total["lost"] += got.lost
            total["duplicated"] += got.duplicated
            total["resent"] += got.resent
        points.append(
            {
                "k": k,
                "delay_s": delay,
                "lost": counted.lost,
                "duplicated": counted.duplicated,
                "resent": counted.resent,
                "by_event": {n: _counts(r) for n, r in kinds.items() if r != Resumed(0, 0)},
                **differences(uncut.events, first.events, resumed.events),
                "uncut_events": len(uncut.events),
                "resumed_events": len(resumed.events),
                "last_id": first.last_id,
                "resume_status": resumed.status,
                "uncut_status": uncut.status,
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


def _counts(r: Resumed) -> dict[str, int]:
    return {"lost": r.lost, "duplicated": r.duplicated, "resent": r.resent}


def summary(values: list[float]) -> dict[str, Any]:
    return {"p50": pct(values, 50), "p99": pct(values, 99), "n": len(values)}


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)
