"""The SPA on graphs nobody here wrote, in a real Chromium against ``span-relay serve
--config langgraph.json``: a langgraph-supervisor graph and a deepagents agent whose tool
waits for LangChain's human-in-the-loop approval (tests/zoo/graphs.py, fake models).

Each graph's scripted model runs one turn, so each test drives one turn per graph.
"""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import running_server
from tests.browser.test_spa import send, states, wait_outcome

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def zoo_server(tmp_path_factory, chromium_path):
    config = tmp_path_factory.mktemp("zoo") / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {
                    "supervisor": "tests.zoo.graphs:build_supervisor",
                    "deep": "tests.zoo.graphs:build_deep",
                }
            }
        )
    )
    with running_server(
        tmp_path_factory, log_name="server-zoo.log", args=("--config", str(config))
    ) as base:
        yield base


def subnodes(page, parent):
    return page.eval_on_selector_all(
        f"svg [data-parent='{parent}']", "els => els.map(e => [e.dataset.subnode, e.dataset.state])"
    )


def test_a_supervisor_turn_draws_its_agents_and_their_inner_nodes(make_page, zoo_server, shot):
    page = make_page(base_url=zoo_server)
    page.goto("/?graph=supervisor")
    page.wait_for_selector("body[data-ready='true']")
    page.wait_for_selector("[data-node='researcher']")
    assert page.locator("#graph-picker option").count() == 2
    send(page, "When was LangGraph first released?")
    wait_outcome(page, "answered")
    drawn = states(page)
    assert drawn["supervisor"] == "ok" and drawn["researcher"] == "ok"
    assert drawn["writer"] == "skipped"  # never handed to
    inner = subnodes(page, "researcher")
    assert inner and all(state == "ok" for _, state in inner), inner
    assert "2024" in page.locator(".msg-agent .msg-body").last.inner_text()
    shot(page, "zoo-supervisor")


def test_a_deep_agent_pauses_for_approval_and_resumes(make_page, zoo_server, shot):
    page = make_page(base_url=zoo_server)
    page.goto("/?graph=deep")
    page.wait_for_selector("body[data-ready='true']")
    page.wait_for_selector("[data-node='model']")
    send(page, "Email Ada that the report is ready.")
    wait_outcome(page, "paused")
    card = page.locator(".approval-card")
    action = card.locator("fieldset[data-action='send_email']")
    assert "ada@example.com" in action.inner_text()
    offered = action.locator("[data-decision]").evaluate_all(
        "els => els.map(e => e.dataset.decision)"
    )
    assert offered == ["approve", "edit", "reject", "respond"]  # its allowed decisions
    assert states(page)["HumanInTheLoopMiddleware.after_model"] == "paused"
    shot(page, "zoo-deep-paused")
    action.locator("[data-decision='approve']").check()
    card.locator("[data-action='submit']").click()
    wait_outcome(page, "answered")
    assert "emailed Ada" in page.locator(".msg-agent .msg-body").last.inner_text()
    assert states(page)["tools"] == "ok"
    shot(page, "zoo-deep-answered")
