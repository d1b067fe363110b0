"""First byte under load, two span-relay trees side by side (issue 18's first-byte row).

``python -m tests.bench.peer.firstbyte --base /path/to/other/checkout``: starts
``span-relay serve --config langgraph.json`` from this checkout and from ``--base`` (each
with its own data directory on the same disk), and runs ``--workers`` concurrent clients
of the `tokens` graph, ``--per-worker`` streamed turns each, against each tree in turn
(A B B A ...; the machine is shared, so only the ratios mean much). Prints first byte and
first token (p50, p99) and turns/s per tree, and this tree's ratio to the base.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.bench.peer import figures, servers
from tests.bench.peer.client import Relay


async def _rounds(
    sides: list[figures.Side], workers: int, per_worker: int, rounds: int
) -> dict[str, dict[str, Any]]:
    for side in sides:  # warm-up: imports, first compilation, connection pools
        for graph in ("tokens", "tokens"):
            await figures.turn(side, graph)
        side.broken.clear()
    return await figures.concurrent_ab(sides, "tokens", workers, per_worker, rounds, deadline_s=180)


def _named(name: str) -> Relay:
    dialect = Relay()
    dialect.name = name
    return dialect


def _row(name: str, got: dict[str, Any]) -> dict[str, float]:
    fb = got["first_byte_ms"]
    ft = got["first_token_ms"]
    return {
        "fb50": figures.pct(fb, 50) or 0.0,
        "fb99": figures.pct(fb, 99) or 0.0,
        "ft50": figures.pct(ft, 50) or 0.0,
        "ft99": figures.pct(ft, 99) or 0.0,
        "tps": got["turns_per_s"],
        "turns": got["turns"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.peer.firstbyte",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base", type=Path, required=True, help="the other checkout")
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--per-worker", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="A B rounds (alternating)")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="bench-firstbyte-"))
    servers.raise_fd_limit()
    started = [
        servers.start_relay(logs, args.base.resolve(), "base"),
        servers.start_relay(logs, servers.ROOT, "this"),
    ]
    try:
        sides = [figures.Side(_named(s.name), s, figures.client_for(s)) for s in started]
        data = asyncio.run(_rounds(sides, args.workers, args.per_worker, args.rounds))
    finally:
        for s in started:
            s.stop()
    rows = {name: _row(name, got) for name, got in data.items()}
    print(
        f"{args.workers} concurrent streamed `tokens` turns, {args.rounds} rounds "
        f"alternating; logs in {logs}"
    )
    print(
        f"{'':>6} {'first byte p50':>15} {'p99':>8} {'first token p50':>16} {'p99':>8} "
        f"{'turns/s':>8} {'turns':>6}"
    )
    for name, r in rows.items():
        print(
            f"{name:>6} {r['fb50']:>13.0f}ms {r['fb99']:>6.0f}ms {r['ft50']:>14.0f}ms "
            f"{r['ft99']:>6.0f}ms {r['tps']:>8.2f} {r['turns']:>6.0f}"
        )
    a = rows["this"]
    b = rows["base"]
    print(
        f"{'ratio':>6} {a['fb50'] / max(b['fb50'], 1e-9):>15.2f} "
        f"{a['fb99'] / max(b['fb99'], 1e-9):>8.2f} {a['ft50'] / max(b['ft50'], 1e-9):>16.2f} "
        f"{a['ft99'] / max(b['ft99'], 1e-9):>8.2f} {a['tps'] / max(b['tps'], 1e-9):>8.2f}"
    )
    broken = [f"{s.name}: {p}" for s in sides for p in s.broken]
    if broken:
        print(f"broken turns: {len(broken)}; first: {broken[:3]}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
