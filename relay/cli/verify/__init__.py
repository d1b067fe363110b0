"""verify-stream: check that a deployed relay streams a turn incrementally (the command line).

Usage (wired in as ``span-relay verify-stream``; also ``python -m relay.cli.verify``)::

    span-relay verify-stream URL [--message M] [--token T] [--json] [--timeout S]
                             [--slow-node NODE] [--delay S] [--no-slow-node]

It POSTs ``URL/chat`` with ``Accept: text/event-stream``, stamps the arrival of every SSE
frame as the bytes come off the socket, and compares the arrival gaps with the gaps between
the events' own ``ts`` (epoch ms of the span time that produced each event). A path that
streams delivers each event about when its span happened; a buffering proxy (nginx with
``proxy_buffering``, a compressing CDN, ...) holds the early events back and delivers them
in a bunch at the end.

A fast turn (a few ms from first to last event) cannot show buffering, so by default the
tool asks the server to slow one node down: it sends ``X-Relay-Fault: generate=delay:0.5``
(``--slow-node``/``--delay``), which the server honours only when it runs with
``RELAY_FAULTS=1``. When the server ignores the header the tool says so and judges by
the turn's own ``ts`` spread; if that is too small to tell, the verdict is
``inconclusive``.

This module is the argparse front and :func:`main`; the parts: :mod:`.sse` (the SSE
parser), :mod:`.driver` (the HTTP client), :mod:`.verdict` (the pure analysis),
:mod:`.report` (the report, its exit codes, text and JSON output).

Exit codes: 0 incremental, 10 buffered, 11 no terminal event (stream cut, timed out or
closed early), 12 HTTP error (connection failed, non-2xx status, not an event stream),
13 inconclusive (turn too fast to judge), 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from relay.cli.verify.driver import (
    DEFAULT_DELAY_S,
    DEFAULT_MESSAGE,
    DEFAULT_SLOW_NODE,
    DEFAULT_TIMEOUT_S,
    INTERESTING_HEADERS,
    chat_url,
    verify_stream,
)
from relay.cli.verify.report import (
    EXIT_BUFFERED,
    EXIT_CODES,
    EXIT_HTTP_ERROR,
    EXIT_INCONCLUSIVE,
    EXIT_INCREMENTAL,
    EXIT_NO_TERMINAL,
    StreamReport,
    format_report,
)
from relay.cli.verify.sse import Frame, SSEParser
from relay.cli.verify.verdict import (
    BURST_WINDOW_S,
    DEFAULT_MIN_SPREAD_S,
    HOLD_FRACTION,
    HOLD_MAX_S,
    HOLD_MIN_S,
    TERMINAL_TYPES,
    Gap,
    Judgement,
    analyse,
    judge,
)

#: the name this function had when verify-stream was one module (the unit tests call it)
_analyse = analyse

__all__ = [
    "BURST_WINDOW_S",
    "DEFAULT_DELAY_S",
    "DEFAULT_MESSAGE",
    "DEFAULT_MIN_SPREAD_S",
    "DEFAULT_SLOW_NODE",
    "DEFAULT_TIMEOUT_S",
    "EXIT_BUFFERED",
    "EXIT_CODES",
    "EXIT_HTTP_ERROR",
    "EXIT_INCONCLUSIVE",
    "EXIT_INCREMENTAL",
    "EXIT_NO_TERMINAL",
    "HOLD_FRACTION",
    "HOLD_MAX_S",
    "HOLD_MIN_S",
    "INTERESTING_HEADERS",
    "TERMINAL_TYPES",
    "Frame",
    "Gap",
    "Judgement",
    "SSEParser",
    "StreamReport",
    "analyse",
    "build_parser",
    "chat_url",
    "format_report",
    "judge",
    "main",
    "verify_stream",
]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="span-relay verify-stream",
        description="Run one turn through a deployed relay and check that its events "
        "stream incrementally.",
        epilog="Exit codes: 0 incremental, 10 buffered, 11 no terminal event, "
        "12 HTTP error, 13 inconclusive, 2 usage.",
    )
    p.add_argument(
        "url", help="base URL of the relay (or of the proxy in front of it); POSTs URL/chat"
    )
    p.add_argument(
        "--message", default=DEFAULT_MESSAGE, help=f"chat message (default: {DEFAULT_MESSAGE!r})"
    )
    p.add_argument(
        "--token",
        default=os.environ.get("RELAY_API_TOKEN"),
        help="bearer token (default: $RELAY_API_TOKEN)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds for the whole turn (default 60)",
    )
    p.add_argument(
        "--slow-node",
        default=DEFAULT_SLOW_NODE,
        help="node to slow down with X-Relay-Fault so that buffering shows even on a fast "
        "turn (default: generate; honoured only by a server run with RELAY_FAULTS=1)",
    )
    p.add_argument(
        "--delay",
        type=float,
        default=DEFAULT_DELAY_S,
        help="seconds of delay for --slow-node (default 0.5)",
    )
    p.add_argument(
        "--no-slow-node",
        action="store_true",
        help="send no fault header; judge by the turn's own ts spread",
    )
    p.add_argument(
        "--min-spread",
        type=float,
        default=DEFAULT_MIN_SPREAD_S,
        help="seconds of ts spread needed to judge (default 0.3); below: inconclusive",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="extra request header (repeatable)",
    )
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    extra: dict[str, str] = {}
    for item in args.header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            print(f"verify-stream: bad --header {item!r}, expected NAME:VALUE", file=sys.stderr)
            return 2
        extra[name.strip()] = value.strip()
    report = asyncio.run(
        verify_stream(
            args.url,
            message=args.message,
            token=args.token,
            deadline_s=args.timeout,
            slow_node=None if args.no_slow_node else args.slow_node,
            delay=args.delay,
            min_spread_s=args.min_spread,
            extra_headers=extra,
            verify_tls=not args.insecure,
        )
    )
    print(report.to_json() if args.json else format_report(report))
    return report.exit_code
