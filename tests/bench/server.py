"""The bench server: ``python -m tests.bench.server [--heartbeat S] [--otlp]``.

A real uvicorn on 127.0.0.1 (a port the kernel picks; printed as ``PORT <n>`` on stdout)
serving a small app built from :class:`relay.Relay`, with the routes the HTTP benchmarks
drive. Spans end in this process, on timers, so "span end -> bytes at the client" is
measured from the span's own end time (the ``ts`` of ``node_completed``).

Routes (all bench-only):

- ``GET /relay/{i}``: opens turn ``i`` on the relay's bus and returns the relay's own SSE
  stream of it (:meth:`relay.Relay.stream`); the turn's spans start when ``/go`` says;
- ``GET /raw/{i}``: the anchor: a plain Starlette ``StreamingResponse`` that writes the
  same frames (same encoder, same event payloads) from an ``asyncio.Queue``;
- ``GET /relay_fan/{group}/{i}``, ``GET /raw_fan/{group}/{i}``: the same, except that every
  stream of a ``group`` reads one turn (fan-out: one ticker, each event to every reader);
  the raw anchor puts the same frame bytes on every reader's queue;
- ``GET /raw_idle/{i}``: the idle anchor: a ``StreamingResponse`` that writes only
  heartbeats, from a sleep loop;
- ``POST /go?interval=S&ticks=N``: every registered stream gets a ticker, phases spread
  over ``interval``: per tick one node span starts and ends (relay) or the same two
  frames are queued (raw); after ``ticks`` ticks the run's root ends (``turn_completed``);
- ``GET /stats``: RSS, open streams, processor counters; ``POST /gc``: ``gc.collect()``;
- ``POST /bus_seq``: the sum of ``last_seq`` over a JSON list of turn ids (ingest).
"""

import argparse
import asyncio
import gc
import json
import os
import resource
import socket
import sys
import tempfile
import time
from typing import Any

#: open streams and memory: as many file descriptors as the hard limit allows
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (_hard, _hard))


