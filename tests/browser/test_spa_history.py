"""Past turns: pick a turn that already happened and watch it replayed from its spans."""

from __future__ import annotations

import pytest

from tests.browser.test_spa import open_app, send, states, wait_outcome

pytestmark = pytest.mark.browser


def wait_until(page, expression: str, timeout_s: float = 10.0) -> None:
    """Poll an expression with page.evaluate (the CDP path: the page's CSP forbids the
    string evaluation that wait_for_function would need)."""
    import time

    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"never true: {expression}"
        page.wait_for_timeout(50)


def wait_recorded(page, status: str, timeout_s: float = 30.0) -> None:
    """Until the newest turn of the server (GET /turns) has ``status``."""
    import time

    deadline = time.monotonic() + timeout_s  # only turns a hang into a failure
    while page.request.get("/turns?limit=1").json()["turns"][0]["status"] != status:
        assert time.monotonic() < deadline, f"the newest turn never became {status}"
        page.wait_for_timeout(50)


def test_replay_a_past_paused_and_approved_turn(page, shot):
    open_app(page)
    send(page, "Please refund order 1234 ($20).")
    wait_outcome(page, "paused")
    page.click("[data-action='approve']")
    wait_outcome(page, "answered")
    # the list shows the turn's record, written as the run ends (a moment after the page
    # has its answer): wait for it on the server rather than sleeping. The replay needs no
    # wait: a replay request flushes the span store first.
    wait_recorded(page, "answered")

    page.click("#history-open")
    item = page.locator("#history-list [data-turn-id]").first
    item.wait_for()
    assert "refund order 1234" in item.inner_text()
    assert "Answered" in item.inner_text()
    page.check("input[data-speed='4']")
    shot(page, "15-past-turns")
    item.click()

    wait_outcome(page, "answered", timeout=20_000)
    s = states(page)
    for node in ("guardrail_pre", "retrieve_context", "generate", "guardrail_post"):
        assert s[node] == "ok", (node, s)
    assert page.get_attribute("[data-node='human_approval']", "data-instances") == "2"
    assert page.locator(".approval-card [data-action='approve']").count() == 0  # no buttons
    # a replay, not a new turn: the pause is narrated, not asked
    notice = page.locator(".msg-system.msg-paused")
    assert "paused here for a person" in notice.inner_text()  # narrated, not an error
    assert notice.locator(".msg-who").inner_text() == "Paused"
    answer = page.locator(".msg-agent").last.inner_text()
    assert "refunded $20.00" in answer, answer
    assert page.locator(".tl-section").count() == 2
    # over, and still said to be a replay until a new turn starts
    wait_until(page, "document.querySelector('#mode-badge').textContent === 'Replayed'")
    assert page.get_attribute("#mode-badge", "data-mode") == "replay"
    shot(page, "16-replayed")
    send(page, "How do refunds work?")
    wait_outcome(page, "answered")
    assert page.inner_text("#mode-badge") == "Live stream"


def test_an_empty_history_says_so(page, shot):
    open_app(page)
    page.click("#history-open")
    wait_until(
        page,
        "document.querySelector('#history-list').children.length > 0"
        " || !document.querySelector('#history-empty').hidden",
    )
    page.keyboard.press("Escape")
    assert page.is_hidden("#history")
