"""python -m tests.bench [--quick] [--json] [--only ID[,ID]]

Runs the relay's benchmarks (GitHub issue 8, DESIGN.md §9) and prints a table; ``--json``
prints the same figures as JSON instead. ``--quick`` is a smoke run of a few seconds at
small sizes, with no thresholds. IDs: overhead, per_event, latency, idle, bus, ingest,
replay, realistic, startup (``import relay`` and ``span-relay --help`` in fresh
processes, beside ``import langgraph.graph``: tests/bench/bench_startup.py); and, only
when named with ``--only``, workers (``serve --workers 1`` against 2 on Redis and
PostgreSQL: tests/bench/bench_workers.py), soak (20 waves of 150 concurrent demo
turns, RSS and what the retention holds per wave: tests/bench/bench_soak.py) and memory
(``span-relay serve``'s RSS before, at its peak during and after a burst of maximum-size
bodies: tests/bench/bench_memory.py) and recovery (kill -9 of the replica running a turn
-> the next event a reader on the other replica gets, p50 and p99 over 20 kills:
tests/bench/bench_takeover.py).
A full run takes a few minutes; the exit status is 0 whatever the figures say (a bench
reports, the smoke test and the humans judge).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable

from tests.bench.harness import (
    EXPECTED_KEYS,
    MEMORY_KEYS,
    SOAK_KEYS,
    Figure,
    as_json,
    machine,
    na,
    table,
)

IDS = (
    "overhead",
    "per_event",
    "latency",
    "idle",
    "bus",
    "ingest",
    "replay",
    "realistic",
    "startup",
)
#: run only when named (--only): they need services, or minutes of their own
OPT_IN = ("workers", "soak", "memory", "recovery")


def _runners() -> dict[str, Callable[[bool], list[Figure]]]:
    from tests.bench import (
        bench_events,
        bench_http,
        bench_memory,
        bench_overhead,
        bench_soak,
        bench_startup,
        bench_takeover,
        bench_workers,
    )

    return {
        "overhead": bench_overhead.run_overhead,
        "per_event": bench_events.run_per_event,
        "latency": bench_http.run_latency,
        "idle": bench_http.run_idle,
        "bus": bench_events.run_bus,
        "ingest": bench_http.run_ingest,
        "replay": bench_events.run_replay,
        "realistic": bench_overhead.run_realistic,
        "startup": bench_startup.run_startup,
        "workers": bench_workers.run_workers,
        "soak": bench_soak.run_soak,
        "memory": bench_memory.run_memory,
        "recovery": bench_takeover.run_recovery,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: small, no thresholds")
    parser.add_argument("--json", action="store_true", help="print JSON, not a table")
    parser.add_argument("--only", default="", help="comma-separated ids: " + ",".join(IDS + OPT_IN))
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()] or list(IDS)
    unknown = [s for s in only if s not in IDS + OPT_IN]
    if unknown:
        parser.error(f"unknown id(s) {', '.join(unknown)}; choose from {', '.join(IDS + OPT_IN)}")

    meta = machine()
    meta["quick"] = args.quick
    meta["only"] = only
    runners = _runners()
    figures: list[Figure] = []
    timings: dict[str, float] = {}
    t_all = time.monotonic()
    for bench_id in IDS + OPT_IN:
        if bench_id not in only:
            continue
        t0 = time.monotonic()
        if not args.json:
            print(f"# {bench_id} ...", file=sys.stderr, flush=True)
        try:
            figures.extend(runners[bench_id](args.quick))
        except Exception as exc:  # one broken bench must not hide the others
            traceback.print_exc(file=sys.stderr)
            for key in EXPECTED_KEYS + SOAK_KEYS + MEMORY_KEYS:
                if key.split(".", 1)[0] == bench_id:
                    figures.append(na(key, key, "", f"failed: {type(exc).__name__}: {exc}"))
        timings[bench_id] = round(time.monotonic() - t0, 1)
    meta["elapsed_s"] = round(time.monotonic() - t_all, 1)
    meta["elapsed_by_id_s"] = timings
    meta["loadavg_end"] = machine()["loadavg_start"]
    if args.json:
        print(json.dumps(as_json(figures, meta), indent=1))
    else:
        print(f"machine: nproc={meta['nproc']}, Python {meta['python']}, {meta['platform']}")
        print(
            f"date: {meta['date']}; command: {meta['command']}; elapsed {meta['elapsed_s']} s "
            f"({', '.join(f'{k} {v}s' for k, v in timings.items())})"
        )
        print(f"load average at start {meta['loadavg_start']}, at end {meta['loadavg_end']}")
        print(table(figures, args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
