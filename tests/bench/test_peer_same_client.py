"""The same-client benchmark (tests/bench/peer/same_client.py) against span-relay alone, at a
tiny size: ``span-relay serve`` on the benchmark's langgraph.json, driven by the Agent
Server client the peer is driven by. No peer install, no timing thresholds: only that
span-relay's side of every figure is measured, and what its reconnects count.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.bench.peer import figures, same_client, servers

#: hold_s: the idle streams' `hold` run ends soon after they are counted (a server stops
#: only once its running turns have ended or its grace period is over)
TINY = {"per_round": 2, "rounds": 1, "idle": 5, "cuts": 2, "nocursor": 1, "hold_s": 5}


async def measure(server: servers.Server) -> dict[str, Any]:
    (dialect,) = (d for d in same_client.dialects() if d.name == "span-relay")
    side = figures.Side(dialect, server, figures.client_for(server))
    try:
        data = await same_client.measure([side], TINY, seed=34)
        for kind in ("joined", "events"):
            data[f"idle_{kind}"] = await same_client.idle_streams(
                kind, [side], TINY, data["served"]
            )
        return data
    finally:
        await side.client.aclose()


@pytest.mark.slow
def test_the_agent_server_client_measures_span_relay(tmp_path: Path) -> None:
    server = servers.start_relay(tmp_path)
    try:
        data = asyncio.run(measure(server))
    finally:
        server.stop()
    assert data["served"]["span-relay"] == {"resumable": None, "background": None, "events": None}
    assert data["broken_count"]["span-relay"] == 0, data["broken"]
    latency = data["latency"]["span-relay"]
    assert latency["turns"] == 2
    assert len(latency["first_event_ms"]) == len(latency["first_token_ms"]) == 2
    assert all(
        0 < e <= t
        for e, t in zip(latency["first_event_ms"], latency["first_token_ms"], strict=True)
    )
    # the join stream: a rejoin with the last frame's Last-Event-ID gets exactly the rest
    joined = data["reconnect"]["span-relay"]
    assert joined["cuts"] == 2
    for point in joined["points"]:
        assert point["resume_status"] == point["uncut_status"] == 200, point
        assert point["last_id"] is not None, point
        assert (point["lost"], point["duplicated"], point["resent"]) == (0, 0, 0), point
        assert point["resumed_events"] == point["uncut_events"] - point["k"], point
    assert joined["distinct_ids"] == joined["events"]  # every frame its own id
    # the newer protocol: a reconnect with ``since`` gets exactly the rest of the run
    resumed = data["events"]["span-relay"]
    assert resumed["cuts"] == 2
    for point in resumed["points"]:
        assert point["resume_status"] == 200 and point["resume_ended"], point
        assert point["since"] is not None, point
        assert (point["lost"], point["duplicated"], point["resent"]) == (0, 0, 0), point
        assert point["resumed_events"] == point["uncut_events"] - point["k"], point
    assert resumed["distinct_ids"] == resumed["events"]  # every event its own id
    # ... and one without a cursor starts at the thread's latest run: what the client had
    # of that run again, none of the four runs before it
    (nocursor,) = data["nocursor"]["span-relay"]["points"]
    assert nocursor["ended"] and nocursor["resent"] == nocursor["k"] > 0, nocursor
    for kind in ("joined", "events"):
        idle = data[f"idle_{kind}"]["span-relay"]
        assert idle["streams"] == TINY["idle"], (kind, idle)
    rows = {r.figure: r for r in same_client.rows(data, TINY["idle"])}
    missing = [name for name, row in rows.items() if row.ours is None]
    assert not missing, missing
    assert rows["join stream, 2 cuts: gap per cut (frames missing)"].ours == 0
    assert rows["stream/events, 2 cuts: gap per cut (frames missing)"].ours == 0
