"""The memory bench: ``span-relay serve``'s RSS before, at its peak during, and after a
burst of maximum-size request bodies (``--only memory``; issue 31).

A real ``span-relay serve`` subprocess (the demo, the OTLP/HTTP receiver on) is sent
``rounds`` waves of ``concurrency`` requests each, every body at (or just under, or over)
its limit: trace files of RELAY_IMPORT_MAX_BYTES for ``POST /imports`` (one JSON document
of millions of small values: the parse is the peak), OTLP/JSON and protobuf bodies of
RELAY_OTLP_MAX_BYTES for ``POST /v1/traces``, a gzip bomb that inflates past it, a chunked
body of several times the import limit with no Content-Length (read until over, then
413), and ``/chat`` bodies of RELAY_MAX_BODY_BYTES. Every answer is a 4xx; what matters
is the process's RSS (``/proc/PID/status``), sampled every 20 ms: before the burst, the
peak during it, and after it (the server idle for ``settle_s``).
``--quick`` aims at import and OTLP limits an eighth of the defaults (:data:`QUICK`):
the same bodies and answers, at a smoke test's size.

``python -m tests.bench.bench_memory [ENV=VALUE ...]`` prints the three numbers for a
server started with those extra environment variables (how the allocator settings were
compared: docs/performance.md).
"""

from __future__ import annotations

import asyncio
import gzip
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from tempfile import TemporaryDirectory
from typing import Any

import httpx

from tests.bench.harness import ROOT, Figure, stop_process
from tests.bench.server import rss_kib

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """The body limits the burst aims at, said to the server as its settings."""

    #: RELAY_IMPORT_MAX_BYTES
    import_max: int
    #: RELAY_OTLP_MAX_BYTES
    otlp_max: int
    #: RELAY_MAX_BODY_BYTES
    body_max: int


#: the settings' defaults: what the bench measures
DEFAULTS = Limits(import_max=32 * MIB, otlp_max=8 * MIB, body_max=64 * 1024)
#: ``--quick`` (the smoke test): the same bodies, the import and OTLP ones at an eighth of
#: their limits (the body limit stays: the client-tool result limit is below it)
QUICK = Limits(import_max=4 * MIB, otlp_max=1 * MIB, body_max=64 * 1024)


