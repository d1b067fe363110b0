"""RELAY_STORE=postgresql://...: instances that share the real PostgreSQL replay each
other's turns. Instance A runs the turns; A stops; instance B, with another data
directory (so nothing local is shared), replays them equal to what A's clients saw live.

Without PostgreSQL the test skips (saying how to enable it), except under CI=true.
"""

from __future__ import annotations

import httpx
import pytest

from tests.store.conftest import Launcher, fixture_file, recorded
from tests.store.support import (
    KINDS,
    assert_same,
    live_events,
    replayed_events,
    run_turn,
    without_seq,
)

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite


def test_a_turn_run_on_one_instance_replays_on_another(
    launcher: Launcher, postgres_url: str
) -> None:
    first = launcher.start(RELAY_STORE=postgres_url)
    turns = {kind: run_turn(first.url, kind) for kind in KINDS}
    live = {kind: live_events(first.url, turn_id) for kind, turn_id in turns.items()}
    first.stop()

    other = launcher.start(RELAY_STORE=postgres_url)
    assert other.data_dir != first.data_dir
    for kind, turn_id in turns.items():
        replayed = replayed_events(other.url, turn_id, speed=0)
        assert without_seq(replayed) == without_seq(live[kind]), kind
    r = httpx.get(f"{other.url}/turns/{'0' * 32}/events", params={"source": "spans"})
    assert r.status_code == 404

    # a Jaeger-exported file imported on one instance is there for all of them
    body = fixture_file("refund.otlp.jsonl").read_bytes()
    ndjson = {"Content-Type": "application/x-ndjson"}
    assert httpx.post(f"{other.url}/imports", content=body, headers=ndjson).status_code == 201
    imported = recorded("refund")
    third = launcher.start(RELAY_STORE=postgres_url)
    replayed = replayed_events(third.url, imported[0]["turn_id"], speed=0)
    assert_same(replayed, imported)
