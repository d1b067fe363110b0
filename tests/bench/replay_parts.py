"""The parts of a streamed replay from SQLite, process CPU, in one process (not part of
``python -m tests.bench``; docs/performance.md, issue 18 item 4, reads it):

    python -m tests.bench.replay_parts [--spans 10000] [--rounds 5]

The synthetic turn of the ``replay`` bench, written to a SQLite span store once; then,
per round and in turn: the store's read and decoding (``turn_span_stream``, every
chunk), the ordering (``PhaseOrderer`` with the store's lookups and ``LEAF`` phases, as
the replay runs it, over the chunks read), the mapping of those phases through ``feed``
(events kept), the mapping
alone (``replay.map``'s loop), the three in one thread, and the route's streamed path
(``start_derivation``: worker and loop). Each ``gc.collect()``-ed before it. Prints the
median and the minimum of each part; run it against two trees, alternated, to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bench.bench_events import _map_all, synthetic_turn


def parts(n_spans: int, store: Any) -> dict[str, Callable[[], object]]:
    from relay import conventions as c
    from relay.delivery.replay import start_derivation
    from relay.mapping.feed import feed, iter_replay_events
    from relay.mapping.state import MappingState
    from relay.mapping.stream_order import PhaseOrderer

    phases, ends = synthetic_turn(n_spans)
    turn_id = next(r.attributes[c.TURN_ID] for r in ends if c.TURN_ID in r.attributes)
    store.write(ends)

    def read() -> list[Any]:
        _, stream = store.turn_span_stream(turn_id)
        return list(stream)

    chunks = read()

    def ordered_chunks() -> list[Any]:
        """The phases of the chunks read, as the replay orders them (``LEAF`` included)."""
        _, stream = store.turn_span_stream(turn_id)
        orderer = PhaseOrderer(stream, leaves=True)
        phases = [phase for chunk in chunks for phase in orderer.push(chunk)]
        stream.close()
        return phases + orderer.finish()

    ordered = ordered_chunks()
    order = ordered_chunks

    def map_feed() -> list[Any]:
        events: list[Any] = []
        feed(MappingState(), ordered, events.append, read=None)
        return events

    def one_thread() -> list[Any]:
        _, stream = store.turn_span_stream(turn_id)
        return [e for batch in iter_replay_events(stream, lookups=stream) for e in batch]

    async def streamed() -> int:
        _, stream = await asyncio.to_thread(store.turn_span_stream, turn_id)
        derived = start_derivation(stream, stream, None, close=stream.close)
        while not derived.done:
            await derived.until(len(derived.events))
        return len(derived.events)

    return {
        "read + decode": read,
        "ordering": order,
        "mapping through feed": map_feed,
        "mapping alone": lambda: _map_all(phases, False),
        "read + order + map, one thread": one_thread,
        "streamed (worker + loop)": lambda: asyncio.run(streamed()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from relay.store.sqlite import SQLiteSpanStore

    with tempfile.TemporaryDirectory(prefix="bench-parts-") as tmp:
        store = SQLiteSpanStore(Path(tmp) / "spans.db", retention_s=3600.0, max_turns=100)
        try:
            timed = parts(args.spans, store)
            cpu: dict[str, list[float]] = {name: [] for name in timed}
            for _ in range(args.rounds):
                for name, run in timed.items():
                    gc.collect()
                    c0 = time.process_time()
                    run()
                    cpu[name].append((time.process_time() - c0) * 1000)
        finally:
            store.close()
    print(f"{args.spans:,} spans, {args.rounds} rounds, process CPU")
    for name, values in cpu.items():
        print(f"{name:32s} median {statistics.median(values):7.1f} ms   min {min(values):7.1f} ms")


if __name__ == "__main__":
    main()
