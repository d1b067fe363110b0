"""The SPA on a relay-only server (``span-relay serve --relay-only``), in a real Chromium.

Such a server runs no graph: agents in other processes export their spans to it over OTLP
and their turns appear on it. The page has no chat box there; it lists the server's turns,
running and past, live (``GET /turns`` as an event stream: no polling, no reload), follows
any of them (``GET /turns/{id}/events`` with the browser's EventSource) or one by its id
(``?wait=`` for one that has not arrived yet), and says what went wrong where a person
looks. The spans come from the span helpers a user copies (tests/interop/spans.py), sent
over OTLP/HTTP the moment each span ends, start markers included: a test holds a node open
(``while_running``) until the page shows what it must show while the node runs, instead of
sleeping and timing arrivals.

Shapes the server does not produce (yet) are served to the page with ``page.route``: a
``graph_discovered`` graph, a pause whose resume must happen in the agent's own process.

Each scenario saves a screenshot under tests/browser/artifacts/.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langgraph.errors import GraphInterrupt
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from playwright.sync_api import Page, expect

from relay import conventions as c
from relay.langgraph.spans import child_span, run_span, start_marker, traced_node
from tests.browser.conftest import running_server
from tests.conftest import free_port
from tests.interop.spans import TOPOLOGY, made_up_run, provider_with

pytestmark = pytest.mark.browser


# ---------------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def relay_only(tmp_path_factory, chromium_path) -> Iterator[str]:
    """A real ``span-relay serve --relay-only``: no graph, the OTLP/HTTP receiver on."""
    env = {"OTEL_TRACES_EXPORTER": "none", "RELAY_OTLP_GRPC": f"127.0.0.1:{free_port()}"}
    with running_server(
        tmp_path_factory, env, log_name="server-relay-only.log", args=("--relay-only",)
    ) as base:
        yield base


@pytest.fixture
def watch(make_page, relay_only) -> Callable[..., Page]:
    """watch(query='', routes=[(pattern, handler)], viewport=) -> a page on the relay-only
    server (those requests answered by the handlers), its graphs read."""

    def open_page(
        query: str = "",
        routes: tuple[tuple[str, Any], ...] = (),
        viewport: dict[str, int] | None = None,
    ) -> Page:
        page = make_page(base_url=relay_only, viewport=viewport)
        for pattern, handler in routes:
            page.route(pattern, handler)
        page.goto("/" + query)
        page.wait_for_selector("body[data-ready='true']")
        return page

    return open_page


def exporter_to(base: str) -> TracerProvider:
    """An agent's tracer provider: each span goes to the relay over OTLP/HTTP as it ends."""
    return provider_with(OTLPSpanExporter(endpoint=f"{base}/v1/traces"))


def row(page: Page, turn_id: str, where: str = "#watch-list"):
    return page.locator(f"{where} button[data-turn-id='{turn_id}']")


def wait_state(page: Page, node: str, state: str) -> None:
    page.wait_for_selector(f"svg [data-node='{node}'][data-state='{state}']")


def wait_outcome(page: Page, outcome: str, timeout: float = 15_000) -> None:
    page.wait_for_selector(f"#outcome[data-outcome='{outcome}']", timeout=timeout)


def node_transitions(page: Page, node: str) -> list[str]:
    return [t["state"] for t in page.evaluate("window.__transitions") if t["node"] == node]


def paused_run(provider: TracerProvider, turn_id: str, thread_id: str = "ext-paused") -> None:
    """A run of the made-up graph whose ``act`` node stops on an interrupt (LangGraph's
    ``interrupt()`` raises GraphInterrupt): the root ends ``paused`` with the question."""
    tracer = provider.get_tracer("external-agent")

    def plan(state: Any, config: Any) -> dict[str, Any]:
        with child_span(tracer, "chat tiny-model", c.OP_CHAT, {c.REQUEST_MODEL: "tiny-model"}):
            pass
        return {}

    def act(state: Any, config: Any) -> dict[str, Any]:
        raise GraphInterrupt(())

    interrupts = [
        {
            "id": "int-1",
            "value": {
                "type": "approval",
                "tool": "send_invoice",
                "args": {"amount": 20, "to": "ACME"},
            },
        }
    ]
    with run_span(
        tracer,
        agent="external",
        thread_id=thread_id,
        turn_id=turn_id,
        run_kind="chat",
        graph_id="made_up",
        topology=TOPOLOGY,
        message="invoice ACME",
        start_markers=True,
    ) as run:
        try:
            for step, (name, fn) in enumerate((("plan", plan), ("act", act)), start=1):
                config = {
                    "metadata": {
                        "langgraph_step": step,
                        "langgraph_checkpoint_ns": f"{name}:task-{step}",
                    }
                }
                traced_node(tracer, name, fn, start_markers=True)({}, config)
        except GraphInterrupt:
            run.finish("paused", **{c.TURN_INTERRUPTS: interrupts})


