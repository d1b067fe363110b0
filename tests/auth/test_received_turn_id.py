"""A received run cannot write into a turn it names but does not own (issue 31).

Spans name their turn in ``relay.turn.id``, and anyone holding the receiver's credential
(RELAY_API_TOKEN, the collector's) can send any. The turn's *record* was already safe
from them (tests/auth/test_received_takeover.py); this is about its *stream* and its
*replay*: a received run naming a turn the store knows goes out into that turn's events
and under its replay only when it names the turn's user, and never into a turn the relay
ran itself.

The demo app in a real uvicorn with RELAY_AUTH=jwt and the OTLP/HTTP receiver on: alice
runs a turn through ``POST /chat`` and her collector sends a run of hers (a received
turn); the relay restarts on the same data (so neither turn is live on its bus: the case
the bus could not guard); then, through the real OTLP exporter, runs arrive naming her
``/chat`` turn as bob, her received turn as bob and as nobody. What alice reads of both
turns (their events, and their replay from the stored spans) is what it was, the two runs
naming another user are counted and logged by their ids alone, and a second run of hers
still continues her received turn."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth.issuer import Issuer, bearer
from tests.auth.received import COLLECTOR, DAY_NS, SECRET, send_run, settled
from tests.conftest import LiveServer
from tests.interop.conftest import wait_until

NDJSON = {"accept": "application/x-ndjson"}


def read_events(
    client: httpx.Client, server: LiveServer, turn_id: str, headers: dict[str, str], source: str
) -> list[dict[str, Any]]:
    """The turn's events as ``headers``' user reads them, live (``source="live"``: from
    the bus, or the record's end once the bus has no log of it) or replayed from the
    stored spans (``source="spans"``, all at once: the runs here are days apart)."""
    response = client.get(
        f"{server.url}/turns/{turn_id}/events",
        params={"source": source, "speed": "0"},
        headers={**headers, **NDJSON},
    )
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


def test_a_received_run_writes_into_no_turn_it_does_not_own(
    make_server: Callable[..., LiveServer],
    issuer: Issuer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = {
        **issuer.env(issuer.write_jwks(tmp_path / "jwks.json")),
        "RELAY_API_TOKEN": COLLECTOR,
        "RELAY_OTLP_HTTP": "true",
    }
    alice = bearer(issuer.token("alice"))
    first = make_server(**env)
    with httpx.Client(timeout=60) as client:
        chat = client.post(
            f"{first.url}/chat", headers=alice, json={"message": "How do refunds work?"}
        )
        assert chat.status_code == 200, chat.text
        thread, ran = chat.json()["thread_id"], chat.json()["turn_id"]
        start = time.time_ns()
        received = send_run(first, "her-other-thread", "alice", start)
        settled(client, first, received, alice)
    first.stop()  # neither turn is live on a bus any more: only its record says it is hers

    server = make_server(**env)
    with httpx.Client(timeout=60) as client:
        before = {
            (turn, source): read_events(client, server, turn, alice, source)
            for turn in (ran, received)
            for source in ("live", "spans")
        }
        with caplog.at_level(logging.WARNING, logger="relay.receiver"):
            as_bob_into_ran = send_run(server, thread, "bob", start + DAY_NS, turn_id=ran)
            as_bob = send_run(server, "her-other-thread", "bob", start + DAY_NS, turn_id=received)
            as_nobody = send_run(server, "her-other-thread", None, start + DAY_NS, turn_id=received)
            # all three were taken (stored) and decided on: the receiver's outbox is empty
            wait_until(
                lambda: (
                    server.relay.receiver.stats["accepted"] >= 6
                    and server.relay.receiver.stats["kept_apart"] >= 2
                ),
                what="the three runs received and decided on",
            )
            # a run of hers naming her received turn still continues it
            hers = send_run(server, "her-other-thread", "alice", start + 2 * DAY_NS, received)
            wait_until(
                lambda: (
                    len(read_events(client, server, received, alice, "spans"))
                    > len(before[(received, "spans")])
                ),
                what="her own second run, replayed under her received turn",
            )
        after = {key: read_events(client, server, *key[:1], alice, key[1]) for key in before}
        # her /chat turn: what she reads of it is what it was, live and replayed
        assert after[(ran, "live")] == before[(ran, "live")]
        assert after[(ran, "spans")] == before[(ran, "spans")]
        # her received turn: only her own second run was added (bob's and nobody's are not)
        traces = {e["trace_id"] for e in after[(received, "spans")]}
        assert hers in traces
        assert not traces & {as_bob, as_nobody, as_bob_into_ran}
        assert {e["trace_id"] for e in after[(received, "live")]} <= {received, hers}
        # and bob reads neither of her turns
        bob = bearer(issuer.token("bob"))
        for turn in (ran, received):
            assert client.get(f"{server.url}/turns/{turn}", headers=bob).status_code == 404
    # counted (the three naming another user than the turn's own) and logged by ids alone
    assert server.relay.receiver.stats["kept_apart"] == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    refused = [w for w in warnings if "not published into its stream" in w]
    assert len(refused) == 3, warnings
    assert sum(received in w for w in refused) == 2 and sum(ran in w for w in refused) == 1
    sent = (as_bob, as_nobody, as_bob_into_ran)
    assert set(sent) == {t for t in sent if any(t in w for w in refused)}
    assert not any(SECRET in r.getMessage() for r in caplog.records)
