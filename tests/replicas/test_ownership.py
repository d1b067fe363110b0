"""The ownership matrix across two replicas sharing Redis (the bus) and PostgreSQL (turn
records, spans, checkpoints), RELAY_AUTH=jwt on both: alice's turns, started on A, are
nobody else's on B by any route (the shared store keeps the owner), and hers on B."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.auth.issuer import Issuer, bearer
from tests.auth.ownership import alices_turns, assert_all_reachable, assert_none_reachable


def test_ownership_holds_across_replicas(
    make_instance, redis_url: str, postgres_url: str, tmp_path: Path
) -> None:
    issuer = Issuer()
    shared = {
        "RELAY_BUS": redis_url,
        "RELAY_STORE": postgres_url,
        **issuer.env(issuer.write_jwks(tmp_path / "jwks.json")),
    }
    a = make_instance("a", **shared)
    b = make_instance("b", **shared)
    alice = bearer(issuer.token("alice"))
    bob = bearer(issuer.token("bob"))
    with httpx.Client(timeout=30) as client:
        turns = alices_turns(client, a.url, alice)
        assert_none_reachable(client, b.url, bob, turns)
        assert_none_reachable(client, a.url, bob, turns)
        assert_all_reachable(client, b.url, alice, turns)  # rated and resumed on B
