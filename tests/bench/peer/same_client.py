"""python -m tests.bench.peer.same_client [--quick] [--json] [--markdown] [--seed N]
(make bench-peer-same-client)

Issue 34, item 5: span-relay and the LangGraph Agent Server (``langgraph dev``) driven by
the same Agent Server client code. Both servers are started as for the side-by-side table
(servers.py: the same graphs, langgraph.json, 127.0.0.1), and one client class,
client.py's :class:`~tests.bench.peer.client.Peer`, is pointed at each base URL: runs start
with ``POST /threads/{id}/runs/stream`` (``if_not_exists: create``, ``stream_resumable:
true``, ``on_disconnect: continue``, ``stream_mode: [values, updates, messages-tuple]``),
background runs with ``POST /threads/{id}/runs``, and every join and resume reads
``GET /threads/{id}/runs/{run_id}/stream`` with ``Last-Event-ID`` (``-1``: from the start).

The figures (figures.py, the sides alternating wherever both run the same loop):

- first event latency: the first SSE frame after the request, and the first ``messages``
  event with content (a token), p50/p99 over sequential `tokens` runs;
- memory per idle stream: N readers joined to one silent `hold` run, the server's RSS
  delta per reader (and N readers of its thread's ``stream/events``), each kind on a
  fresh pair of servers;
- gap and duplicate per cut: `tokens` runs cut after k frames (k seeded-random), resumed
  with the last frame's id, both parts compared with an uncut read (``Last-Event-ID: -1``)
  as multisets: frames missing (gap) and frames received twice (dup) per cut, in all and
  per mode (``messages``, ``updates``, ``values``);
- events resent per reconnect: frames of the resume that the client had before the cut;
- the same three on the newer protocol (thread_events.py: ``POST /threads/{id}/commands``
  ``run.start``, ``POST /threads/{id}/stream/events`` reopened with ``since``, its cursor);
  and the frames resent by a reconnect without a cursor (as LangGraph's JavaScript
  client reconnects) in the 5th run of a thread that the client followed run by run.

A figure a server does not serve (a route answering 404, a stream without ``id:`` lines)
is ``n/a`` on its side, with the reason printed under the table. The exit status is 0
whatever the figures say.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from tests.bench.peer import figures, report, servers, thread_events
from tests.bench.peer.client import Peer, message_input, read
from tests.bench.peer.report import Row

#: what useStream and agent-chat-ui ask for, and what the reconnect figure compares
MODES = ["values", "updates", "messages-tuple"]
#: the event types of those modes (``messages-tuple`` frames are ``messages`` events)
EVENTS = ("messages", "updates", "values")
SIDES = ("span-relay", "peer")

FULL = {"per_round": 10, "rounds": 4, "idle": 500, "cuts": 30, "nocursor": 3}
QUICK = {"per_round": 2, "rounds": 2, "idle": 20, "cuts": 2, "nocursor": 1}
#: the run of a thread whose stream the no-cursor reconnect cuts (the runs before it: what a
#: server that replays the thread sends again)
NOCURSOR_RUN = 5


def dialects() -> list[Peer]:
    """The one client, once per server (only the name on the table differs)."""
    return [Peer(name, MODES) for name in SIDES]


async def served(side: figures.Side) -> tuple[dict[str, str | None], int]:
    """What of the figures' routes the server serves: for each of ``resumable`` (a
    streamed run's frames carry ``id:`` lines and its join stream replays them),
    ``background`` (``POST /threads/{id}/runs``) and ``events`` (the newer protocol:
    thread_events.py), None when served, else why not; and the events of a run on the
    newer protocol (its reconnect figure's cut points are drawn below that)."""
    dialect = side.dialect
    assert isinstance(dialect, Peer)
    request, handle = dialect.start("tokens", message_input("Hello"))
    reading = await read(side.client, request, dialect)
    handle = dialect.handle_of(handle, reading)
    out: dict[str, str | None] = {"resumable": None, "background": None, "events": None}
    without_id = sum(1 for e in reading.events if e.id is None)
    joined = await read(side.client, dialect.join(handle, None), dialect)
    if reading.status != 200:
        out["resumable"] = f"runs/stream answered {reading.status}"
    elif joined.status != 200:
        out["resumable"] = f"the join stream answered {joined.status}"
    elif without_id:
        out["resumable"] = f"{without_id} of {len(reading.events)} frames without an id"
    try:
        await dialect.start_waiting(side.client, "trivial", message_input("Hello"))
    except RuntimeError as e:
        out["background"] = str(e)
    out["events"], events = await thread_events.served(side.client)
    return out, events


async def measure(sides: list[figures.Side], size: dict[str, int], seed: int) -> dict[str, Any]:
    for side in sides:  # warm-up: imports, first compilation, connection pools
        for _ in range(3):
            await figures.turn(side, "tokens")
    report.log("what each server serves")
    serves: dict[str, dict[str, str | None]] = {}
    v2_events: dict[str, int] = {}
    for side in sides:
        serves[side.name], v2_events[side.name] = await served(side)
    for side in sides:
        side.broken.clear()
    report.log("first event latency")
    seq = await figures.sequential(
        sides, "tokens", size["per_round"], size["rounds"], deadline_s=150
    )
    report.log("reconnects")
    resumed: dict[str, Any] = {}
    for side in sides:
        if serves[side.name]["resumable"] is None:
            per_run = int(seq[side.name]["events_per_turn"] or 80)
            resumed[side.name] = await figures.reconnects(
                side, size["cuts"], seed, per_run, deadline_s=100
            )
    report.log("reconnects on the newer protocol")
    events: dict[str, Any] = {}
    nocursor: dict[str, Any] = {}
    for side in sides:
        if serves[side.name]["events"] is None:
            events[side.name] = await thread_events.reconnects(
                side.client, size["cuts"], seed, v2_events[side.name], deadline_s=100
            )
            nocursor[side.name] = await thread_events.resent_without_cursor(
                side.client, size["nocursor"], NOCURSOR_RUN, seed, v2_events[side.name]
            )
    return {
        "served": serves,
        "latency": seq,
        "reconnect": resumed,
        "events": events,
        "nocursor": nocursor,
        "broken": {s.name: s.broken[:20] for s in sides},
        "broken_count": {s.name: len(s.broken) for s in sides},
    }


async def idle_streams(
    kind: str, sides: list[figures.Side], size: dict[str, int], serves: dict[str, Any]
) -> dict[str, Any]:
    """Memory per idle stream of one ``kind`` (``joined``: the join stream of a run;
    ``events``: the newer protocol's thread stream) on each side that serves it. The
    servers should be fresh: a heap that held other streams before gives their freed
    memory to these (run() starts a pair for each kind)."""
    out: dict[str, Any] = {}
    for side in sides:
        why = serves[side.name]
        if kind == "joined" and why["resumable"] is None and why["background"] is None:
            out[side.name] = await figures.idle_streams(side, size["idle"])
        elif kind == "events" and why["events"] is None:
            out[side.name] = await thread_events.idle_streams(
                side.server, size["idle"], hold_s=size.get("hold_s", 60)
            )
    return out


def rows(data: dict[str, Any], idle_n: int) -> list[Row]:
    """The table, from :func:`measure`'s data; a figure a side has no data for is None."""
    out: list[Row] = []

    def both(label: str, where: dict[str, Any], get: Any, unit: str, better: str) -> None:
        values = [get(where[n]) if n in where else None for n in SIDES]
        out.append(Row(label, values[0], values[1], unit, better))

    seq = data["latency"]
    for key, what in (
        ("first_event_ms", "first SSE frame"),
        ("first_token_ms", "first `messages` token"),
        ("turn_ms", "whole run"),
    ):
        for q in (50, 99):
            both(
                f"runs/stream: {what} p{q}",
                seq,
                lambda d, k=key, q=q: figures.pct(d[k], q),
                "ms",
                "lower",
            )
    both("runs/stream: frames per run", seq, lambda d: d["events_per_turn"], "", "")
    both(
        f"memory per idle joined stream ({idle_n})",
        data["idle_joined"],
        lambda d: d["kib_per_stream"],
        "KiB",
        "lower",
    )
    both(
        f"memory per idle stream/events stream ({idle_n})",
        data["idle_events"],
        lambda d: d["kib_per_stream"],
        "KiB",
        "lower",
    )
    _reconnect_rows(both, data["reconnect"], "join stream")
    _reconnect_rows(both, data["events"], "stream/events")
    both(
        f"stream/events, reconnect without a cursor in a thread's run {NOCURSOR_RUN}: "
        "frames resent",
        data["nocursor"],
        lambda d: d["resent"] / max(1, d["threads"]),
        "",
        "lower",
    )
    both("runs not served whole", data["broken_count"], lambda n: n, "", "lower")
    return out


def _per_cut(key: str, event: str | None = None) -> Any:
    """A reconnect figure's count (of one event type, or of all) per cut."""

    def get(d: dict[str, Any]) -> float:
        where = d if event is None else d["by_event"].get(event, {})
        return float(where.get(key, 0)) / max(1, d["cuts"])

    return get


def _reconnect_rows(both: Any, resumed: dict[str, Any], where: str) -> None:
    """The reconnect figures of one protocol (``resumed``: figures.reconnects or
    thread_events.reconnects of each side)."""
    cuts = max((r["cuts"] for r in resumed.values()), default=0)
    head = f"{where}, {cuts} cuts"
    both(f"{head}: gap per cut (frames missing)", resumed, _per_cut("lost"), "", "lower")
    for event in EVENTS:
        both(f"  of which `{event}`", resumed, _per_cut("lost", event), "", "lower")
    both(f"{head}: dup per cut (frames twice)", resumed, _per_cut("duplicated"), "", "lower")
    for event in EVENTS:
        both(f"  of which `{event}`", resumed, _per_cut("duplicated", event), "", "lower")
    both(
        f"{head}: cuts with a gap or a dup",
        resumed,
        lambda d: sum(1 for p in d["points"] if p["lost"] or p["duplicated"]),
        "",
        "lower",
    )
    both(f"{head}: events resent per reconnect", resumed, _per_cut("resent"), "", "lower")
    both(
        f"{head}: distinct ids per frame",
        resumed,
        lambda d: d["distinct_ids"] / max(1, d["events"]),
        "",
        "higher",
    )


async def run(size: dict[str, int], seed: int) -> dict[str, Any]:
    logs = servers.ROOT / ".span-relay" / "bench-peer-logs"
    logs.mkdir(parents=True, exist_ok=True)
    servers.raise_fd_limit()
    exe = servers.ensure_peer_venv(logs / "peer-install.log")
    report.log("starting span-relay and the peer")
    data = await on_fresh_servers(exe, logs, lambda sides: measure(sides, size, seed))
    for kind in ("joined", "events"):
        report.log(f"idle streams ({kind}), on fresh servers")
        data[f"idle_{kind}"] = await on_fresh_servers(
            exe, logs, lambda sides, k=kind: idle_streams(k, sides, size, data["served"])
        )
    data["logs"] = str(logs)
    return data


async def on_fresh_servers(exe: Any, logs: Any, work: Any) -> Any:
    """``await work(sides)`` against a span-relay and a peer started for it, then stopped."""
    started: list[servers.Server] = []
    try:
        started.append(servers.start_relay(logs))
        started.append(servers.start_peer(exe, logs))
        sides = [
            figures.Side(dialect, server, figures.client_for(server))
            for dialect, server in zip(dialects(), started, strict=True)
        ]
        try:
            return await work(sides)
        finally:
            for side in sides:
                await side.client.aclose()
    finally:
        for server in started:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    args = report.arguments("python -m tests.bench.peer.same_client", __doc__, 34, argv)
    size = QUICK if args.quick else FULL
    meta = report.machine()
    t0 = time.monotonic()
    data = asyncio.run(run(size, args.seed))
    meta["elapsed_s"] = round(time.monotonic() - t0, 1)
    meta["loadavg_end"] = os.getloadavg()
    meta["sizes"] = size
    meta["stream_mode"] = MODES
    table_rows = rows(data, size["idle"])
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
    print("client: the Agent Server API (client.py Peer) on both; stream_mode " + ", ".join(MODES))
    print(report.table(table_rows, markdown=args.markdown))
    for name, why in data["served"].items():
        for figure, reason in why.items():
            if reason:
                print(f"{name}: {figure} not served: {reason}")
    for name, problems in data["broken"].items():
        for problem in problems[:5]:
            print(f"{name}: run not whole: {problem}")
    print(f"server logs: {data['logs']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