def run_without_topology(
    provider: TracerProvider, turn_id: str, while_running: Callable[[str], None]
) -> None:
    """A run whose root span names its graph but sends no topology (no
    ``relay.graph.topology``): the relay discovers the graph from the nodes as they run."""
    tracer = provider.get_tracer("external-agent")
    name = "invoke_agent external"
    attributes = {
        c.OPERATION: c.OP_INVOKE_AGENT,
        c.AGENT_NAME: "external",
        c.CONVERSATION_ID: "ext-found",
        c.TURN_ID: turn_id,
        c.RUN_KIND: "chat",
        c.GRAPH_ID: "made_up",
    }
    root = tracer.start_span(name, attributes=attributes)
    start_marker(tracer, root, name, attributes)
    response = {
        "thread_id": "ext-found",
        "turn_id": turn_id,
        "trace_id": "",
        "status": "answered",
        "answer": "found",
        "citations": [],
        "interrupts": [],
        "nodes": [],
    }
    with trace.use_span(root, end_on_exit=False):
        for step, node in enumerate(("plan", "act"), start=1):
            config = {
                "metadata": {
                    "langgraph_step": step,
                    "langgraph_checkpoint_ns": f"{node}:task-{step}",
                }
            }

            def body(state: Any, config: Any, node: str = node) -> dict[str, Any]:
                while_running(node)
                return {}

            traced_node(tracer, node, body, start_markers=True)({}, config)
    root.set_attribute(c.TURN_RESPONSE, json.dumps(response))
    root.set_attribute(c.TURN_OUTCOME, "answered")
    root.end()


# ---------------------------------------------------------------------------- crafted streams


def sse_body(events: list[dict[str, Any]]) -> str:
    out = ["retry: 2000\n\n"]
    for e in events:
        out.append(f"id: {e['seq']}\nevent: {e['type']}\ndata: {json.dumps(e)}\n\n")
    return "".join(out)


def serve_turn(
    page: Page, turn_id: str, events: list[dict[str, Any]], record: dict[str, Any]
) -> None:
    """The page's server has this turn: its record and its events (once: a reconnecting
    EventSource, which sends Last-Event-ID, gets the 204 that says it has everything)."""

    def events_route(route):
        if route.request.headers.get("last-event-id"):
            route.fulfill(status=204, body="")
        else:
            route.fulfill(
                status=200,
                body=sse_body(events),
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
            )

    page.route(f"**/turns/{turn_id}/events*", events_route)
    page.route(
        f"**/turns/{turn_id}",
        lambda route: route.fulfill(
            status=200, headers={"Content-Type": "application/json"}, body=json.dumps(record)
        ),
    )


class Script:
    """Events of one crafted turn, seq and ts filled in."""

    def __init__(self, turn_id: str, thread_id: str = "th-crafted") -> None:
        self.env = {"v": 1, "thread_id": thread_id, "turn_id": turn_id, "trace_id": "d" * 32}
        self.events: list[dict[str, Any]] = []
        self.ts = 1_700_000_000_000.0

    def ev(self, type_: str, **fields: Any) -> Script:
        self.ts += 2.5
        self.events.append(
            {**self.env, "type": type_, "seq": len(self.events) + 1, "ts": self.ts, **fields}
        )
        return self

    def start(self, node: str) -> Script:
        return self.ev(
            "node_started",
            node=node,
            span_id=f"s-{node}",
            parent_span_id="root",
            step=None,
            task_id=None,
            namespace=[],
        )

    def end(self, node: str, status: str = "ok") -> Script:
        return self.ev(
            "node_completed",
            node=node,
            span_id=f"s-{node}",
            namespace=[],
            status=status,
            duration_ms=2.5,
            summary={},
            children=[],
        )


