"""The demo's browser-side tool in the SPA (Debian's Chromium): "What time is it for me?"
makes the graph call ``local_time``, a client-executed tool; the run pauses with an
interrupt of type ``client_tool``, the page runs the tool (its own clock and time zone),
resumes the turn by itself with the result and the token, and the graph goes on live to
the answer, which names the browser's time zone."""

from __future__ import annotations

from tests.browser.conftest import RECORDER_JS
from tests.browser.test_spa import open_app, send, states, transitions, wait_outcome


def test_the_browser_runs_local_time_and_the_turn_goes_on(browser, relay_server, shot):
    context = browser.new_context(
        base_url=relay_server,
        viewport={"width": 1280, "height": 800},
        reduced_motion="reduce",
        timezone_id="Asia/Tokyo",
        locale="en-GB",
    )
    errors: list[str] = []
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: (
            errors.append(msg.text)
            if msg.type == "error" and "Failed to load resource" not in msg.text
            else None
        ),
    )
    page.add_init_script(RECORDER_JS)
    try:
        open_app(page)
        send(page, "What time is it for me?")
        wait_outcome(page, "answered")
        answer = page.inner_text("#messages .msg-agent:last-of-type .msg-body")
        assert "where you are (Asia/Tokyo)." in answer, answer
        assert not page.query_selector("#messages .msg-agent:last-of-type .citations")
        assert page.inner_text("#messages .msg-tool").endswith(
            "Your browser ran local_time for the agent."
        )
        assert not page.query_selector("#messages .interrupt-card, #messages [data-resumable]")
        s = states(page)
        assert s["browser_tool"] == "ok" and s["generate"] == "ok", s
        assert "paused" in transitions(page, "browser_tool")  # it waited for the browser
        assert s["human_approval"] == "skipped"
        shot(page, "client-tool-local-time")
    finally:
        context.close()
    assert not errors, errors
