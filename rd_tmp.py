import asyncio, sys, uuid, time, gc
from tests.bench.bench_overhead import Rig, _span_turn, chain_graph, relay_turn
async def main(mode, keep):
    rig = Rig()
    rig.bus.max_finished_turns = keep
    relay_body = _span_turn(chain_graph(rig.relay_tracer, 4), rig.relay_tracer, 4)
    spans_body = _span_turn(chain_graph(rig.spans_tracer, 4), rig.spans_tracer, 4)
    fns = {"relay": lambda: relay_turn(rig, relay_body), "spans": lambda: spans_body(uuid.uuid4().hex)}
    for _ in range(1200):
        for f in fns.values(): await f()
    res = {k: [] for k in fns}
    for r in range(8):
        for name, f in fns.items():
            t0 = time.perf_counter()
            for _ in range(200): await f()
            res[name].append((time.perf_counter()-t0)/200*1e6)
    import statistics
    s, r = statistics.median(res["spans"]), statistics.median(res["relay"])
    print(f"keep={keep}: spans {s:.0f} us relay {r:.0f} us ratio {r/s:.3f}")
for keep in (1000, 1, 1000, 1):
    asyncio.run(main("x", keep))
