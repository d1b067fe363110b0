"""Machine instructions per replay of a stored 10,000-span turn (issue 18 item 4), with
callgrind, part by part:

    python -m tests.bench.callgrind_replay [--spans 10000] [--only PART ...]

runs this module under ``valgrind --tool=callgrind`` once per part of
:mod:`tests.bench.replay_parts` (the store's read and decoding, the ordering, the
mapping through ``feed``, the mapping alone, the three in one thread) and prints the
instructions of one replay of each. The wall-clock rows (``--only replay``) move with
the machine as much as with the code (a shared 2-core VM whose speed varies threefold
within an hour); these counts repeat to the instruction: the hash seed and the turn's
ids are fixed, and only the measured call is counted (valgrind collects inside
``functools.reduce`` only, which nothing else in the process calls). Garbage collection
stays on, as in a serving process, so the collections a replay sets off are counted.
The streamed path (worker thread + loop) runs the same instructions as the one-thread
part (its hand-offs cost context switches, not instructions): it is not a part here.
Compare two trees by running it in each.
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import tempfile
import uuid
from pathlib import Path

from tests.bench.callgrind import count

PARTS = (
    "read + decode",
    "ordering",
    "mapping through feed",
    "mapping alone",
    "read + order + map, one thread",
)


def child(part: str, n_spans: int) -> None:
    """One part: the turn written once, the part run once to warm up, then once counted."""
    rng = random.Random(0)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)
    from relay.store.sqlite import SQLiteSpanStore
    from tests.bench.replay_parts import parts

    with tempfile.TemporaryDirectory(prefix="callgrind-replay-") as tmp:
        store = SQLiteSpanStore(Path(tmp) / "spans.db", retention_s=3600.0, max_turns=100)
        run = parts(n_spans, store)[part]
        run()
        gc.collect()
        functools.reduce(lambda _, __: run(), [0, 1])
        store.close()


def measure(parts: list[str], n_spans: int) -> dict[str, int]:
    """Instructions collected for one run of each part: one valgrind run each, two at a
    time (a count does not depend on what else runs)."""
    return count(
        "tests.bench.callgrind_replay",
        [(part, ["--spans", str(n_spans)]) for part in parts],
        at_once=2,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--child", choices=PARTS)
    parser.add_argument("--only", nargs="*", choices=PARTS, default=list(PARTS))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.spans)
        return
    counts = measure(args.only, args.spans)
    alone = counts.get("mapping alone")
    print(f"instructions per replay, {args.spans:,} spans (callgrind, garbage collection on)")
    for part, n in counts.items():
        ratio = f"{n / alone:.2f}x the mapping alone" if alone else ""
        print(f"  {part:<32} {n / 1e6:8.1f} M  {ratio}")


if __name__ == "__main__":
    main()
