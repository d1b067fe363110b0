"""Two users on one relay (RELAY_AUTH=jwt, the demo app on a real uvicorn): neither sees
nor touches the other's turns by any route; each tool acts as its user; a missing or bad
credential is a 401 with ``WWW-Authenticate`` on every route; the proxy mode trusts its
user header only with the proxy's secret."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from relay import conventions as c
from tests.auth.issuer import Issuer, bearer
from tests.auth.ownership import (
    alices_turns,
    assert_all_reachable,
    assert_none_reachable,
    requests_on,
)
from tests.conftest import LiveServer, iter_frames


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def jwt_server(
    make_server: Callable[..., LiveServer], issuer: Issuer, tmp_path: Path
) -> LiveServer:
    return make_server(**issuer.env(issuer.write_jwks(tmp_path / "jwks.json")))


def test_two_users_cannot_see_or_touch_each_others_turns(
    jwt_server: LiveServer, issuer: Issuer, client: httpx.Client
) -> None:
    alice = bearer(issuer.token("alice"))
    bob = bearer(issuer.token("bob", alg="ES256"))
    turns = alices_turns(client, jwt_server.url, alice)
    assert_none_reachable(client, jwt_server.url, bob, turns)
    assert jwt_server.app.state.ledger.count() == 0  # bob's resume did not run her refund
    assert_all_reachable(client, jwt_server.url, alice, turns)
    assert jwt_server.app.state.ledger.count() == 1
    # bob's own turn is his, and hers stay hers
    own = client.post(
        f"{jwt_server.url}/chat", headers=bob, json={"message": "How long does shipping take?"}
    ).json()
    assert (
        client.get(f"{jwt_server.url}/turns/{own['turn_id']}", headers=bob).json()["status"]
        == "answered"
    )
    assert client.get(f"{jwt_server.url}/turns/{own['turn_id']}", headers=alice).status_code == 404


def test_the_refund_acts_as_the_user(
    jwt_server: LiveServer, issuer: Issuer, client: httpx.Client
) -> None:
    alice = bearer(issuer.token("alice"))
    # order 1234 is the guest's, not hers: a plain refusal, nobody asked to approve it
    refused = client.post(
        f"{jwt_server.url}/chat", headers=alice, json={"message": "Please refund order 1234 ($20)."}
    ).json()
    assert refused["status"] == "refused", refused
    assert "not one of your orders" in refused["answer"] and not refused["interrupts"]
    assert jwt_server.app.state.ledger.count() == 0
    # hers pauses for approval and runs as her; its spans say whom it acted for
    paused = client.post(
        f"{jwt_server.url}/chat", headers=alice, json={"message": "Please refund order 2002 ($15)."}
    ).json()
    assert paused["status"] == "paused"
    done = client.post(
        f"{jwt_server.url}/chat/resume",
        headers=alice,
        json={
            "thread_id": paused["thread_id"],
            "turn_id": paused["turn_id"],
            "resume": {"approved": True},
        },
    ).json()
    assert done["status"] == "answered" and "order 2002" in done["answer"]
    relay = jwt_server.relay
    assert relay.store_processor.force_flush(10_000)
    _, spans = relay.store.turn_spans(paused["turn_id"])
    roots = [s for s in spans if s.attributes.get(c.OPERATION) == c.OP_INVOKE_AGENT]
    assert len(roots) == 2  # the chat and the resume
    assert {s.attributes.get(c.ENDUSER_ID) for s in roots} == {"alice"}
    nodes = [s for s in spans if s.name.startswith("node ")]
    assert nodes and {s.attributes.get(c.ENDUSER_ID) for s in nodes} == {"alice"}


def test_every_route_wants_a_valid_token(
    jwt_server: LiveServer, issuer: Issuer, client: httpx.Client
) -> None:
    alice = bearer(issuer.token("alice"))
    turns = alices_turns(client, jwt_server.url, alice)
    routes = [
        *requests_on(turns),
        ("GET", "/turns", {}),
        ("GET", "/graphs", {}),
        ("GET", "/graph", {}),
        ("POST", "/chat", {"json": {"message": "hi"}}),
        ("POST", "/imports", {"json": {"resourceSpans": []}}),
    ]
    bad = {
        "none": {},
        "expired": bearer(issuer.token("alice", lifetime_s=-3600)),
        "wrong audience": bearer(issuer.token("alice", aud="another-api")),
        "wrong key": bearer(issuer.token("alice", key=Issuer().rsa)),
    }
    for what, headers in bad.items():
        for method, path, kwargs in routes:
            response = client.request(method, f"{jwt_server.url}{path}", headers=headers, **kwargs)
            assert response.status_code == 401, (what, method, path, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer"), what
            assert response.json()["error"]["code"] == "unauthorized"
    # what needs no user: the SPA, liveness, and the settings that tell the SPA to ask
    assert client.get(f"{jwt_server.url}/healthz").status_code == 200
    config = client.get(f"{jwt_server.url}/config").json()
    assert config["auth"] == "jwt" and config["auth_required"] is True


SECRET = "proxy-secret-0123456789"


def test_proxy_mode_trusts_the_user_header_only_with_its_secret(
    make_server: Callable[..., LiveServer], client: httpx.Client
) -> None:
    server = make_server(RELAY_AUTH="proxy", RELAY_PROXY_SECRET=SECRET)
    alice = {"X-Forwarded-User": "alice", "X-Relay-Proxy-Secret": SECRET}
    bob = {"X-Forwarded-User": "bob", "X-Relay-Proxy-Secret": SECRET}
    turns = alices_turns(client, server.url, alice)
    assert_none_reachable(client, server.url, bob, turns)
    # a client that reaches the relay past the proxy and names alice itself
    for headers in (
        {"X-Forwarded-User": "alice"},
        {"X-Forwarded-User": "alice", "X-Relay-Proxy-Secret": "guess"},
    ):
        response = client.get(f"{server.url}/turns/{turns.answered}", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Proxy realm="span-relay"'
    assert_all_reachable(client, server.url, alice, turns)


def test_the_live_turn_list_shows_one_only_ones_own(
    jwt_server: LiveServer, issuer: Issuer, client: httpx.Client
) -> None:
    alice = bearer(issuer.token("alice"))
    bob = bearer(issuer.token("bob"))
    turns = alices_turns(client, jwt_server.url, alice)
    seen: list[dict] = []
    with client.stream(
        "GET", f"{jwt_server.url}/turns", headers={**bob, "Accept": "text/event-stream"}
    ) as response:
        assert response.status_code == 200
        frames = iter_frames(response)
        first = next(f for f in frames if f.event == "turns")
        assert first.json["turns"] == []
        # alice's turn changes first, then bob's: the feed sends changes in order, so
        # anything of hers would come before his
        client.post(f"{jwt_server.url}/chat", headers=alice, json={"message": "Shipping?"})
        own = client.post(
            f"{jwt_server.url}/chat", headers=bob, json={"message": "Shipping?"}
        ).json()
        for frame in frames:
            if frame.event == "turn":
                seen.append(frame.json)
                if frame.json["turn_id"] == own["turn_id"]:
                    break
    assert seen and {t["turn_id"] for t in seen} == {own["turn_id"]}
    assert turns.answered not in {t["turn_id"] for t in seen}
