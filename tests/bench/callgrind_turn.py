"""Machine instructions per trivial turn (issue 18's 1.10× budget), with callgrind.

    python -m tests.bench.callgrind_turn [--turns 60] [--warmup 100]

runs this module under ``valgrind --tool=callgrind`` once per configuration and prints
the instructions of one turn of the 4-node graph of :mod:`tests.bench.bench_overhead`:

- ``spans``: the turn with its spans and no relay (the anchor);
- ``floor``: the same + a span processor that maps nothing and a reader task woken per
  burst of phases (``floor_turn``: the least any live relay adds on this runtime);
- ``relay``: the same + :class:`RelaySpanProcessor` + the mapping + the bus, no reader;
- ``reader``: the same + a subscriber reading the turn's log to its terminal event
  (``relay_turn``: what the budget counts).

Counts are repeatable whatever else the machine does (a shared 2-core VM: the wall-clock
bench moves with its load): the hash seed, the span ids and the turn ids are fixed. Only
the measured turns are counted: each configuration warms up first, collects garbage,
then runs its turns inside ``functools.reduce``, and valgrind collects only inside that
C function (``--toggle-collect=functools_reduce``); nothing else in the process calls
it. The window is short enough (60 turns) that no gen-1 or full garbage collection falls
in it: what the relay's retained logs cost the collector there is not in these counts
(see docs/performance.md). One configuration by hand:

    valgrind --tool=callgrind --toggle-collect=functools_reduce \\
        --callgrind-out-file=/tmp/cg.out .venv/bin/python -m tests.bench.callgrind_turn \\
        --child reader
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import random
import uuid
from typing import Any

from tests.bench.callgrind import count

CONFIGS = ("spans", "floor", "relay", "reader")


def child(config: str, turns: int, warmup: int) -> None:
    """One configuration: warm up, then ``turns`` turns inside ``functools.reduce``."""
    from tests.bench.bench_overhead import (
        Rig,
        _span_turn,
        _unread_turn,
        chain_graph,
        floor_turn,
        relay_turn,
    )

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def setup() -> Any:
        rig = Rig()
        tracer = {"spans": rig.spans_tracer, "floor": rig.waker_tracer}.get(
            config, rig.relay_tracer
        )
        body = _span_turn(chain_graph(tracer, 4), tracer, 4)

        async def turn() -> None:
            if config == "spans":
                await body(uuid.uuid4().hex)
            elif config == "floor":
                await floor_turn(rig, body, 10)
            elif config == "relay":  # the log opened, as relay_turn does; no reader
                await _unread_turn(rig, body)
            else:
                await relay_turn(rig, body)

        return rig, turn

    rig, turn = loop.run_until_complete(setup())

    async def run(n: int) -> None:
        for _ in range(n):
            await turn()
        await asyncio.sleep(0)  # what a turn left scheduled runs inside the count

    loop.run_until_complete(run(warmup))
    # the same ids every run (span ids come from ``random``, turn ids from uuid4): with the
    # hash seed fixed, the same dict and set layouts, so a count repeats to the instruction
    rng = random.Random(0)
    random.seed(0)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)
    gc.collect()
    functools.reduce(lambda _, __: loop.run_until_complete(run(turns)), [0], None)
    rig.close()
    loop.close()


def measure(configs: list[str], turns: int, warmup: int) -> dict[str, int]:
    """Instructions collected for ``turns`` turns of each configuration: one valgrind run
    each, all at once (a count does not depend on what else runs)."""
    return count(
        "tests.bench.callgrind_turn",
        [(config, ["--turns", str(turns), "--warmup", str(warmup)]) for config in configs],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--child", choices=CONFIGS)
    parser.add_argument("--only", nargs="*", choices=CONFIGS, default=list(CONFIGS))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.turns, args.warmup)
        return
    per = {c: n / args.turns for c, n in measure(args.only, args.turns, args.warmup).items()}
    anchor = per.get("spans")
    print(
        f"instructions per turn, 4-node trivial graph, {args.turns} turns "
        f"after {args.warmup} of warm-up (callgrind)"
    )
    for c, n in per.items():
        ratio = f"{n / anchor:.3f}x" if anchor else ""
        added = f"+{(n - anchor) / 1e6:.3f} M" if anchor and c != "spans" else ""
        print(f"  {c:<7} {n / 1e6:7.3f} M  {ratio:>7}  {added}")


if __name__ == "__main__":
    main()
