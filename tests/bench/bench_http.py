"""latency, idle, ingest: a real uvicorn on 127.0.0.1 and a raw-socket client.

The server (:mod:`tests.bench.server`) runs in its own process; this process is the
client, on plain asyncio sockets (an HTTP client library on the same two cores would
saturate before the server does). Each measurement has its anchor on the same server
in the same run: a plain Starlette ``StreamingResponse`` writing the same frames.

``latency``: span end -> the frame's bytes returned by ``recv`` at the client, from the
``ts`` the server stamps at span end (the SDK's end time; same clock, same machine),
p50 and p99 over every ``node_completed`` of a round, for 1, 100 and 1,000 concurrent
streams. Per stream one node span ends every ``interval`` (phases spread evenly), so
the aggregate rate is ``streams / interval`` spans/s (each span is 2 events).
``fan1000``: 1,000 streams of one turn (one node span per ``interval``, each event to
every stream); the raw anchor puts the same frame bytes on 1,000 queues. The p50 and
p99 ratios to raw (per round, then the median) are figures of their own: DESIGN §9's
budget (p50 within 2x, p99 within 3x at 1,000 streams).

``idle``: RSS of the server process, after ``gc.collect()``, with N streams open and
idle but for their heartbeats, minus RSS before they opened, over N; a fresh server for
each (mode, N). "held" counts the streams that were open and had had a heartbeat when
RSS was read.

``ingest``: OTLP/HTTP protobuf batches posted to ``/v1/traces`` (2 connections) until
the relay's bus holds every event of every posted turn: spans/s, end to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.bench.harness import (
    ROOT,
    Figure,
    median,
    na,
    percentile,
    rounds,
    stop_process,
    summary,
)

_TS = re.compile(rb'"type":"node_completed".*?"ts":([0-9.]+)')
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
with contextlib.suppress(ValueError, OSError):
    resource.setrlimit(resource.RLIMIT_NOFILE, (_hard, _hard))


# -- the server process --------------------------------------------------------------------


@dataclass
class Server:
    port: int
    pid: int
    proc: subprocess.Popen[bytes]


@contextlib.contextmanager
def server(heartbeat_s: float = 15.0, otlp: bool = False) -> Iterator[Server]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "tests.bench.server", "--heartbeat", str(heartbeat_s)]
    if otlp:
        cmd.append("--otlp")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=None, stdin=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = b""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith(b"PORT ") or not line:
                break
        parts = line.split()
        if len(parts) < 4:
            raise RuntimeError(f"bench server did not start (said {line!r})")
        port = int(parts[1])
        pid = int(parts[3])
        _wait_ready(port)
        yield Server(port, pid, proc)
    finally:
        stop_process(proc, 10, 5)


def _wait_ready(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            status, _ = asyncio.run(request(port, "GET", "/stats"))
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("bench server never answered /stats")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# -- a raw HTTP/1.1 client -----------------------------------------------------------------


async def request(
    port: int,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, bytes]:
    """One request on its own connection (Connection: close); (status, body)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for k, v in (headers or {}).items():
            head += f"{k}: {v}\r\n"
        head += f"Content-Length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        raw = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    status = int(raw.split(b" ", 2)[1])
    return status, raw.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in raw else b""