@dataclass
class Burst:
    before_mib: float
    peak_mib: float
    after_mib: float
    statuses: dict[int, int]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(
    env: dict[str, str], limits: Limits = DEFAULTS
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``span-relay serve`` on a free port of 127.0.0.1 with ``limits``, ready; its
    process and URL."""
    port = _free_port()
    with TemporaryDirectory() as data:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
        environ.update(
            {
                "RELAY_DATA_DIR": data,
                "OTEL_TRACES_EXPORTER": "none",
                "RELAY_OTLP_HTTP": "true",
                "RELAY_IMPORT_MAX_BYTES": str(limits.import_max),
                "RELAY_OTLP_MAX_BYTES": str(limits.otlp_max),
                "RELAY_MAX_BODY_BYTES": str(limits.body_max),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), environ.get("PYTHONPATH")])),
                **env,
            }
        )
        cmd = [sys.executable, "-m", "relay.cli", "serve", "--port", str(port)]
        cmd += ["--log-level", "warning"]
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"span-relay serve exited: {proc.stderr.read()!r}")
                try:
                    if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("span-relay serve was not ready in 60 s")
                time.sleep(0.1)
            yield proc, url
        finally:
            stop_process(proc, 10, 5)


def bodies(limits: Limits = DEFAULTS) -> list[tuple[str, dict[str, str], Any]]:
    """(path, headers, body) of every request of one wave: each at its limit."""
    import_max, otlp_max, body_max = limits.import_max, limits.otlp_max, limits.body_max
    # a JSON document of millions of small values, just under the limit: parsed whole
    numbers = b'{"resourceSpans":[[' + b"0," * ((import_max - 64) // 2) + b"0]]}"
    otlp_json = b'{"resourceSpans":[[' + b"0," * ((otlp_max - 64) // 2) + b"0]]}"
    otlp_proto = b"\x0a\xff\xff\xff\x03" + b"\x00" * (otlp_max - 16)
    bomb = gzip.compress(b"\x00" * (4 * otlp_max))
    chat = b'{"message":"' + b"x" * (body_max - 32) + b'"}'

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: read until over
        piece = b"0," * (MIB // 2)
        for _ in range(3 * import_max // MIB):
            yield piece

    json_type = {"Content-Type": "application/json"}
    return [
        ("/v1/traces", json_type, _topology_span(otlp_max)),
        ("/imports", json_type, _topology_span(import_max)),
        ("/imports", json_type, numbers),
        ("/imports", json_type, chunked),
        ("/v1/traces", json_type, otlp_json),
        ("/v1/traces", {"Content-Type": "application/x-protobuf"}, otlp_proto),
        ("/v1/traces", {**json_type, "Content-Encoding": "gzip"}, bomb),
        ("/chat", json_type, chat),
    ]


def _topology_span(limit: int) -> bytes:
    """An OTLP/JSON run root (a turn of its own) whose ``relay.graph.topology`` holds as
    many nodes as fit under ``limit``: the receiver and the replay parse it."""
    import json
    import uuid

    nodes = (limit - 4096) // 40
    topology = json.dumps(
        {"nodes": [{"id": f"n{i}"} for i in range(nodes)], "edges": []}, separators=(",", ":")
    )
    now = time.time_ns()
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "relay.turn.id": uuid.uuid4().hex,
        "gen_ai.conversation.id": uuid.uuid4().hex,
        "relay.run.kind": "chat",
        "relay.graph.id": "bench",
        "relay.graph.topology": topology,
    }
    span = {
        "traceId": uuid.uuid4().hex,
        "spanId": uuid.uuid4().hex[:16],
        "name": "invoke_agent bench",
        "kind": 1,
        "startTimeUnixNano": str(now),
        "endTimeUnixNano": str(now + 1000),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [span]}]}]}
    body = json.dumps(doc, separators=(",", ":")).encode()
    assert len(body) <= limit, (len(body), limit)
    return body


async def _wave(url: str, concurrency: int, statuses: dict[int, int], limits: Limits) -> None:
    requests = bodies(limits)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        sem = asyncio.Semaphore(concurrency)

        async def send(path: str, headers: dict[str, str], body: Any) -> None:
            async with sem:
                content = body() if callable(body) else body
                try:
                    r = await client.post(path, content=content, headers=headers)
                    status = r.status_code
                except httpx.HTTPError:  # answered (413) and closed before all was sent
                    status = 0
                statuses[status] = statuses.get(status, 0) + 1

        await asyncio.gather(*(send(*req) for req in requests * concurrency))


def burst(
    env: dict[str, str],
    rounds: int,
    concurrency: int,
    settle_s: float,
    limits: Limits = DEFAULTS,
) -> Burst:
    """One server, ``rounds`` waves; RSS before, peak, after ``settle_s`` idle."""
    with serve(env, limits) as (proc, url):
        time.sleep(settle_s)
        before = rss_kib(proc.pid)
        peak = before
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, rss_kib(proc.pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        statuses: dict[int, int] = {}
        try:
            for _ in range(rounds):
                asyncio.run(_wave(url, concurrency, statuses, limits))
        finally:
            time.sleep(settle_s)
            stop.set()
            sampler.join()
        after = rss_kib(proc.pid)
    return Burst(before / 1024, peak / 1024, after / 1024, statuses)


def run_memory(quick: bool) -> list[Figure]:
    rounds, concurrency, settle_s = (1, 1, 0.2) if quick else (3, 4, 3.0)
    limits = QUICK if quick else DEFAULTS
    got = burst({}, rounds, concurrency, settle_s, limits)
    note = (
        f"before {got.before_mib:.0f} / peak {got.peak_mib:.0f} / after {got.after_mib:.0f} MiB"
        f"; answers {dict(sorted(got.statuses.items()))}"
    )
    return [
        Figure(
            "memory.oversized_rss_mb",
            f"serve's RSS after {rounds}x{concurrency} waves of max-size bodies",
            got.after_mib,
            "MiB",
            lo=got.after_mib,  # one measurement: before and peak are in the note
            hi=got.after_mib,
            rounds=rounds,
            anchor="RSS before",
            anchor_value=got.before_mib,
            anchor_unit="MiB",
            note=note,
            params={
                "before_mib": round(got.before_mib, 1),
                "peak_mib": round(got.peak_mib, 1),
                "after_mib": round(got.after_mib, 1),
                "statuses": got.statuses,
                "rounds": rounds,
                "concurrency": concurrency,
                "limits": asdict(limits),
            },
        )
    ]


def main(argv: list[str]) -> None:
    env = dict(arg.split("=", 1) for arg in argv)
    got = burst(env, int(os.environ.get("MEM_ROUNDS", "3")), int(os.environ.get("MEM_C", "4")), 3.0)
    print(
        f"{' '.join(argv) or '(defaults)'}: before {got.before_mib:.1f} / peak "
        f"{got.peak_mib:.1f} / after {got.after_mib:.1f} MiB; {got.statuses}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