def rss_kib(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def build_app(heartbeat_s: float, otlp: bool, data_dir: str) -> Any:
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from starlette.responses import JSONResponse, StreamingResponse

    from relay import Relay
    from relay import conventions as c
    from relay.delivery.negotiation import SSE
    from relay.delivery.streaming import STREAM_HEADERS, SSEEncoder
    from relay.events import NODE_COMPLETED, NODE_STARTED, TURN_COMPLETED, TURN_TERMINAL, Event

    env = {
        "RELAY_DATA_DIR": data_dir,
        "RELAY_HEARTBEAT_S": str(heartbeat_s),
        "RELAY_SEND_TIMEOUT_S": "30",
        "RELAY_OTLP_HTTP": "true" if otlp else "false",
        # the ingest figure is throughput: the settle window (a fixed wait before a
        # trace's events go out, docs/events.md) is latency, measured apart
        # (tests/bench/otlp_liveness.py)
        "RELAY_OTLP_SETTLE_MS": "0",
    }
    relay = Relay.from_env(env)
    provider = TracerProvider()
    provider.add_span_processor(relay.span_processor)
    tracer = provider.get_tracer("bench")
    encoder = SSEEncoder(2000)
    topology = json.dumps({"nodes": [{"id": "n", "label": "n"}], "edges": []})
    response_json = json.dumps({"status": "answered", "answer": "ok"})
    pending: list[Any] = []  # tickers waiting for /go
    streams = {"relay": 0, "raw": 0, "raw_idle": 0}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await relay.start()
        try:
            yield
        finally:
            await relay.stop()

    app = FastAPI(lifespan=lifespan)
    app.include_router(relay.router)

    class RelayTicker:
        def __init__(self, turn_id: str) -> None:
            self.turn_id = turn_id
            self.root: Any = None
            self.ctx: Any = None
            self.n = 0

        def tick(self, last: bool) -> None:
            if self.root is None:
                self.root = tracer.start_span(
                    "invoke_agent bench",
                    attributes={
                        c.TURN_ID: self.turn_id,
                        c.CONVERSATION_ID: "bench",
                        c.RUN_KIND: "chat",
                        c.GRAPH_ID: "bench",
                        c.GRAPH_TOPOLOGY: topology,
                    },
                )
                self.ctx = trace.set_span_in_context(self.root)
            self.n += 1
            span = tracer.start_span(
                "node n",
                context=self.ctx,
                attributes={c.NODE_NAME: "n", c.NODE_STEP: self.n, c.NODE_TASK_ID: f"t{self.n}"},
            )
            span.set_attribute(c.NODE_OUTCOME, "ok")
            span.end()  # stamps the span's end time: node_completed.ts
            if last:
                self.root.set_attribute(c.TURN_OUTCOME, "answered")
                self.root.set_attribute(c.TURN_RESPONSE, response_json)
                self.root.end()

    class RawTicker:
        def __init__(self, turn_id: str) -> None:
            self.turn_id = turn_id
            self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
            self.n = 0

        def _event(self, type_: str, fields: dict[str, Any]) -> Event:
            self.n += 1
            event = Event(type_, "bench", self.turn_id, "0" * 32, time.time_ns() / 1e6, fields)
            event.seq = self.n
            return event

        def tick(self, last: bool) -> None:
            step = self.n // 2 + 1
            started = self._event(
                NODE_STARTED,
                {
                    "node": "n",
                    "span_id": "0" * 16,
                    "parent_span_id": "1" * 16,
                    "step": step,
                    "task_id": f"t{step}",
                },
            )
            done = self._event(
                NODE_COMPLETED,
                {
                    "node": "n",
                    "span_id": "0" * 16,
                    "status": "ok",
                    "duration_ms": 0.01,
                    "summary": {},
                    "children": [],
                },
            )
            self.queue.put_nowait(encoder.event(started) + encoder.event(done))
            if last:
                end = self._event(TURN_COMPLETED, {"response": json.loads(response_json)})
                self.queue.put_nowait(encoder.event(end))
                self.queue.put_nowait(None)

    class RawFanTicker(RawTicker):
        """One turn's frames to many readers: each frame encoded once, on every queue."""

        def __init__(self, turn_id: str) -> None:
            super().__init__(turn_id)
            self.queues: list[asyncio.Queue[bytes | None]] = []

        def tick(self, last: bool) -> None:
            super().tick(last)
            while not self.queue.empty():
                frame = self.queue.get_nowait()
                for queue in self.queues:
                    queue.put_nowait(frame)

    fans: dict[str, Any] = {}  # group -> its ticker (relay or raw)

    def sse_headers() -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in STREAM_HEADERS}

    @app.get("/relay/{i}")
    async def relay_stream(i: str) -> Any:
        turn_id = f"{i}-{time.monotonic_ns()}"
        relay.bus.open_turn(turn_id)
        pending.append(RelayTicker(turn_id))
        streams["relay"] += 1
        response = relay.stream(turn_id, 0, SSE, stop_at=TURN_TERMINAL, on_disconnect="continue")
        return response

    @app.get("/relay_fan/{group}/{i}")
    async def relay_fan(group: str, i: str) -> Any:
        ticker = fans.get(group)
        if ticker is None:
            ticker = fans[group] = RelayTicker(f"fan-{group}")
            relay.bus.open_turn(ticker.turn_id)
            pending.append(ticker)
        streams["relay"] += 1
        return relay.stream(ticker.turn_id, 0, SSE, stop_at=TURN_TERMINAL, on_disconnect="continue")

    @app.get("/raw_fan/{group}/{i}")
    async def raw_fan(group: str, i: str) -> Any:
        ticker = fans.get(group)
        if ticker is None:
            ticker = fans[group] = RawFanTicker(f"fan-{group}")
            pending.append(ticker)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        ticker.queues.append(queue)
        streams["raw"] += 1

        async def frames() -> Any:
            yield encoder.preamble()
            while True:
                frame = await queue.get()
                if frame is None:
                    return
                yield frame

        return StreamingResponse(frames(), media_type="text/event-stream", headers=sse_headers())

    @app.get("/raw/{i}")
    async def raw_stream(i: str) -> Any:
        ticker = RawTicker(f"{i}-{time.monotonic_ns()}")
        pending.append(ticker)
        streams["raw"] += 1

        async def frames() -> Any:
            yield encoder.preamble()
            while True:
                frame = await ticker.queue.get()
                if frame is None:
                    return
                yield frame

        return StreamingResponse(frames(), media_type="text/event-stream", headers=sse_headers())

    @app.get("/raw_idle/{i}")
    async def raw_idle(i: str) -> Any:
        streams["raw_idle"] += 1

        async def beats() -> Any:
            yield encoder.preamble()
            while True:
                await asyncio.sleep(heartbeat_s)
                yield encoder.heartbeat()

        return StreamingResponse(beats(), media_type="text/event-stream", headers=sse_headers())

    @app.post("/go")
    async def go(interval: float = 0.02, ticks: int = 10) -> Any:
        loop = asyncio.get_running_loop()
        tickers = list(pending)
        pending.clear()
        n = max(1, len(tickers))

        def run(ticker: Any, left: int) -> None:
            ticker.tick(last=left == 1)
            if left > 1:
                loop.call_later(interval, run, ticker, left - 1)

        for k, ticker in enumerate(tickers):
            loop.call_later(interval * (0.5 + k / n), run, ticker, max(1, ticks))
        return JSONResponse({"started": len(tickers)})

    @app.get("/stats")
    async def stats() -> Any:
        p = relay.span_processor
        return JSONResponse(
            {
                "rss_kib": rss_kib(),
                "streams": streams,
                "dropped": p.dropped,
                "failures": p.failures,
                "tasks": len(asyncio.all_tasks()),
            }
        )

    @app.post("/gc")
    async def collect() -> Any:
        gc.collect()
        return JSONResponse({"rss_kib": rss_kib(), "tasks": len(asyncio.all_tasks())})

    @app.post("/bus_seq")
    async def bus_seq(request: Request) -> Any:
        ids = json.loads(await request.body())
        return JSONResponse({"events": sum(relay.bus.last_seq(t) for t in ids)})

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heartbeat", type=float, default=15.0)
    parser.add_argument("--otlp", action="store_true")
    args = parser.parse_args()
    import uvicorn

    from relay.cli import RelayServer

    with tempfile.TemporaryDirectory(prefix="bench-server-") as data_dir:
        app = build_app(args.heartbeat, args.otlp, data_dir)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            backlog=4096,
            timeout_keep_alive=30,
            timeout_graceful_shutdown=1,
        )
        server = RelayServer(config)  # as `span-relay serve` runs it (the heap frozen)
        print(f"PORT {sock.getsockname()[1]} PID {os.getpid()}", flush=True)
        try:
            asyncio.run(server.serve(sockets=[sock]))
        finally:
            sys.stdout.flush()


if __name__ == "__main__":
    main()
