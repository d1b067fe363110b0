"""The answer as it is written: the SPA in a real Chromium against a real server renders
``text_delta`` as it arrives (the offline model writes word by word, 20 ms apart), as text,
and puts the final answer (with its citations) in the same place when the turn completes."""

from __future__ import annotations

import itertools

import pytest

from tests.browser.test_spa import open_app, send, wait_outcome

pytestmark = pytest.mark.browser

# Records every text the streaming answer showed, and whether it ever held an element.
GROWTH_JS = """
() => {
  window.__growth = [];
  window.__growthMarkup = 0;
  const box = document.getElementById('messages');
  const look = () => {
    const body = box.querySelector(".msg-agent[data-streaming='true'] .msg-body");
    if (!body) return;
    if (body.children.length) window.__growthMarkup++;
    const last = window.__growth[window.__growth.length - 1];
    if (body.textContent !== last) window.__growth.push(body.textContent);
  };
  new MutationObserver(look).observe(box, {subtree: true, childList: true, characterData: true});
}
"""


#: notes whether, after some change of the page, an answer was streaming while the message
#: list said it was busy (``aria-busy``): the SPA sets both in one task
BUSY_JS = """
window.__busyWhileStreaming = false;
new MutationObserver(() => {
  const streaming = document.querySelector(".msg-agent[data-streaming='true']");
  const busy = document.querySelector('#messages').getAttribute('aria-busy') === 'true';
  if (streaming && busy) window.__busyWhileStreaming = true;
}).observe(document.body, {subtree: true, childList: true, attributes: true});
"""


def growth(page) -> list[str]:
    return page.evaluate("window.__growth")


def test_answer_grows_in_several_steps(page, shot):
    open_app(page)
    page.evaluate(GROWTH_JS)
    page.evaluate(BUSY_JS)
    send(page, "How do refunds work?")
    page.wait_for_selector(".msg-agent[data-streaming='true']")
    # while the answer streamed, the list was busy: read by an observer of the page's
    # mutations as they happened (read now, a loaded machine may have finished the turn)
    assert page.evaluate("window.__busyWhileStreaming") is True
    shot(page, "10-answer-streaming")
    wait_outcome(page, "answered")

    seen = growth(page)
    assert len(seen) >= 5, f"the answer appeared in {len(seen)} step(s): {seen}"
    for shorter, longer in itertools.pairwise(seen):
        assert longer.startswith(shorter) and len(longer) > len(shorter)
    assert page.evaluate("window.__growthMarkup") == 0, "streamed text rendered as markup"
    # one answer bubble: the streamed one became the final answer, with its citations
    answers = page.locator(".msg-agent")
    assert answers.count() == 1
    final = answers.first
    assert final.get_attribute("data-streamed") == "true"
    assert page.locator("[data-streaming]").count() == 0
    assert "msg-streaming" not in (final.get_attribute("class") or "")
    assert page.locator(".msg-agent .citation").count() >= 1
    final_text = page.evaluate("window.spanRelay.model.response.answer")
    assert seen[-1] == final_text  # the last streamed text is the answer, word for word
    assert page.get_attribute("#messages", "aria-busy") is None
    shot(page, "11-answer-streamed")


def test_a_cut_stream_is_replaced_by_the_final_answer(page):
    open_app(page, "?fault=generate%3Dcut%3A6")
    page.evaluate(GROWTH_JS)
    send(page, "How do refunds work?")
    wait_outcome(page, "answered")
    seen = growth(page)
    assert 1 < len(seen) <= 6
    final = page.locator(".msg-agent").first
    text = final.locator(".msg-body").text_content()
    assert text.startswith(seen[-1].rstrip())
    assert "cut short" in text  # the final answer differs: it replaced the streamed text
    assert page.locator(".msg-agent").count() == 1


def test_streamed_text_stays_when_the_turn_pauses_then_the_approval_card(page):
    open_app(page)
    send(page, "Please refund order 1234 ($20).")
    wait_outcome(page, "paused")
    page.click(".approval-card [data-action='approve']")
    wait_outcome(page, "answered")
    assert "Done: I refunded $20.00" in page.locator(".msg-agent").last.inner_text()
    assert page.locator(".msg-agent[data-streaming='true']").count() == 0