@dataclass
class Stream:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    latencies_ms: list[float] = field(default_factory=list)
    heartbeats: int = 0
    done: bool = False
    closed: bool = False

    def abort(self) -> None:
        """Close with a reset (SO_LINGER 0): no TIME_WAIT left behind by thousands."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.close()


async def open_stream(port: int, path: str) -> Stream:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    if not head.startswith(b"HTTP/1.1 200"):
        writer.close()
        raise RuntimeError(f"{path}: {head[:80]!r}")
    return Stream(reader, writer)


async def open_many(port: int, paths: list[str], concurrency: int) -> list[Stream]:
    sem = asyncio.Semaphore(concurrency)

    async def one(path: str) -> Stream:
        async with sem:
            return await open_stream(port, path)

    results = await asyncio.gather(*(one(p) for p in paths), return_exceptions=True)
    streams = [r for r in results if isinstance(r, Stream)]
    errors = [r for r in results if not isinstance(r, Stream)]
    if errors:
        for s in streams:
            s.abort()
        raise RuntimeError(f"{len(errors)} of {len(paths)} streams failed to open: {errors[0]!r}")
    return streams


async def follow(stream: Stream, deadline: float) -> None:
    """Read frames until ``turn_completed``, EOF or the deadline; stamp node_completed."""
    buf = b""
    while not stream.done:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        try:
            data = await asyncio.wait_for(stream.reader.read(65536), remaining)
        except (TimeoutError, OSError):
            return
        now_ms = time.time_ns() / 1e6
        if not data:
            stream.closed = True
            return
        buf += data
        frames = buf.split(b"\n\n")
        buf = frames.pop()
        for frame in frames:
            m = _TS.search(frame)
            if m is not None:
                stream.latencies_ms.append(now_ms - float(m.group(1)))
            elif b": hb" in frame:
                stream.heartbeats += 1
            elif b'"type":"turn_completed"' in frame:
                stream.done = True


# -- latency -------------------------------------------------------------------------------


async def _latency_round(
    port: int, mode: str, n: int, interval: float, ticks: int, fan: bool = False
) -> tuple[float, float, int]:
    """One round: ``n`` streams, each its own turn, or (``fan``) all reading one turn."""
    if fan:
        group = uuid.uuid4().hex[:12]
        paths = [f"/{mode}_fan/{group}/{i}" for i in range(n)]
    else:
        paths = [f"/{mode}/{i}" for i in range(n)]
    streams = await open_many(port, paths, 100)
    try:
        deadline = time.monotonic() + interval * (ticks + 1) + 15
        followers = [asyncio.create_task(follow(s, deadline)) for s in streams]
        status, _ = await request(port, "POST", f"/go?interval={interval}&ticks={ticks}")
        assert status == 200
        await asyncio.gather(*followers)
    finally:
        for s in streams:
            s.abort()
    lat = [x for s in streams for x in s.latencies_ms[1:]]  # the first tick opens the run
    done = sum(s.done for s in streams)
    return percentile(lat, 50), percentile(lat, 99), done


async def _latency(port: int, quick: bool) -> list[Figure]:
    plans = [  # (key, streams, interval s, ticks, rounds, one turn for all streams)
        ("s1", 1, 0.01, 10 if quick else 100, 1 if quick else 5, False),
        (
            "s100",
            5 if quick else 100,
            0.05 if quick else 0.1,
            4 if quick else 20,
            1 if quick else 3,
            False,
        ),
        (
            "s1000",
            10 if quick else 1000,
            0.05 if quick else 1.0,
            3 if quick else 5,
            1 if quick else 2,
            False,
        ),
        # one turn, every event to 1,000 streams: a tick is a burst of 1,000 writes, so
        # the latency is how long the burst takes to drain (the interval leaves it room)
        (
            "fan1000",
            10 if quick else 1000,
            0.05 if quick else 0.25,
            4 if quick else 12,
            1 if quick else 3,
            True,
        ),
    ]
    await _latency_round(port, "relay", 1, 0.005, 10)  # warm up both paths
    await _latency_round(port, "raw", 1, 0.005, 10)
    figs: list[Figure] = []
    for key, n, interval, ticks, n_rounds, fan in plans:
        per: dict[str, dict[str, list[float]]] = {
            m: {"p50": [], "p99": []} for m in ("raw", "relay")
        }
        incomplete = 0
        for r in rounds(n_rounds, 10 if quick else 60, minimum=min(2, n_rounds)):
            for mode in ("raw", "relay") if r % 2 == 0 else ("relay", "raw"):
                gc.collect()
                p50, p99, done = await _latency_round(port, mode, n, interval, ticks, fan)
                incomplete += n - done
                per[mode]["p50"].append(p50)
                per[mode]["p99"].append(p99)
        if fan:
            label = (
                f"span end -> client bytes, {n} streams of one turn "
                f"({1 / interval:.0f} spans/s, each to every stream)"
            )
        else:
            label = (
                f"span end -> client bytes, {n} stream{'s' if n > 1 else ''} "
                f"({n / interval:.0f} spans/s)"
            )
        for q, limit in (("p50", 0.5), ("p99", 2.0)):
            relay_v = per["relay"][q]
            raw_v = per["raw"][q]
            ratio = median([a / b for a, b in zip(relay_v, raw_v, strict=True) if b > 0])
            figs.append(
                summary(
                    f"latency.{key}.{q}",
                    f"{label}: {q}" if q == "p50" else f"  {q}",
                    relay_v,
                    "ms",
                    anchor=f"raw StreamingResponse {q}",
                    anchor_value=median(raw_v),
                    anchor_unit="ms",
                    target=f"<= {limit}" if key == "s1" else "report",
                    limit=limit if key == "s1" else None,
                    note=f"{ratio:.2f}x raw"
                    + (f"; {incomplete} streams incomplete" if incomplete else ""),
                    params={
                        "streams": n,
                        "interval_s": interval,
                        "ticks": ticks,
                        "ratio_to_raw": ratio,
                        "incomplete": incomplete,
                    },
                )
            )
        if key in ("s1000", "fan1000"):
            # DESIGN §9 states this budget as a ratio: p99 within 3x of the raw stream's
            # at 1,000 streams (p50 within 2x); the per-round ratios, same server and run
            for q, limit in (("p50", 2.0), ("p99", 3.0)):
                ratios = [
                    a / b for a, b in zip(per["relay"][q], per["raw"][q], strict=True) if b > 0
                ]
                figs.append(
                    summary(
                        f"latency.{key}.{q}_ratio",
                        f"  {q}, relay / raw of the same round",
                        ratios,
                        "x",
                        anchor=f"raw StreamingResponse {q}",
                        target=f"<= {limit}",
                        limit=limit,
                        params={"streams": n, "ratios": ratios},
                    )
                )
    return figs


def run_latency(quick: bool) -> list[Figure]:
    with server() as srv:
        return asyncio.run(_latency(srv.port, quick))


# -- idle ----------------------------------------------------------------------------------


async def _idle_once(
    srv: Server, mode: str, n: int, heartbeat_s: float, hold_s: float
) -> tuple[float, int]:
    """(KiB per stream, streams held) for ``n`` idle streams on a fresh server, read once
    every stream has had a heartbeat and at least ``hold_s`` after they opened."""
    path = "relay" if mode == "relay" else "raw_idle"
    warm = await open_many(srv.port, [f"/{path}/w{i}" for i in range(20)], 20)
    for s in warm:
        s.abort()
    await asyncio.sleep(0.3)
    await request(srv.port, "POST", "/gc")
    before = rss_kib(srv.pid)
    streams = await open_many(srv.port, [f"/{path}/{i}" for i in range(n)], 200)
    try:
        deadline = time.monotonic() + heartbeat_s * 2 + 60
        readers = [asyncio.create_task(follow(s, deadline)) for s in streams]
        wait_until = time.monotonic() + hold_s
        step = min(0.2, heartbeat_s / 4)
        for _ in range(int((heartbeat_s * 3.5 + 0.5) / step) + 1):  # bounded poll
            if time.monotonic() >= wait_until and (
                sum(s.heartbeats > 0 for s in streams) >= n
                or time.monotonic() >= wait_until + max(heartbeat_s * 2, 1.0)
            ):
                break
            await asyncio.sleep(step)
        await request(srv.port, "POST", "/gc", timeout=60)
        after = rss_kib(srv.pid)
        held = sum(1 for s in streams if s.heartbeats > 0 and not s.closed)
        for task in readers:
            task.cancel()
    finally:
        for s in streams:
            s.abort()
    return (after - before) / n, held


def _idle_point(mode: str, n: int, heartbeat_s: float, hold_s: float) -> tuple[float, int]:
    with server(heartbeat_s) as srv:
        return asyncio.run(_idle_once(srv, mode, n, heartbeat_s, hold_s))


def run_idle(quick: bool) -> list[Figure]:
    plans = [("s1000", 20 if quick else 1000, 1), ("s10000", 50 if quick else 10_000, 1)]
    heartbeat_s = 0.2 if quick else 2.0
    # how long the streams are held at least (a few heartbeats), --quick: until each had one
    hold_s = 0.0 if quick else heartbeat_s * 1.5 + 0.5
    figs = []
    for key, n, n_rounds in plans:
        per: dict[str, list[float]] = {"relay": [], "raw": []}
        held: list[int] = []
        for _ in rounds(n_rounds, 120, minimum=1):
            for mode in ("raw", "relay"):
                kib, h = _idle_point(mode, n, heartbeat_s, hold_s)
                per[mode].append(kib)
                if mode == "relay":
                    held.append(h)
        figs.append(
            summary(
                f"idle.{key}",
                f"memory per idle SSE stream, {n:,} streams, heartbeat {heartbeat_s:g} s",
                per["relay"],
                "KiB",
                anchor="raw StreamingResponse",
                anchor_value=median(per["raw"]),
                anchor_unit="KiB",
                target="<= 32; all held",
                limit=32.0 if min(held, default=0) >= n else 0.0,
                note=f"held {min(held, default=0):,} of {n:,}",
                params={"streams": n, "held": min(held, default=0), "heartbeat_s": heartbeat_s},
            )
        )
    return figs


# -- ingest --------------------------------------------------------------------------------


def otlp_batch(turns: int, spans_per_turn: int) -> tuple[bytes, list[str]]:
    """An ExportTraceServiceRequest of ``turns`` whole turns (root + node spans)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    from relay import conventions as c

    def kv(key: str, value: Any) -> KeyValue:
        if isinstance(value, int):
            return KeyValue(key=key, value=AnyValue(int_value=value))
        return KeyValue(key=key, value=AnyValue(string_value=str(value)))

    spans = []
    ids = []
    t = time.time_ns()
    for _ in range(turns):
        turn_id = uuid.uuid4().hex
        ids.append(turn_id)
        trace_id = os.urandom(16)
        root_id = os.urandom(8)
        start = t
        for i in range(spans_per_turn - 1):
            spans.append(
                Span(
                    trace_id=trace_id,
                    span_id=os.urandom(8),
                    parent_span_id=root_id,
                    name="node n",
                    start_time_unix_nano=start + 1000 * (2 * i + 1),
                    end_time_unix_nano=start + 1000 * (2 * i + 2),
                    kind=Span.SPAN_KIND_INTERNAL,
                    attributes=[
                        kv(c.NODE_NAME, "n"),
                        kv(c.NODE_STEP, i + 1),
                        kv(c.NODE_TASK_ID, f"t{i}"),
                        kv(c.NODE_OUTCOME, "ok"),
                    ],
                )
            )
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=root_id,
                name="invoke_agent bench",
                start_time_unix_nano=start,
                end_time_unix_nano=start + 1000 * 2 * spans_per_turn,
                kind=Span.SPAN_KIND_INTERNAL,
                attributes=[
                    kv(c.TURN_ID, turn_id),
                    kv(c.CONVERSATION_ID, "bench"),
                    kv(c.RUN_KIND, "chat"),
                    kv(c.GRAPH_ID, "bench"),
                    kv(c.GRAPH_TOPOLOGY, '{"nodes":[],"edges":[]}'),
                    kv(c.TURN_OUTCOME, "answered"),
                    kv(c.TURN_RESPONSE, '{"status":"answered","answer":"ok"}'),
                ],
            )
        )
    req = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    )
    return req.SerializeToString(), ids


