"""python -m tests.bench.peer [--quick] [--json] [--markdown] [--seed N]  (make bench-peer)

span-relay and the LangGraph Agent Server (``langgraph dev``, its in-memory runtime, from
its own throwaway venv: servers.py) serve the same graphs (graphs.py, langgraph.json) on
127.0.0.1; the same client code (client.py) drives both; one table of both figures and
their ratio (ours/peer). A full run takes a few minutes (plus the peer's install, once);
``--quick`` is a smoke run at small sizes. The exit status is 0 whatever the figures say.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from tests.bench.peer import figures, report, servers
from tests.bench.peer.client import Peer, Relay

FULL = {
    "per_round": 10,
    "rounds": 3,
    "workers": 100,
    "per_worker": 2,
    "conc_rounds": 2,
    "idle": 500,
    "cuts": 12,
}
QUICK = {
    "per_round": 2,
    "rounds": 2,
    "workers": 10,
    "per_worker": 1,
    "conc_rounds": 1,
    "idle": 20,
    "cuts": 2,
}


async def measure(sides: list[figures.Side], size: dict[str, int], seed: int) -> dict[str, Any]:
    for side in sides:  # warm-up: imports, first compilation, connection pools
        for graph in ("trivial", "tokens", "trivial", "tokens"):
            await figures.turn(side, graph)
        side.broken.clear()
    report.log("sequential turns")
    seq = {
        graph: await figures.sequential(
            sides, graph, size["per_round"], size["rounds"], deadline_s=120
        )
        for graph in ("trivial", "tokens")
    }
    report.log("reconnects")
    per_run = {s.name: int(seq["tokens"][s.name]["events_per_turn"] or 80) for s in sides}
    resumed = {
        s.name: await figures.reconnects(s, size["cuts"], seed, per_run[s.name], deadline_s=90)
        for s in sides
    }
    report.log("concurrent turns")
    conc = await figures.concurrent_ab(
        sides, "tokens", size["workers"], size["per_worker"], size["conc_rounds"], deadline_s=120
    )
    report.log("idle streams")
    idle = {s.name: await figures.idle_streams(s, size["idle"]) for s in sides}
    return {
        "sequential": seq,
        "reconnect": resumed,
        "concurrent": conc,
        "idle": idle,
        "broken": {s.name: s.broken[:20] for s in sides},
        "broken_count": {s.name: len(s.broken) for s in sides},
    }


async def run(size: dict[str, int], seed: int) -> dict[str, Any]:
    logs = servers.ROOT / ".span-relay" / "bench-peer-logs"
    logs.mkdir(parents=True, exist_ok=True)
    servers.raise_fd_limit()
    exe = servers.ensure_peer_venv(logs / "peer-install.log")
    started: list[servers.Server] = []
    try:
        report.log("starting span-relay and the peer")
        started.append(servers.start_relay(logs))
        started.append(servers.start_peer(exe, logs))
        sides = [
            figures.Side(Relay(), started[0], figures.client_for(started[0])),
            figures.Side(Peer(), started[1], figures.client_for(started[1])),
        ]
        try:
            data = await measure(sides, size, seed)
        finally:
            for side in sides:
                await side.client.aclose()
        data["logs"] = str(logs)
        return data
    finally:
        for server in started:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    args = report.arguments("python -m tests.bench.peer", __doc__, 18, argv)
    size = QUICK if args.quick else FULL
    meta = report.machine()
    t0 = time.monotonic()
    data = asyncio.run(run(size, args.seed))
    meta["elapsed_s"] = round(time.monotonic() - t0, 1)
    meta["loadavg_end"] = os.getloadavg()
    meta["sizes"] = size
    table_rows = report.rows(
        data["sequential"],
        data["concurrent"],
        data["idle"],
        data["reconnect"],
        data["broken_count"],
        size["workers"],
        size["idle"],
    )
    if args.json:
        print(
            json.dumps(
                {"meta": meta, "rows": [r.as_dict() for r in table_rows], "raw": data},
                indent=1,
                default=str,
            )
        )
        return 0
    print(
        f"machine: nproc={meta['nproc']}, Python {meta['python']}, {meta['platform']}; "
        f"load {meta['loadavg_start'][0]:.1f} -> {meta['loadavg_end'][0]:.1f}"
    )
    print(f"date: {meta['date']}; elapsed {meta['elapsed_s']} s; peer: " + ", ".join(meta["peer"]))
    print(report.table(table_rows, markdown=args.markdown))
    for name, problems in data["broken"].items():
        for problem in problems[:5]:
            print(f"{name}: turn not whole: {problem}")
    print(f"server logs: {data['logs']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
