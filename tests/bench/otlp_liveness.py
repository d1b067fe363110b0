"""How live a turn received over OTLP is, per exporter setting (docs/events.md,
"Receiving spans over OTLP"): ``python -m tests.bench.otlp_liveness [--runs N]``.

A relay-only server (in this process, on a real uvicorn) and an agent that exports the
made-up graph's spans over OTLP/HTTP with the Python SDK: ``BatchSpanProcessor`` at its
default schedule delay (5000 ms), at ``OTEL_BSP_SCHEDULE_DELAY=100``, and
``SimpleSpanProcessor``; each with and without start markers. Printed per setting, the
median over N runs of: node end -> its ``node_completed`` at a reader, and node start ->
its ``node_started`` at a reader. The relay's settle window (RELAY_OTLP_SETTLE_MS,
default 250) is part of the figures without start markers (the run's spans wait for its
root); with them, a span whose parent started goes out as it arrives. Not part of
``make test``: it reports.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from tests.conftest import LiveServer
from tests.interop.spans import made_up_run

SETTINGS = (
    ("batch, default 5000 ms", "batch", 5000),
    ("batch, 100 ms", "batch", 100),
    ("simple", "simple", 0),
)


def _reader(url: str, arrived: dict[str, float], done: threading.Event) -> None:
    with httpx.Client(timeout=60) as client, client.stream("GET", url + "?wait=60") as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                key = f"{event['type']}:{event.get('node')}"
                arrived.setdefault(key, time.time())
                if event["type"] in ("turn_completed", "error"):
                    break
    done.set()


def one_run(server: LiveServer, kind: str, delay_ms: int, markers: bool) -> dict[str, float]:
    exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces")
    processor = (
        BatchSpanProcessor(exporter, schedule_delay_millis=delay_ms)
        if kind == "batch"
        else SimpleSpanProcessor(exporter)
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "liveness"}))
    provider.add_span_processor(processor)
    turn_id = uuid.uuid4().hex
    arrived: dict[str, float] = {}
    done = threading.Event()
    threading.Thread(
        target=_reader, args=(f"{server.url}/turns/{turn_id}/events", arrived, done), daemon=True
    ).start()
    marks: dict[str, float] = {}

    def running(node: str) -> None:
        marks[f"start:{node}"] = time.time()
        time.sleep(0.5)  # the node's work: long enough for a start marker to matter

    made_up_run(provider, turn_id=turn_id, markers=markers, while_running=running)
    ended = time.time()  # the run (and its last node) just ended
    done.wait(60)
    provider.shutdown()
    return {
        "end_to_completed_ms": (arrived["node_completed:act"] - ended) * 1000,
        "start_to_started_ms": (arrived["node_started:act"] - marks["start:act"]) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.otlp_liveness")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    from relay.cli.relay_only import create_relay_app

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        {"RELAY_DATA_DIR": tempfile.mkdtemp(prefix="liveness-"), "OTEL_TRACES_EXPORTER": "none"}
    )
    server = LiveServer(create_relay_app(env)).start()
    settle = server.relay.settings.otlp_settle_ms
    try:
        print(f"RELAY_OTLP_SETTLE_MS={settle:g}; median of {args.runs} run(s), ms")
        print(
            f"{'exporter':<26}{'markers':<9}{'node end -> completed':>24}"
            f"{'node start -> started':>24}"
        )
        for label, kind, delay in SETTINGS:
            for markers in (False, True):
                runs: list[dict[str, Any]] = [
                    one_run(server, kind, delay, markers) for _ in range(args.runs)
                ]
                done = statistics.median(r["end_to_completed_ms"] for r in runs)
                started = statistics.median(r["start_to_started_ms"] for r in runs)
                print(f"{label:<26}{'yes' if markers else 'no':<9}{done:>24.0f}{started:>24.0f}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