async def _ingest(port: int, quick: bool) -> list[Figure]:
    # 100-span turns, 5 per request: far fewer turns than the bus retains (1,000 finished)
    spans_per_turn = 100
    turns_per_batch = 5
    batches = 4 if quick else 40
    events_per_turn = 1 + 2 * (spans_per_turn - 1) + 1
    rates: list[float] = []
    seen_all = True
    for r in rounds(2 if quick else 3, 10 if quick else 60, minimum=1):
        payloads = [otlp_batch(turns_per_batch, spans_per_turn) for _ in range(batches)]
        ids = [t for _, batch_ids in payloads for t in batch_ids]
        queue = list(payloads)
        t0 = time.perf_counter()

        async def poster(queue: list[tuple[bytes, list[str]]] = queue) -> None:
            while queue:
                body, _ = queue.pop()
                status, text = await request(
                    port, "POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"}
                )
                if status != 200:
                    raise RuntimeError(f"/v1/traces answered {status}: {text[:200]!r}")

        await asyncio.gather(poster(), poster())
        expected = len(ids) * events_per_turn
        got = 0
        end = time.monotonic() + 30
        while time.monotonic() < end:
            _, body = await request(port, "POST", "/bus_seq", json.dumps(ids).encode())
            got = json.loads(body)["events"]
            if got >= expected:
                break
            await asyncio.sleep(0.005)
        elapsed = time.perf_counter() - t0
        seen_all = seen_all and got >= expected
        if r > 0 or quick:  # the first round warms the receiver and the store up
            rates.append(len(ids) * spans_per_turn / elapsed)
    return [
        summary(
            "ingest.otlp_http",
            f"OTLP/HTTP protobuf -> events on the bus ({turns_per_batch * spans_per_turn}"
            " spans per request, 2 connections)",
            rates,
            "spans/s",
            target=">= 20k spans/s",
            limit=20_000,
            higher_is_better=True,
            note="" if seen_all else "not every event reached the bus",
            params={"spans": batches * turns_per_batch * spans_per_turn},
        )
    ]


def run_ingest(quick: bool) -> list[Figure]:
    import importlib.util

    if importlib.util.find_spec("relay.ingest.receiver") is None:
        return [
            na("ingest.otlp_http", "OTLP receiver", "spans/s", "not built", target=">= 20k spans/s")
        ]
    with server(otlp=True) as srv:
        status, _ = asyncio.run(
            request(srv.port, "POST", "/v1/traces", b"", {"Content-Type": "application/x-protobuf"})
        )
        if status == 404:
            return [
                na(
                    "ingest.otlp_http",
                    "OTLP receiver",
                    "spans/s",
                    "no /v1/traces route (RELAY_OTLP_HTTP not wired)",
                    target=">= 20k spans/s",
                )
            ]
        return asyncio.run(_ingest(srv.port, quick))