def record_of(turn_id: str, status: str, thread_id: str = "th-crafted") -> dict[str, Any]:
    return {
        "turn_id": turn_id,
        "thread_id": thread_id,
        "status": status,
        "graph": None,
        "message": "",
        "started_at": 1_700_000_000_000.0,
        "ended_at": None,
        "duration_ms": None,
        "response": None,
    }


def edges(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"source": a, "target": b, "conditional": False} for a, b in pairs]


def nodes(*ids: str) -> list[dict[str, str]]:
    return [{"id": n, "label": n} for n in ids]


# ---------------------------------------------------------------------------- scenarios


def test_no_chat_box_on_a_relay_only_server_but_where_its_turns_come_from(watch, shot):
    posted: list[str] = []
    page = watch()
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    # GET /graphs said {"graphs": [], "default": null}: nothing to talk to
    assert page.request.get("/graphs").json() == {"graphs": [], "default": None}
    assert page.is_hidden("#composer")
    assert page.is_hidden("#message") and page.is_hidden("#send")
    assert page.is_visible("#watch")
    note = page.inner_text("#watch-note")
    assert "OTLP" in note and "turns" in note
    assert page.is_visible("#follow-turn-id")
    assert page.inner_text("label[for='follow-turn-id']") == "Follow a turn by id"
    assert page.inner_text("#chat-title") == "Turns"
    # the list of turns is live (an event stream), and empty on a new server
    expect(page.locator("#watch-feed")).to_have_attribute("data-feed", "live")
    assert page.get_attribute("#outcome", "data-outcome") == "none"
    shot(page, "40-relay-only-watch")
    assert not posted, posted  # nothing was sent anywhere (no POST /chat)


def test_the_list_shows_a_running_turn_live_and_the_row_follows_it_to_its_end(
    watch, relay_only, shot
):
    page = watch()
    expect(page.locator("#watch-feed")).to_have_attribute("data-feed", "live")
    page.evaluate("window.__sameDocument = true")  # gone if the page reloaded
    turn_id = uuid.uuid4().hex
    seen: dict[str, Any] = {}

    def hold(node: str) -> None:
        # the node runs (its span has not ended): the row says so, and so does the graph
        if node == "plan":
            listed = row(page, turn_id)
            expect(listed).to_have_attribute("data-status", "running")
            seen["row"] = listed.inner_text()
            seen["live"] = listed.locator(".history-live").count()
            shot(page, "41-relay-only-running-row")
            listed.click()  # follow it live: the graph draws node by node
            wait_state(page, "plan", "running")
            wait_outcome(page, "running")
            seen["badge"] = page.inner_text("#mode-badge")
        if node == "act":
            wait_state(page, "act", "running")
            seen["plan"] = page.get_attribute("svg [data-node='plan']", "data-state")
            shot(page, "42-relay-only-followed-live")

    provider = exporter_to(relay_only)
    made_up_run(provider, turn_id=turn_id, thread_id="ext-live", while_running=hold)
    provider.shutdown()

    assert "Running" in seen["row"] and seen["live"] == 1, seen
    assert "hello" in seen["row"], seen  # the turn's message (relay.turn.message)
    assert "(no message)" not in seen["row"]
    assert seen["badge"] == "Live stream" and seen["plan"] == "ok", seen
    # the row flips when the turn ends, with no reload and no click
    expect(row(page, turn_id)).to_have_attribute("data-status", "answered")
    assert row(page, turn_id).locator(".history-live").count() == 0
    wait_outcome(page, "answered")
    for node in ("plan", "act"):
        wait_state(page, node, "ok")
        assert node_transitions(page, node)[-2:] == ["running", "ok"], node
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator(".msg-agent .msg-body").last.inner_text() == "done"
    shot(page, "43-relay-only-answered")


