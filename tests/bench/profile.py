"""Profiles of the relay's hot paths (needs ``pyinstrument`` and ``py-spy``).

    python -m tests.bench.profile hot      [--turns 2000]
        pyinstrument over relay turns of the 4-node graph (spans + processor + bus +
        subscriber): where the loop's time goes (on_start/on_end, drain, map, publish);
    python -m tests.bench.profile stream   [--streams 100] [--interval 0.025] [--ticks 200]
        py-spy (sampling, from outside) on the bench server while relay streams run:
        the stream writer's share, aggregated per function (inclusive and self %).

Both print text; neither is part of ``python -m tests.bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time


def hot(turns: int) -> None:
    from pyinstrument import Profiler

    from tests.bench.bench_overhead import Rig, _span_turn, chain_graph, relay_turn

    async def main() -> None:
        rig = Rig()
        body = _span_turn(chain_graph(rig.relay_tracer, 4), rig.relay_tracer, 4)
        for _ in range(min(200, turns)):
            await relay_turn(rig, body)
        profiler = Profiler(interval=0.0002, async_mode="disabled")
        profiler.start()
        deadline = time.monotonic() + 120
        for _ in range(turns):
            await relay_turn(rig, body)
            if time.monotonic() > deadline:
                break
        profiler.stop()
        rig.close()
        print(profiler.output_text(unicode=False, color=False, show_all=False))

    asyncio.run(main())


def aggregate(raw: str, top: int = 45) -> str:
    """py-spy's raw (collapsed) stacks -> inclusive and self % per function."""
    incl: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        total += count
        frames = [re.sub(r":\d+\)", ")", f) for f in stack.split(";")]
        for f in set(frames):
            incl[f] += count
        own[frames[-1]] += count
    out = [f"samples: {total}", "-- inclusive"]
    out += [f"{100 * n / total:5.1f}%  {f}" for f, n in incl.most_common(top)]
    out += ["-- self"]
    out += [f"{100 * n / total:5.1f}%  {f}" for f, n in own.most_common(25)]
    return "\n".join(out)


def stream(streams: int, interval: float, ticks: int, mode: str) -> None:
    from tests.bench.bench_http import _latency_round, server

    spy = shutil.which("py-spy") or shutil.which("py-spy", path=sys.prefix + "/bin")
    if spy is None:
        sys.exit("py-spy is not installed (pip install py-spy)")
    with server() as srv, tempfile.NamedTemporaryFile(suffix=".txt") as out:
        asyncio.run(_latency_round(srv.port, mode, 1, 0.005, 10))  # warm up
        seconds = int(interval * ticks + 6)
        proc = subprocess.Popen(
            [
                spy,
                "record",
                "-p",
                str(srv.pid),
                "-o",
                out.name,
                "-f",
                "raw",
                "-r",
                "250",
                "-d",
                str(seconds),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        p50, p99, done = asyncio.run(_latency_round(srv.port, mode, streams, interval, ticks))
        proc.wait(seconds + 30)
        print(
            f"{mode}: {streams} streams, {streams / interval:.0f} spans/s: "
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, {done} streams complete"
        )
        with open(out.name) as f:
            print(aggregate(f.read()))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.profile")
    sub = parser.add_subparsers(dest="what", required=True)
    h = sub.add_parser("hot")
    h.add_argument("--turns", type=int, default=2000)
    s = sub.add_parser("stream")
    s.add_argument("--streams", type=int, default=100)
    s.add_argument("--interval", type=float, default=0.025)
    s.add_argument("--ticks", type=int, default=200)
    s.add_argument("--mode", choices=("relay", "raw"), default="relay")
    args = parser.parse_args()
    if args.what == "hot":
        hot(args.turns)
    else:
        stream(args.streams, args.interval, args.ticks, args.mode)


if __name__ == "__main__":
    main()
