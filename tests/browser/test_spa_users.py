"""The SPA on a relay with users (RELAY_AUTH=jwt), in a real Chromium: the person signs in
with their JWT in the token form, their refund of an order that is not theirs is refused
in a plain answer, and the list of past turns holds their turns and not another user's."""

from __future__ import annotations

import httpx
import pytest

from tests.auth.issuer import Issuer, bearer
from tests.browser.conftest import running_server
from tests.browser.test_spa import send, wait_outcome


@pytest.fixture(scope="module")
def jwt_relay(tmp_path_factory, chromium_path):
    issuer = Issuer()
    jwks = issuer.write_jwks(tmp_path_factory.mktemp("jwks") / "jwks.json")
    with running_server(tmp_path_factory, issuer.env(jwks), log_name="server-jwt.log") as base:
        yield base, issuer


def test_a_person_signs_in_and_sees_only_their_turns(make_page, jwt_relay, shot):
    base, issuer = jwt_relay
    bobs = httpx.post(
        f"{base}/chat",
        headers=bearer(issuer.token("bob")),
        timeout=30,
        json={"message": "How long does shipping take?"},
    ).json()
    assert bobs["status"] == "answered"
    page = make_page(base_url=base)
    page.goto("/")
    page.wait_for_selector("body[data-ready='true']")
    page.wait_for_selector("#token-form:not([hidden])")  # the first request was a 401
    page.fill("#token-input", issuer.token("alice", lifetime_s=600))
    page.press("#token-input", "Enter")
    page.wait_for_selector("#token-form", state="hidden")
    page.wait_for_selector("[data-node='generate']")
    send(page, "Please refund order 1234 ($20).")
    wait_outcome(page, "refused")
    assert "not one of your orders" in page.locator(".msg-refused").last.inner_text()
    assert page.locator(".approval-card").count() == 0  # nobody is asked to approve it
    shot(page, "users-refund-refused")
    page.click("#history-open")
    mine = page.locator("#history-list [data-turn-id]").first
    mine.wait_for()
    assert "refund order 1234" in mine.inner_text()
    assert page.locator(f"#history-list [data-turn-id='{bobs['turn_id']}']").count() == 0
    assert page.locator("#history-list [data-turn-id]").count() == 1
    shot(page, "users-history-own-turns")