def test_clicking_a_finished_turn_draws_its_graph(watch, relay_only, shot):
    provider = exporter_to(relay_only)
    turn_id = made_up_run(provider, thread_id="ext-done")
    provider.shutdown()
    page = watch()
    listed = row(page, turn_id)
    expect(listed).to_have_attribute("data-status", "answered")
    listed.click()
    wait_outcome(page, "answered", timeout=20_000)
    assert [
        page.get_attribute(f"svg [data-node='{n}']", "data-state") for n in ("plan", "act")
    ] == ["ok", "ok"]
    assert page.locator("svg [data-node='__end__']").count() == 1
    assert "tiny-model" in page.inner_text("#timeline")
    # the conversation shows the turn's message and its answer
    assert page.inner_text("#messages").split() == ["You", "hello", "Agent", "done"]
    # the Turns panel lists it too, from the same live list
    page.click("#history-open")
    expect(row(page, turn_id, "#history-list")).to_have_attribute("data-status", "answered")
    expect(page.locator("#history-feed")).to_have_attribute("data-feed", "live")
    shot(page, "44-relay-only-turns-panel")
    page.keyboard.press("Escape")


def test_following_an_unknown_id_shows_the_servers_message(watch, shot):
    page = watch("?wait=1")  # following by id waits 1 s (not 30) for the turn to arrive
    refused = page.request.get("/turns/no-such-turn/events")
    assert refused.status == 404
    message = refused.json()["error"]["message"]
    page.fill("#follow-turn-id", "no-such-turn")
    page.press("#follow-turn-id", "Enter")
    wait_outcome(page, "error", timeout=20_000)
    assert message in page.inner_text("#outcome-detail")
    assert message in page.inner_text("#follow-turn-note")
    # where the graph would be: the reason, never "No turn yet"
    assert page.is_visible("#graph-empty")
    assert message in page.inner_text("#graph-empty")
    assert "No turn yet" not in page.inner_text("#outcome")
    shot(page, "45-relay-only-unknown-id")


def test_follow_by_id_waits_for_a_turn_that_has_not_arrived(watch, relay_only, shot):
    page = watch("?wait=30")
    turn_id = uuid.uuid4().hex
    page.fill("#follow-turn-id", turn_id)
    page.press("#follow-turn-id", "Enter")
    wait_outcome(page, "waiting")
    assert "waiting" in page.inner_text("#follow-turn-note").lower()
    provider = exporter_to(relay_only)
    made_up_run(provider, turn_id=turn_id, thread_id="ext-late")
    provider.shutdown()
    wait_outcome(page, "answered")
    wait_state(page, "act", "ok")
    shot(page, "46-relay-only-followed-by-id")


def test_a_replay_that_fails_says_why_where_the_graph_is(watch, relay_only, shot):
    provider = exporter_to(relay_only)
    turn_id = made_up_run(provider, thread_id="ext-gone")
    provider.shutdown()
    page = watch()
    gone = {
        "error": {
            "code": "turn_expired",
            "message": "The spans of this turn are no longer stored (a test says so).",
        }
    }
    page.route(
        f"**/turns/{turn_id}/events?source=spans*",
        lambda route: route.fulfill(
            status=410, headers={"Content-Type": "application/json"}, body=json.dumps(gone)
        ),
    )
    page.route(
        f"**/turns/{turn_id}/events",
        lambda route: route.fulfill(
            status=404,
            headers={"Content-Type": "application/json"},
            body=json.dumps({"error": {"code": "unknown_turn", "message": "No log either."}}),
        ),
    )
    row(page, turn_id).click()
    wait_outcome(page, "error")
    # the replay failed, the log was tried instead and failed too: both said, near the graph
    assert "No log either." in page.inner_text("#outcome-detail")
    assert "No log either." in page.inner_text("#graph-empty")
    assert "longer stored (a test says so)" in page.inner_text("#messages")
    assert page.locator("svg [data-node]").count() == 0
    shot(page, "47-relay-only-replay-failed")


def test_a_paused_turn_resumed_in_its_agents_process_has_no_resume_button(watch, relay_only, shot):
    provider = exporter_to(relay_only)
    turn_id = uuid.uuid4().hex
    paused_run(provider, turn_id)
    provider.shutdown()
    page = watch()
    listed = row(page, turn_id)
    expect(listed).to_have_attribute("data-status", "paused")
    listed.click()
    wait_outcome(page, "paused")
    wait_state(page, "act", "paused")
    card = page.locator(".approval-card")
    card.wait_for()
    assert "send_invoice" in card.inner_text()
    assert card.get_attribute("data-resumable") == "false"
    assert card.locator("button, textarea, input, form").count() == 0
    assert card.locator(".resume-elsewhere").inner_text().strip()
    assert page.is_hidden("#composer")
    shot(page, "48-relay-only-paused-real")


