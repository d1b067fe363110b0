"""The OTLP receiver's credential cannot take a user's thread (issue 31's first finding).

The demo app in a real uvicorn with RELAY_AUTH=jwt and the OTLP/HTTP receiver on; alice
starts a thread through ``POST /chat``; then the collector's credential (RELAY_API_TOKEN),
through the real OTLP exporter, sends a run on her thread that names bob in
``enduser.id`` and starts a day in the future, and another that names nobody. Neither
joins her thread: alice still reads it and runs turns on it, bob (and anyone else) gets
404 on it, the turn without ``enduser.id`` is hidden from everyone but her, and both are
counted (``relay.otlp.spans{outcome="kept_apart"}``) and logged at WARNING. The same on
PostgreSQL, whose records every replica shares."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth.issuer import Issuer, bearer
from tests.auth.ownership import listed
from tests.auth.received import COLLECTOR, DAY_NS, SECRET, send_run, settled
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


def takeover_refused(server: LiveServer, issuer: Issuer, caplog: pytest.LogCaptureFixture) -> None:
    alice = bearer(issuer.token("alice"))
    bob = bearer(issuer.token("bob"))
    carol = bearer(issuer.token("carol"))
    with httpx.Client(timeout=60) as client:
        first = client.post(
            f"{server.url}/chat", headers=alice, json={"message": "How do refunds work?"}
        )
        assert first.status_code == 200, first.text
        thread = first.json()["thread_id"]
        own = first.json()["turn_id"]
        future = time.time_ns() + DAY_NS
        with caplog.at_level(logging.WARNING, logger="relay.receiver"):
            as_bob = send_run(server, thread, "bob", future)
            as_nobody = send_run(server, thread, None, future + DAY_NS)
            bobs = settled(client, server, as_bob, bob)
            nobodys = settled(client, server, as_nobody, alice)
        # neither received turn is on her thread: bob's is his, apart; the other is hers
        # (it names nobody), apart too, and nobody else's
        assert bobs["thread_id"] != thread and nobodys["thread_id"] != thread
        assert listed(client, server.url, alice, thread_id=thread) == {own}
        for other in (bob, carol):
            assert listed(client, server.url, other, thread_id=thread) == set()
            for turn in (own, as_nobody):
                assert client.get(f"{server.url}/turns/{turn}", headers=other).status_code == 404
            taken = client.post(
                f"{server.url}/chat", headers=other, json={"message": "hi", "thread_id": thread}
            )
            assert taken.status_code == 404, taken.text
            assert taken.json()["error"]["code"] == "unknown_thread"
        assert as_nobody not in listed(client, server.url, carol)
        # alice still reads her thread and runs turns on it (her saved conversation)
        assert client.get(f"{server.url}/turns/{own}", headers=alice).status_code == 200
        again = client.post(
            f"{server.url}/chat",
            headers=alice,
            json={"message": "And how long does shipping take?", "thread_id": thread},
        )
        assert again.status_code == 200, again.text
        assert again.json()["thread_id"] == thread and again.json()["status"] == "answered"
        assert listed(client, server.url, alice, thread_id=thread) == {own, again.json()["turn_id"]}
        # still not bob's after her new turn
        assert (
            client.post(
                f"{server.url}/chat", headers=bob, json={"message": "hi", "thread_id": thread}
            ).status_code
            == 404
        )
    # counted, and logged (the turn and the thread, never what the spans said)
    assert server.relay.receiver.stats["kept_apart"] == 2
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "kept apart" in r.getMessage()
    ]
    assert len(warnings) == 2, warnings
    assert all(thread in w for w in warnings)
    assert {as_bob, as_nobody} == {t for t in (as_bob, as_nobody) if any(t in w for w in warnings)}
    assert not any(SECRET in r.getMessage() for r in caplog.records)


def test_the_receivers_credential_cannot_take_a_thread(
    make_server: Callable[..., LiveServer],
    issuer: Issuer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_server(
        **issuer.env(issuer.write_jwks(tmp_path / "jwks.json")),
        RELAY_API_TOKEN=COLLECTOR,
        RELAY_OTLP_HTTP="true",
    )
    takeover_refused(server, issuer, caplog)


def test_the_receivers_credential_cannot_take_a_thread_on_postgresql(
    make_server: Callable[..., LiveServer],
    issuer: Issuer,
    tmp_path: Path,
    postgres_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_server(
        **issuer.env(issuer.write_jwks(tmp_path / "jwks.json")),
        RELAY_API_TOKEN=COLLECTOR,
        RELAY_OTLP_HTTP="true",
        RELAY_STORE=postgres_url,
    )
    takeover_refused(server, issuer, caplog)


def test_an_imported_turn_takes_no_thread(
    make_server: Callable[..., LiveServer], issuer: Issuer, tmp_path: Path
) -> None:
    """``POST /imports`` by bob of a trace file whose turn names alice's thread (and
    starts a day in the future): imported, his, kept apart from her thread."""
    server = make_server(**issuer.env(issuer.write_jwks(tmp_path / "jwks.json")))
    alice = bearer(issuer.token("alice"))
    bob = bearer(issuer.token("bob"))
    with httpx.Client(timeout=60) as client:
        first = client.post(
            f"{server.url}/chat", headers=alice, json={"message": "How do refunds work?"}
        )
        thread, own = first.json()["thread_id"], first.json()["turn_id"]
        start = time.time_ns() + DAY_NS
        trace_id = "ab" * 16

        def attrs(**values: str) -> list[dict[str, Any]]:
            return [{"key": k, "value": {"stringValue": v}} for k, v in values.items()]

        span = {
            "traceId": trace_id,
            "spanId": "cd" * 8,
            "name": "invoke_agent helper",
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 3000),
            "attributes": attrs(
                **{
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": "helper",
                    "gen_ai.conversation.id": thread,
                }
            ),
        }
        body = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [span]}]}]}
        imported = client.post(f"{server.url}/imports", headers=bob, json=body)
        assert imported.status_code == 201, imported.text
        record = client.get(f"{server.url}/turns/{trace_id}", headers=bob)
        assert record.status_code == 200 and record.json()["thread_id"] != thread
        assert listed(client, server.url, alice, thread_id=thread) == {own}
        assert listed(client, server.url, bob, thread_id=thread) == set()
        taken = client.post(
            f"{server.url}/chat", headers=bob, json={"message": "hi", "thread_id": thread}
        )
        assert taken.status_code == 404, taken.text
