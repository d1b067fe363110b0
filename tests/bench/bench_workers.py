"""workers: ``span-relay serve --workers 1`` against ``--workers 2``, the demo agent on
Redis (the bus) and PostgreSQL (turns, spans, checkpoints), 150 concurrent streamed turns.

Both servers run at once (each its own fresh database, same Redis), started by the real
command; the rounds alternate between them (1, 2, 1, 2, ...) so that both see the same
machine. A round: 150 ``POST /chat`` (``Accept: text/event-stream``, the demo's offline
model at its default pace), all started together, each on its own connection, each read
until its ``turn_completed``. Per round: turns/s (completed turns over the round's wall
time), first byte p50 (request sent -> first byte of the body) and how many streams were
whole (a ``turn_completed`` with ``answered``). Bounded: 120 s per round.

Needs Redis (RELAY_TEST_REDIS, default redis://127.0.0.1:6379/0) and PostgreSQL
(RELAY_TEST_POSTGRES, default postgresql://postgres@127.0.0.1:5432/test): without them
every figure is n/a, saying why. Not in the default run (``--only workers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from tests.bench.harness import ROOT, Figure, median, na, percentile, rounds, stop_process

REDIS = os.environ.get("RELAY_TEST_REDIS", "redis://127.0.0.1:6379/0")
POSTGRES = os.environ.get("RELAY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
BODY = json.dumps({"message": "How do refunds work?"}).encode()
KEYS = (
    "workers.w1_turns_s",
    "workers.w2_turns_s",
    "workers.ratio",
    "workers.w1_fb_p50",
    "workers.w2_fb_p50",
)


@dataclass
class Round:
    turns_s: float
    first_byte_p50_ms: float
    whole: int
    turns: int


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def database() -> Iterator[str]:
    import psycopg

    name = f"relay_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE template0")  # not template1's tables
    try:
        yield f"{POSTGRES.rpartition('/')[0]}/{name}"
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def serve(workers: int, store: str, data_dir: str) -> Iterator[int]:
    """``span-relay serve --workers N`` on a free port, until every worker answers."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        RELAY_BUS=REDIS,
        RELAY_STORE=store,
        RELAY_DATA_DIR=data_dir,
        OTEL_TRACES_EXPORTER="none",
        RELAY_INSTANCE_ID=f"bench-{uuid.uuid4().hex[:6]}",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    log = open(os.path.join(data_dir, "serve.log"), "wb")  # closed below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relay.cli",
            "serve",
            "--workers",
            str(workers),
            "--port",
            str(port),
            "--log-level",
            "info",
        ],
        cwd=data_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        try:
            asyncio.run(_until_ready(port, workers, proc))
        except RuntimeError:
            with open(log.name, "rb") as f:
                sys.stderr.write(f.read()[-3000:].decode(errors="replace"))
            raise
        yield port
    finally:
        stop_process(proc, 60, 10)
        log.close()


async def _until_ready(port: int, workers: int, proc: subprocess.Popen[bytes]) -> None:
    seen: set[object] = set()
    deadline = time.monotonic() + 180
    while len(seen) < workers:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve --workers {workers} did not start")
        try:
            status, body = await _get(port, "/healthz")
            if status == 200:
                seen.add(json.loads(body).get("worker"))
        except (OSError, TimeoutError):
            await asyncio.sleep(0.2)


async def _get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        raw = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    return int(raw.split(b" ", 2)[1]), raw.partition(b"\r\n\r\n")[2]


async def _turn(port: int, deadline: float) -> tuple[float | None, bool]:
    """One streamed turn: (ms to the first body byte, whole?)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        sent = time.perf_counter()
        writer.write(
            b"POST /chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Accept: text/event-stream\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), deadline - time.monotonic())
        if not head.startswith(b"HTTP/1.1 200"):
            return None, False
        first_ms: float | None = None
        tail = b""
        while True:
            data = await asyncio.wait_for(reader.read(65536), deadline - time.monotonic())
            if not data:
                return first_ms, False
            if first_ms is None:
                first_ms = (time.perf_counter() - sent) * 1000
            tail = (tail + data)[-4096:]
            if b'"type":"turn_completed"' in tail:
                return first_ms, b'"status":"answered"' in tail
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return None, False
    finally:
        writer.close()


async def _round(port: int, turns: int) -> Round:
    deadline = time.monotonic() + 120
    t0 = time.perf_counter()
    results = await asyncio.gather(*(_turn(port, deadline) for _ in range(turns)))
    wall = time.perf_counter() - t0
    whole = sum(ok for _, ok in results)
    first = [ms for ms, _ in results if ms is not None]
    return Round(whole / wall, percentile(first, 50), whole, turns)


def run_workers(quick: bool) -> list[Figure]:
    turns, count = (20, 1) if quick else (150, 3)
    try:
        import psycopg
        import redis

        redis.Redis.from_url(REDIS, socket_connect_timeout=2).ping()
        psycopg.connect(POSTGRES, connect_timeout=3).close()
    except Exception as exc:
        why = f"needs Redis at {REDIS} and PostgreSQL at {POSTGRES} ({type(exc).__name__})"
        return [na(k, k, "", why) for k in KEYS]
    import tempfile

    by_n: dict[int, list[Round]] = {1: [], 2: []}
    with contextlib.ExitStack() as stack:
        ports = {}
        for n in (1, 2):
            store = stack.enter_context(database())
            data_dir = stack.enter_context(tempfile.TemporaryDirectory())
            ports[n] = stack.enter_context(serve(n, store, data_dir))
        for n in (1, 2):  # warm-up: every worker has served turns (pools, caches)
            asyncio.run(_round(ports[n], 20))
        for _ in rounds(count, budget_s=600):
            for n in (1, 2):  # alternated: 1, 2, 1, 2, ...
                r = asyncio.run(_round(ports[n], turns))
                by_n[n].append(r)
                print(
                    f"# workers={n}: {r.turns_s:.1f} turns/s, first byte p50 "
                    f"{r.first_byte_p50_ms:.0f} ms, {r.whole}/{r.turns} whole",
                    file=sys.stderr,
                    flush=True,
                )
    return _figures(by_n, turns)


def _figures(by_n: dict[int, list[Round]], turns: int) -> list[Figure]:
    out = []
    for n in (1, 2):
        rs = by_n[n]
        whole = f"{sum(r.whole for r in rs)}/{sum(r.turns for r in rs)} streams whole"
        tps = [r.turns_s for r in rs]
        fb = [r.first_byte_p50_ms for r in rs]
        out.append(
            Figure(
                f"workers.w{n}_turns_s",
                f"{turns} concurrent demo turns, serve --workers {n}",
                median(tps),
                "turns/s",
                min(tps),
                max(tps),
                len(rs),
                higher_is_better=True,
                note=whole,
            )
        )
        out.append(
            Figure(
                f"workers.w{n}_fb_p50",
                f"first byte p50, --workers {n}",
                median(fb),
                "ms",
                min(fb),
                max(fb),
                len(rs),
            )
        )
    ratios = [b.turns_s / a.turns_s for a, b in zip(by_n[1], by_n[2], strict=True)]
    out.append(
        Figure(
            "workers.ratio",
            "turns/s, 2 workers over 1 (per alternated pair)",
            median(ratios),
            "x",
            min(ratios),
            max(ratios),
            len(ratios),
            anchor="--workers 1",
            anchor_value=median([r.turns_s for r in by_n[1]]),
            anchor_unit="turns/s",
            higher_is_better=True,
            note=f"nproc={os.cpu_count()}, load {os.getloadavg()[0]:.1f} at the end",
        )
    )
    return out