@pytest.mark.parametrize("said_in", ["resume", "event"])
def test_a_pause_with_no_resume_path_shows_the_servers_words_and_no_form(watch, shot, said_in):
    page = watch()
    words = "Resume it where the agent runs: POST /resume on the agent's own service."
    resume = {"method": "POST", "path": None, "body": {"resume": "<your answer>"}}
    where = {"message": words} if said_in == "event" else {}
    if said_in == "resume":
        resume["message"] = words
    s = Script("t-elsewhere")
    s.ev(
        "graph_topology",
        graph_id="g",
        nodes=nodes("__start__", "draft", "review", "__end__"),
        edges=edges(("__start__", "draft"), ("draft", "review"), ("review", "__end__")),
        run_kind="chat",
    )
    s.start("draft").end("draft").start("review").end("review", status="paused")
    s.ev(
        "paused", interrupts=[{"id": "i-1", "value": "Publish the draft?"}], resume=resume, **where
    )
    serve_turn(page, "t-elsewhere", s.events, record_of("t-elsewhere", "paused"))
    page.fill("#follow-turn-id", "t-elsewhere")
    page.press("#follow-turn-id", "Enter")
    wait_outcome(page, "paused")
    card = page.locator(".approval-card")
    card.wait_for()
    assert "Publish the draft?" in card.inner_text()
    assert card.locator(".resume-elsewhere").inner_text() == words
    assert card.locator("button, textarea, input, form").count() == 0
    assert page.get_attribute("svg [data-node='review']", "data-state") == "paused"
    shot(page, f"49-relay-only-paused-elsewhere-{said_in}")


def test_a_discovered_graph_grows_and_keeps_its_node_states(watch, shot):
    page = watch()
    s = Script("t-found")
    s.ev(
        "graph_topology", graph_id="LangGraph", nodes=[], edges=[], run_kind="chat", discovered=True
    )
    s.ev(
        "graph_discovered",
        graph_id="LangGraph",
        nodes=nodes("__start__", "triage"),
        edges=edges(("__start__", "triage")),
        discovered=True,
    )
    s.start("triage")
    s.ev("a_type_from_the_future", anything={"at": "all"})  # unknown: ignored
    s.ev(
        "graph_discovered",
        graph_id="LangGraph",
        nodes=nodes("__start__", "triage", "answer"),
        edges=edges(("__start__", "triage"), ("triage", "answer")),
        discovered=True,
    )
    s.end("triage").start("answer").end("answer")
    s.ev(
        "graph_discovered",
        graph_id="LangGraph",
        nodes=nodes("__start__", "triage", "answer", "__end__"),
        edges=edges(("__start__", "triage"), ("triage", "answer"), ("answer", "__end__")),
        discovered=True,
    )
    s.ev(
        "turn_completed",
        response={
            "status": "answered",
            "answer": "Found it.",
            "citations": [],
            "interrupts": [],
            "nodes": [],
        },
    )
    serve_turn(page, "t-found", s.events, record_of("t-found", "running"))
    page.fill("#follow-turn-id", "t-found")
    page.press("#follow-turn-id", "Enter")
    wait_outcome(page, "answered")
    for node in ("triage", "answer"):
        wait_state(page, node, "ok")
    wait_state(page, "__end__", "ok")
    # the graph was replaced as it grew: triage kept its state (never back to waiting)
    assert node_transitions(page, "triage") == ["idle", "running", "ok"]
    assert page.is_visible("#graph-caption")
    assert "discovered from the spans" in page.inner_text("#graph-caption")
    assert "graph-discovered" in (page.get_attribute("#graph", "class") or "")
    assert page.is_visible("#legend-discovered")
    dash = page.eval_on_selector(
        "[data-edge='triage->answer']", "e => getComputedStyle(e).strokeDasharray"
    )
    assert dash not in ("", "none"), dash
    assert page.locator("svg [data-node]").count() == 4
    shot(page, "50-relay-only-discovered")


