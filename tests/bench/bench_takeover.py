"""recovery: how long a turn whose process died waits for another replica to take it over.

Two replicas (``span-relay serve --graph``, real processes) share Redis (the bus) and a
fresh PostgreSQL database (turn records, checkpoints), with the default lease
(``RELAY_LEASE_S`` 15 s; ``--quick``: 2 s and 2 kills). The graph's one node waits on a
file (tests/replicas/processes.py), so each turn is inside its node when it is killed.
A kill: a turn starts on replica A (a new process, a new instance id each time), a reader
follows it on replica B, A is killed (``kill -9``) once the reader has its
``node_started``; measured: kill -> the first event the reader gets after it: the
recovered run's ``turn_recovered`` (relay/turns/recovering.py: the node runs no tool, so
the claimer takes the turn up from its checkpoint), after which the node is let go and
the turn answers on B. p50 and p99 over 20 kills, beside the lease they are bounded by (a
lease not renewed, then a sweep every 1.5-3.5 s).

Needs Redis (RELAY_TEST_REDIS) and PostgreSQL (RELAY_TEST_POSTGRES); without them every
figure is n/a, saying why. Not in the default run (``--only recovery``: minutes).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.bench.bench_workers import POSTGRES, REDIS, database
from tests.bench.harness import RECOVERY_KEYS as KEYS
from tests.bench.harness import Figure, median, na, percentile

#: the default lease (RELAY_LEASE_S), and the quick run's
LEASE_S = 15.0
QUICK_LEASE_S = 2.0
KILLS = 20
QUICK_KILLS = 2


def run_recovery(quick: bool) -> list[Figure]:
    try:
        import psycopg
        import redis

        redis.Redis.from_url(REDIS, socket_connect_timeout=2).ping()
        psycopg.connect(POSTGRES, connect_timeout=3).close()
    except Exception as exc:
        why = f"needs Redis at {REDIS} and PostgreSQL at {POSTGRES} ({type(exc).__name__})"
        return [na(k, k, "ms", why) for k in KEYS]
    lease_s, kills = (QUICK_LEASE_S, QUICK_KILLS) if quick else (LEASE_S, KILLS)
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(database())
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        takeovers = _takeovers(folder, store, lease_s, kills)
    return _figures(takeovers, lease_s)


def _takeovers(folder: Path, store: str, lease_s: float, kills: int) -> list[float]:
    """Seconds from each kill to the reader's next event."""
    from tests.interop.conftest import TurnReader, wait_until
    from tests.replicas.processes import Gates, Replica, replica_env, write_gated_graph

    graph, gate_dir = write_gated_graph(folder)
    gates = Gates(gate_dir)
    shared = {"RELAY_BUS": REDIS, "RELAY_STORE": store, "RELAY_LEASE_S": f"{lease_s:g}"}
    replicas: list[Replica] = []

    def start(name: str) -> Replica:
        replica = Replica(name, replica_env(folder, gate_dir, **shared), folder, graph)
        replicas.append(replica)
        return replica.wait_ready()

    out: list[float] = []
    try:
        b = start("b")
        for i in range(kills):
            a = start(f"a{i}")  # a new process, a new instance id
            message = f"kill{i}"
            started = httpx.post(
                f"{a.url}/chat",
                json={"message": message},
                headers={"Prefer": "respond-async"},
                timeout=30,
            )
            turn_id = started.json()["turn_id"]
            reader = TurnReader(b.url, turn_id, timeout=lease_s * 4 + 120).start()
            wait_until(functools.partial(gates.started, message), timeout=60, what="the node")
            if not reader.wait_for("node_started", "hold", timeout=60):
                raise RuntimeError(f"the reader on B never saw the node: {reader.types()}")
            seen = len(reader.frames)
            killed = time.monotonic()
            a.kill()
            wait_until(
                functools.partial(_news, reader, seen),
                timeout=lease_s * 4 + 120,
                what="the takeover",
            )
            gates.release(message)  # the recovered run's node may answer now
            reader.join(lease_s * 4 + 120)
            after = [f for f in reader.frames[seen:] if f.event is not None]
            out.append(after[0].arrived - killed)
            print(
                f"# recovery: kill {i + 1}/{kills}: {after[0].event} after {out[-1] * 1000:.0f} ms",
                file=sys.stderr,
                flush=True,
            )
    finally:
        for replica in replicas:
            replica.stop()
    return out


def _news(reader: Any, seen: int) -> bool:
    """Has the reader got an event past its first ``seen`` frames?"""
    return any(f.event is not None for f in reader.frames[seen:])


def _figures(takeovers: list[float], lease_s: float) -> list[Figure]:
    ms = [t * 1000 for t in takeovers]
    anchor = f"RELAY_LEASE_S={lease_s:g} (the lease a dead owner stops renewing)"
    note = "kill -9 -> the reader's next event on the other replica (turn_recovered)"
    return [
        Figure(
            key,
            f"takeover {name}, {len(ms)} kills",
            value,
            "ms",
            lo=min(ms),
            hi=max(ms),
            rounds=len(ms),
            anchor=anchor,
            anchor_value=lease_s * 1000,
            anchor_unit="ms",
            note=note,
        )
        for key, name, value in zip(
            KEYS, ("p50", "p99"), (median(ms), percentile(ms, 99)), strict=True
        )
    ]
