"""The SPA shows a node's latest progress (``custom`` events, docs/events.md) in a real
Chromium against ``span-relay serve --config langgraph.json``: a graph written for the test
(tests/langgraph/progress_graph.py: ``build_gated``) whose node reports a fraction, waits
for the test to open its gate, reports the next one, then a message without a fraction."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import running_server
from tests.browser.test_spa import send, wait_outcome
from tests.langgraph.progress_graph import GATE_ENV

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    return tmp_path_factory.mktemp("gate")


@pytest.fixture(scope="module")
def progress_server(tmp_path_factory, chromium_path, gate):
    config = tmp_path_factory.mktemp("progress") / "langgraph.json"
    config.write_text(
        json.dumps({"graphs": {"gated": "tests.langgraph.progress_graph:build_gated"}})
    )
    with running_server(
        tmp_path_factory,
        extra_env={GATE_ENV: str(gate)},
        log_name="server-progress.log",
        args=("--config", str(config)),
    ) as base:
        yield base


def progress(page):
    """The node's shown progress: its status text (data-progress), the bar's fraction."""
    return page.eval_on_selector(
        "[data-node='gated']",
        """g => ({
            text: g.dataset.progress ?? null,
            status: g.querySelector('.node-status').textContent,
            fraction: g.querySelector('.node-progress')?.dataset.fraction ?? null,
            width: Number(g.querySelector('.node-progress')?.getAttribute('width') ?? 0),
            track: Number(g.querySelector('.lat-track').getAttribute('width')),
        })""",
    )


def test_a_node_shows_its_latest_progress(make_page, progress_server, gate, shot):
    page = make_page(base_url=progress_server)
    page.goto("/?graph=gated")
    page.wait_for_selector("body[data-ready='true']")
    page.wait_for_selector("[data-node='gated']")
    send(page, "Check the rows.")

    page.wait_for_selector("[data-node='gated'][data-progress='prepare 25%']")
    shown = progress(page)
    assert shown["status"] == "prepare 25%" and shown["fraction"] == "0.25"
    assert shown["width"] == pytest.approx(shown["track"] * 0.25, abs=0.5)
    shot(page, "progress-25")
    (gate / "go-1").touch()

    page.wait_for_selector("[data-node='gated'][data-progress='prepare 75%']")
    shown = progress(page)
    assert shown["fraction"] == "0.75"
    assert shown["width"] == pytest.approx(shown["track"] * 0.75, abs=0.5)
    (gate / "go-2").touch()

    page.wait_for_selector("[data-node='gated'][data-progress='checking the rows']")
    shown = progress(page)
    assert shown["status"] == "checking the rows" and shown["fraction"] is None  # no bar
    shot(page, "progress-text")
    (gate / "go-3").touch()

    wait_outcome(page, "answered")
    done = progress(page)
    assert done["text"] is None and done["fraction"] is None  # done: its duration again
    label = page.get_attribute("[data-node='gated']", "aria-label")
    assert "last progress: checking the rows" in label