def test_the_list_says_when_it_is_not_live(watch, relay_only, shot):
    provider = exporter_to(relay_only)
    turn_id = made_up_run(provider, thread_id="ext-static")
    provider.shutdown()

    def older_server(route):
        # an older server: no event stream of turns (only the JSON)
        if "text/event-stream" in (route.request.headers.get("accept") or ""):
            route.fulfill(
                status=406,
                headers={"Content-Type": "application/json"},
                body=json.dumps({"error": {"code": "not_acceptable", "message": "JSON only"}}),
            )
        else:
            route.continue_()

    page = watch(routes=(("**/turns?*", older_server),))
    expect(page.locator("#watch-feed")).to_have_attribute("data-feed", "static")
    assert "not live" in page.inner_text("#watch-feed-note")
    expect(row(page, turn_id)).to_have_attribute("data-status", "answered")
    shot(page, "51-relay-only-list-not-live")


def test_on_a_server_with_graphs_the_turns_panel_is_live_too(make_page, shot):
    """The demo server: a turn that begins while the panel is open appears in it, marked
    running, and its row changes when it ends, without reopening the panel."""
    page = make_page()
    page.goto("/")
    page.wait_for_selector("body[data-ready='true']")
    page.click("#history-open")
    expect(page.locator("#history-feed")).to_have_attribute("data-feed", "live")
    graph = page.request.get("/graphs").json()["default"]
    detail = page.request.get(f"/graphs/{graph}").json()
    # the demo's generate node sleeps 600 s: running whatever the machine's speed
    started = page.request.post(
        detail["routes"]["chat"],
        data={"message": detail["examples"][0]},
        headers={"X-Relay-Fault": "generate=delay:600", "Prefer": "respond-async"},
    )
    assert started.status == 202, started.text()
    turn_id = started.json()["turn_id"]
    listed = row(page, turn_id, "#history-list")
    expect(listed).to_have_attribute("data-status", "running")
    assert listed.locator(".history-live").count() == 1
    assert detail["examples"][0] in listed.inner_text()
    shot(page, "52-turns-panel-live-running")
    cancelled = page.request.post(f"/turns/{turn_id}/cancel")
    assert cancelled.ok, cancelled.text()
    expect(listed).to_have_attribute("data-status", "cancelled")
    assert listed.locator(".history-live").count() == 0
    assert page.is_visible("#history")  # the same panel, never reopened


def test_a_narrow_relay_only_page(watch, relay_only, shot):
    provider = exporter_to(relay_only)
    turn_id = made_up_run(provider, thread_id="ext-narrow")
    provider.shutdown()
    page = watch(viewport={"width": 420, "height": 860})
    assert page.is_hidden("#composer") and page.is_visible("#watch")
    row(page, turn_id).click()
    wait_outcome(page, "answered", timeout=20_000)
    wait_state(page, "act", "ok")
    assert page.get_attribute("#graph", "data-direction") == "TB"
    shot(page, "53-relay-only-narrow", full_page=True)


def test_a_graph_discovered_over_otlp_is_drawn_node_by_node(watch, relay_only, shot):
    """An agent that sends no topology: the relay's graph_discovered events draw it."""
    page = watch()
    turn_id = uuid.uuid4().hex
    seen: dict[str, Any] = {}

    def hold(node: str) -> None:
        if node == "plan":
            row(page, turn_id).click()
            wait_state(page, "plan", "running")
            seen["caption"] = page.is_visible("#graph-caption")
            seen["plan_nodes"] = page.eval_on_selector_all(
                "svg [data-node]", "els => els.map(e => e.dataset.node)"
            )
        if node == "act":
            wait_state(page, "act", "running")
            seen["plan"] = page.get_attribute("svg [data-node='plan']", "data-state")
            seen["edge"] = page.locator("[data-edge='plan->act']").count()
            shot(page, "54-relay-only-discovered-over-otlp")

    provider = exporter_to(relay_only)
    # the row to click must be there first: the root's start marker makes it
    started = {"done": False}

    def hold_after_row(node: str) -> None:
        if not started["done"]:
            expect(row(page, turn_id)).to_have_attribute("data-status", "running")
            started["done"] = True
        hold(node)

    run_without_topology(provider, turn_id, hold_after_row)
    provider.shutdown()
    assert seen["caption"] is True, seen
    assert "plan" in seen["plan_nodes"] and "act" not in seen["plan_nodes"], seen
    assert seen["plan"] == "ok" and seen["edge"] == 1, seen
    wait_outcome(page, "answered")
    wait_state(page, "act", "ok")
    assert node_transitions(page, "plan")[-2:] == ["running", "ok"]
    assert "graph-discovered" in (page.get_attribute("#graph", "class") or "")
