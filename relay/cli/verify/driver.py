"""verify-stream's HTTP driver: one turn through ``URL/chat``, every frame timed on arrival.

POSTs ``URL/chat`` with ``Accept: text/event-stream`` (and, unless told not to, the
``X-Relay-Fault`` header that slows one node down), stamps every SSE frame with a
monotonic clock as the bytes come off the socket, stops at the turn's terminal event, then
hands the frames to :func:`relay.cli.verify.verdict.analyse`. Connection failures, non-2xx
answers and bodies that are not an event stream are reported as ``http_error``.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from relay.cli.verify.report import EXIT_HTTP_ERROR, StreamReport, finish
from relay.cli.verify.sse import Frame, SSEParser
from relay.cli.verify.verdict import DEFAULT_MIN_SPREAD_S, TERMINAL_TYPES, analyse

DEFAULT_MESSAGE = "How do refunds work?"
DEFAULT_SLOW_NODE = "generate"
DEFAULT_DELAY_S = 0.5
DEFAULT_TIMEOUT_S = 60.0

# Response headers worth showing when a stream misbehaves.
INTERESTING_HEADERS = (
    "content-type",
    "cache-control",
    "x-accel-buffering",
    "content-encoding",
    "transfer-encoding",
    "content-length",
    "server",
    "via",
    "cf-ray",
    "x-cloud-trace-context",
)


def chat_url(url: str) -> str:
    base = url.rstrip("/")
    return base if base.endswith("/chat") else base + "/chat"


async def verify_stream(
    url: str,
    *,
    message: str = DEFAULT_MESSAGE,
    token: str | None = None,
    deadline_s: float = DEFAULT_TIMEOUT_S,
    slow_node: str | None = DEFAULT_SLOW_NODE,
    delay: float = DEFAULT_DELAY_S,
    min_spread_s: float = DEFAULT_MIN_SPREAD_S,
    extra_headers: dict[str, str] | None = None,
    verify_tls: bool = True,
) -> StreamReport:
    """Run one turn through ``url`` and report how its events were delivered."""
    target = chat_url(url)
    report = StreamReport(url=target, verdict="http_error", exit_code=EXIT_HTTP_ERROR)
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if slow_node and delay > 0:
        report.fault_header = f"{slow_node}=delay:{delay:g}"
        headers["X-Relay-Fault"] = report.fault_header
    headers.update(extra_headers or {})

    frames: list[Frame] = []
    parser = SSEParser()
    clock = time.perf_counter
    t0 = clock()
    client_timeout = httpx.Timeout(connect=min(10.0, deadline_s), read=None, write=10.0, pool=10.0)
    try:
        async with asyncio.timeout(deadline_s):
            async with httpx.AsyncClient(timeout=client_timeout, verify=verify_tls) as client:
                t0 = clock()
                body = {"message": message}
                async with client.stream("POST", target, json=body, headers=headers) as resp:
                    report.time_to_headers_s = round(clock() - t0, 6)
                    report.status_code = resp.status_code
                    report.headers = {
                        h: resp.headers[h] for h in INTERESTING_HEADERS if h in resp.headers
                    }
                    ctype = resp.headers.get("content-type", "")
                    if resp.status_code >= 400 or not ctype.startswith("text/event-stream"):
                        text = (await resp.aread())[:500].decode("utf-8", "replace").strip()
                        if resp.status_code >= 400:
                            report.error = f"HTTP {resp.status_code}: {text}"
                        else:
                            report.error = (
                                f"not an event stream (Content-Type: {ctype or 'none'}): {text}"
                            )
                        report.evidence.append(report.error)
                        return finish(report, "http_error")
                    chunk = 0
                    async for data in resp.aiter_bytes():
                        now = clock() - t0
                        if not data:
                            continue
                        if report.time_to_first_byte_s is None:
                            report.time_to_first_byte_s = round(now, 6)
                        report.body_bytes += len(data)
                        new = parser.feed(data, now, chunk)
                        chunk += 1
                        report.body_chunks = chunk
                        frames.extend(new)
                        if any(f.kind == "event" and f.type in TERMINAL_TYPES for f in new):
                            break
    except TimeoutError:
        report.error = f"timed out after {deadline_s:g} s"
    except httpx.HTTPError as exc:
        report.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if report.status_code is None:
            report.evidence.append(f"request failed: {report.error}")
            report.duration_s = round(clock() - t0, 6)
            return finish(report, "http_error")
    report.duration_s = round(clock() - t0, 6)
    return analyse(report, frames, slow_node=slow_node, delay=delay, min_spread_s=min_spread_s)
