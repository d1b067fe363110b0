"""The SPA for any graph, in a real Chromium against a real span-relay server.

The page takes every word about a graph from the server (``GET /graphs``, ``GET
/graphs/{name}``: title, description, example messages, topology, routes), sends its turns
to that graph's routes, answers any interrupt and opens any turn by its id. The tests of the
demo server's own answers come first; then the shapes the demo never produces (several
graphs, a relay-only server, an older server, a compiled subgraph, LangChain's
human-in-the-loop review, a free-form interrupt) are served to the page with ``page.route``.

Each scenario saves a screenshot under tests/browser/artifacts/.
"""

from __future__ import annotations

import itertools
import json
import time

import pytest

from tests.browser.test_spa import open_app, send, states, wait_outcome
from tests.browser.test_spa_history import wait_until

pytestmark = pytest.mark.browser


# ---------------------------------------------------------------------------- helpers


@pytest.fixture
def served(page):
    """The server's default graph as ``GET /graphs/{name}`` gives it (the demo: support_agent)."""
    listed = page.request.get("/graphs")
    assert listed.status == 200, listed.text()
    catalog = listed.json()
    assert catalog["default"], catalog
    graph = page.request.get(f"/graphs/{catalog['default']}").json()
    graph["catalog"] = catalog
    return graph


def open_page(page, query=""):
    """Open the SPA and wait until it has read the server's graphs (any graph, or none)."""
    page.goto("/" + query)
    page.wait_for_selector("body[data-ready='true']")


def example(graph, words):
    """The served example message that contains ``words`` (the demo's own script)."""
    found = [e for e in graph["examples"] if words in e.lower()]
    assert found, f"no example about {words!r} in {graph['examples']}"
    return found[0]


def posts(page):
    """Every POST the page makes: [(path, body)], as the server receives it."""
    seen = []

    def on_request(request):
        if request.method == "POST":
            path = "/" + request.url.split("/", 3)[3]
            seen.append((path, json.loads(request.post_data or "null")))

    page.on("request", on_request)
    return seen


def wait_status(page, turn_id, status, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while page.request.get(f"/turns/{turn_id}").json()["status"] != status:
        assert time.monotonic() < deadline, f"turn {turn_id} never became {status}"
        page.wait_for_timeout(50)


def fulfill_json(route, body, status=200):
    route.fulfill(
        status=status, headers={"Content-Type": "application/json"}, body=json.dumps(body)
    )


def answer_json(body, status=200):
    """A route handler that answers ``body`` as JSON."""
    return lambda route: fulfill_json(route, body, status)


def sse(events):
    """A recorded SSE body: the relay's framing, each event under its seq."""
    out = ["retry: 2000\n\n"]
    for e in events:
        out.append(f"id: {e['seq']}\nevent: {e['type']}\ndata: {json.dumps(e)}\n\n")
    return "".join(out)


def fulfill_sse(route, events):
    route.fulfill(
        status=200,
        body=sse(events),
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
    )


class Script:
    """Events of one crafted turn (thread, turn, trace, seq and ts filled in)."""

    def __init__(self, turn="t-any", thread="th-any", trace="c" * 32, seq=0, ts=5000.0):
        self.env = {"v": 1, "thread_id": thread, "turn_id": turn, "trace_id": trace}
        self.seq = seq
        self.ts = ts
        self.events = []

    def ev(self, type_, **fields):
        self.seq += 1
        self.ts += 1.5
        self.events.append({**self.env, "type": type_, "seq": self.seq, "ts": self.ts, **fields})
        return self

    def start(self, node, span, namespace=(), parent="root"):
        return self.ev(
            "node_started",
            node=node,
            span_id=span,
            parent_span_id=parent,
            step=1,
            task_id=span,
            namespace=list(namespace),
        )

    def end(self, node, span, namespace=(), status="ok"):
        return self.ev(
            "node_completed",
            node=node,
            span_id=span,
            namespace=list(namespace),
            status=status,
            duration_ms=1.5,
            summary={},
            children=[],
        )


def topology(*nodes):
    ids = ["__start__", *nodes, "__end__"]
    return {
        "graph_id": "g",
        "nodes": [{"id": n, "label": n} for n in ids],
        "edges": [
            {"source": a, "target": b, "conditional": False} for a, b in itertools.pairwise(ids)
        ],
    }


def graph_detail(name, title, examples, topo, description=None):
    base = f"/graphs/{name}"
    routes = {"chat": f"{base}/chat", "resume": f"{base}/chat/resume", "agui": f"{base}/agui"}
    return {
        "name": name,
        "title": title,
        "description": description,
        "examples": examples,
        "graph_id": name,
        "topology": topo,
        "routes": routes,
    }


def serve_graphs(page, *details, default=None):
    """The server answers GET /graphs and GET /graphs/{name} with these graphs."""
    catalog = {
        "graphs": [{k: d[k] for k in ("name", "title", "graph_id", "routes")} for d in details],
        "default": default or (details[0]["name"] if details else None),
    }
    page.route("**/graphs", answer_json(catalog))
    for d in details:
        page.route(f"**/graphs/{d['name']}", answer_json(d))
    return catalog


def subnodes(page, parent):
    return page.eval_on_selector_all(
        f"[data-node='{parent}'] [data-subnode]",
        "els => els.map(e => [e.querySelector('.subnode-label').textContent, e.dataset.state])",
    )


# ---------------------------------------------------------------------------- the demo server


def test_title_examples_and_topology_come_from_the_server(page, served, shot):
    open_app(page)
    title = served["title"]
    assert page.title() == f"{title} · span-relay"
    assert title in page.text_content("#subtitle")
    chips = page.eval_on_selector_all(
        "#suggestions [data-suggest]", "els => els.map(e => e.dataset.suggest)"
    )
    assert chips == served["examples"] and chips
    if served["description"]:
        assert page.inner_text("#graph-description") == served["description"]
    assert page.is_hidden("#graph-pick"), "one graph: no picker"
    assert page.is_hidden("#server-note")
    assert set(states(page)) == {n["id"] for n in served["topology"]["nodes"]}
    assert page.get_attribute("#message-label", "for") == "message"
    assert title in page.text_content("#message-label")
    shot(page, "20-graph-from-server")

    sent = posts(page)
    first = served["examples"][0]
    page.locator("#suggestions [data-suggest]").first.click()
    wait_outcome(page, "answered")
    assert sent[0] == (served["routes"]["chat"], {"message": first}), sent
    assert page.locator(".msg-user .msg-body").last.inner_text() == first
    assert page.locator(".msg-agent .msg-who").last.inner_text() == title


def test_approval_card_round_trip(page, served, shot):
    open_app(page)
    sent = posts(page)
    send(page, example(served, "refund order"))
    wait_outcome(page, "paused")
    card = page.locator(".approval-card")
    card.wait_for()
    assert card.get_attribute("data-kind") == "approval"
    assert "issue_refund" in card.inner_text() and "1234" in card.inner_text()
    assert "issue_refund needs approval" in page.text_content("#outcome-detail")
    assert page.evaluate("document.activeElement.classList.contains('approval-card')")
    assert page.get_attribute(".approval-card", "aria-labelledby") == page.get_attribute(
        ".approval-card h3", "id"
    )
    shot(page, "21-approval-card")

    page.fill("#approval-comment", "Checked with the customer")
    page.click("[data-action='approve']")
    wait_outcome(page, "answered")
    assert sent[0][0] == served["routes"]["chat"]
    resume_path, resume_body = sent[1]
    assert resume_path == served["routes"]["resume"], sent
    turn = page.evaluate("window.spanRelay.model.turnId")
    thread = page.evaluate("window.spanRelay.model.threadId")
    assert resume_body == {
        "thread_id": thread,
        "turn_id": turn,
        "resume": {"approved": True, "comment": "Checked with the customer"},
    }
    assert card.get_attribute("data-decision") == "approved"
    assert "You approved this action." in card.inner_text()
    assert "Comment: Checked with the customer" in card.inner_text()
    assert "refunded" in page.locator(".msg-agent").last.inner_text().lower()
    shot(page, "22-approval-approved")


def test_open_a_finished_turn_by_id_replays_it(page, served, shot):
    made = page.request.post(
        served["routes"]["chat"], data={"message": served["examples"][0]}
    ).json()
    wait_status(page, made["turn_id"], made["status"])
    open_page(page)
    page.click("#history-open")
    page.fill("#open-turn-id", f"  {made['turn_id']}  ")
    shot(page, "23-open-turn-by-id")
    page.press("#open-turn-id", "Enter")
    wait_outcome(page, made["status"], timeout=20_000)
    assert page.is_hidden("#history")
    assert page.locator(".msg-user .msg-body").inner_text() == served["examples"][0]
    assert page.locator(".msg-agent .msg-body").last.inner_text().startswith(made["answer"][:40])
    wait_until(page, "document.querySelector('#mode-badge').textContent === 'Replayed'")
    assert page.evaluate("window.spanRelay.model.turnId") == made["turn_id"]


def test_open_a_running_turn_by_id_follows_it_live(page, served, shot):
    # generate sleeps 600 s: the turn is running whatever the machine's speed; Stop ends it
    started = page.request.post(
        served["routes"]["chat"],
        data={"message": served["examples"][0]},
        headers={"X-Relay-Fault": "generate=delay:600", "Prefer": "respond-async"},
    )
    assert started.status == 202, started.text()
    turn_id = started.json()["turn_id"]
    open_page(page)
    page.click("#history-open")
    listed = page.locator(f"#history-list [data-turn-id='{turn_id}']")
    listed.wait_for()
    assert listed.get_attribute("data-status") == "running"
    assert "live" in listed.inner_text().lower()
    page.fill("#open-turn-id", turn_id)
    page.click("#open-turn-go")
    wait_outcome(page, "running")
    page.wait_for_selector("[data-node='generate'][data-state='running']")
    assert page.inner_text("#mode-badge") == "Live stream"
    assert page.locator(".msg-user .msg-body").inner_text() == served["examples"][0]
    shot(page, "24-followed-live")
    page.click("#stop")
    wait_outcome(page, "cancelled", timeout=10_000)
    assert page.request.get(f"/turns/{turn_id}").json()["status"] == "cancelled"


def test_a_paused_turn_opened_from_the_list_can_be_answered(page, served, shot):
    made = page.request.post(
        served["routes"]["chat"], data={"message": example(served, "refund order")}
    ).json()
    assert made["status"] == "paused", made
    open_page(page)
    sent = posts(page)
    page.click("#history-open")
    item = page.locator(f"#history-list [data-turn-id='{made['turn_id']}']")
    item.wait_for()
    assert item.get_attribute("data-status") == "paused"
    item.click()
    wait_outcome(page, "paused")
    card = page.locator(".approval-card")
    card.wait_for()
    assert "issue_refund" in card.inner_text()
    assert page.get_attribute("[data-node='human_approval']", "data-state") == "paused"
    page.click("[data-action='reject']")
    wait_outcome(page, "answered")
    path, body = sent[-1]
    assert path.endswith("/chat/resume"), sent
    assert body == {
        "thread_id": made["thread_id"],
        "turn_id": made["turn_id"],
        "resume": {"approved": False, "comment": "Rejected by the operator."},
    }
    assert "did not issue" in page.locator(".msg-agent").last.inner_text().lower()
    assert page.request.get(f"/turns/{made['turn_id']}").json()["status"] == "answered"


def test_an_unknown_turn_id_says_so(page):
    open_page(page)
    page.click("#history-open")
    page.fill("#open-turn-id", "no-such-turn")
    page.press("#open-turn-id", "Enter")
    wait_until(page, "document.querySelector('#open-turn-note').textContent.includes('no turn')")
    assert "no-such-turn" in page.inner_text("#open-turn-note")
    assert page.get_attribute("#outcome", "data-outcome") == "none"


# ---------------------------------------------------------------------------- other servers


ALPHA = graph_detail(
    "alpha",
    "Alpha planner",
    ["Plan a trip", "Plan a party"],
    topology("plan", "act"),
    description="Plans, then acts.",
)
BETA = graph_detail("beta", "Beta writer", ["Write a poem"], topology("draft", "edit", "publish"))


def test_several_graphs_a_picker_kept_in_the_url(page, shot):
    serve_graphs(page, ALPHA, BETA)
    listed = []
    page.on("request", lambda r: listed.append(r.url) if "/turns?" in r.url else None)
    open_page(page, "?fault=plan%3Ddelay%3A1")
    assert page.is_visible("#graph-pick")
    options = page.eval_on_selector_all("#graph-picker option", "els => els.map(e => e.value)")
    assert options == ["alpha", "beta"]
    assert page.title() == "Alpha planner · span-relay"
    assert "graph=alpha" in page.url and "fault=" in page.url
    page.select_option("#graph-picker", "beta")
    page.wait_for_selector("[data-node='publish']")
    assert "graph=beta" in page.url and "fault=" in page.url
    assert page.title() == "Beta writer · span-relay"
    assert page.eval_on_selector_all(
        "#suggestions [data-suggest]", "els => els.map(e => e.dataset.suggest)"
    ) == ["Write a poem"]
    assert page.locator("[data-node='plan']").count() == 0
    assert page.is_hidden("#graph-description")
    page.click("#history-open")
    wait_until(
        page,
        "!document.querySelector('#history-empty').hidden"
        " || document.querySelector('#history-list').children.length > 0",
    )
    assert any("graph=beta" in u for u in listed), listed
    page.keyboard.press("Escape")
    shot(page, "25-graph-picker")
    page.go_back()
    page.wait_for_selector("[data-node='plan']")
    assert page.title() == "Alpha planner · span-relay"
    assert page.input_value("#graph-picker") == "alpha"
    # a link to a graph opens it
    open_page(page, "?graph=beta")
    page.wait_for_selector("[data-node='draft']")
    assert page.is_hidden("#server-note")
    # an unknown one says so and shows the default
    open_page(page, "?graph=gamma")
    page.wait_for_selector("[data-node='plan']")
    assert "gamma" in page.inner_text("#server-note")


def test_a_relay_only_server_watches_turns_only(page, shot):
    serve_graphs(page)
    open_page(page)
    assert page.is_hidden("#composer")
    assert "watches turns only" in page.inner_text("#chat-empty")
    assert page.locator("#suggestions [data-suggest]").count() == 0
    assert page.is_hidden("#graph-pick")
    assert "watching turns" in page.inner_text("#subtitle")
    page.click("#history-open")
    assert page.is_visible("#open-turn-id")
    shot(page, "26-relay-only")


def test_an_older_server_without_graphs_is_named_and_still_used(page, shot):
    page.route("**/graphs", answer_json({"detail": "Not Found"}, 404))
    sent = posts(page)
    open_app(page)  # the topology from GET /graph
    note = page.inner_text("#server-note")
    assert "GET /graphs answered 404" in note and "older than this page" in note
    assert page.get_attribute("#server-note", "data-kind") == "error"
    assert page.is_visible("#composer")
    assert page.locator("#suggestions [data-suggest]").count() == 0
    send(page, "How do refunds work?")
    wait_outcome(page, "answered")
    assert sent[0][0] == "/chat"
    assert page.locator(".msg-agent .msg-who").last.inner_text() == "Agent"
    shot(page, "27-older-server")


# ---------------------------------------------------------------------------- subgraphs, interrupts

REVIEW = {
    "action_requests": [
        {
            "name": "send_email",
            "args": {"to": "a@example.com", "subject": "Hi"},
            "description": "Sending email needs a review",
        },
        {"name": "delete_file", "args": {"path": "/tmp/old.txt"}},
    ],
    "review_configs": [
        {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]},
        {"action_name": "delete_file", "allowed_decisions": ["approve", "reject"]},
    ],
}
TEAM = graph_detail("team", "Research team", ["Research something"], topology("research", "write"))


def subgraph_run():
    s = Script(turn="t-team", thread="th-team")
    s.ev("graph_topology", run_kind="chat", **TEAM["topology"])
    s.start("research", "r")
    s.start("agent", "a1", ["research"], parent="r").end("agent", "a1", ["research"])
    s.start("tools", "tl", ["research"], parent="r")
    s.start("fetch", "f", ["research", "tools"], parent="tl")
    s.end("fetch", "f", ["research", "tools"], status="error")
    s.end("tools", "tl", ["research"])
    s.start("agent", "a2", ["research"], parent="r").end("agent", "a2", ["research"])
    s.end("research", "r")
    s.start("write", "w")
    s.start("review", "rv", ["write"], parent="w")
    s.start("audit", "au")  # a node the topology does not list: drawn, not dropped
    s.end("audit", "au")
    s.end("review", "rv", ["write"], status="paused")
    s.end("write", "w", status="paused")
    interrupts = [{"id": "hitl-1", "value": REVIEW}]
    s.ev(
        "paused",
        interrupts=interrupts,
        resume={"method": "POST", "path": "/graphs/team/chat/resume", "body": {}},
    )
    return s


def test_subgraph_nodes_inside_their_parent_and_a_review_card(page, shot):
    serve_graphs(page, TEAM)
    first = subgraph_run()
    page.route("**/graphs/team/chat", lambda route: fulfill_sse(route, first.events))
    resumed = []

    def resume(route):
        resumed.append(json.loads(route.request.post_data))
        s = Script(turn="t-team", thread="th-team", trace="d" * 32, seq=first.seq, ts=first.ts)
        s.ev("graph_topology", run_kind="resume", **TEAM["topology"])
        s.start("write", "w2").start("review", "rv2", ["write"], parent="w2")
        s.end("review", "rv2", ["write"]).end("write", "w2")
        s.ev(
            "turn_completed",
            response={
                "thread_id": "th-team",
                "turn_id": "t-team",
                "trace_id": "d" * 32,
                "status": "answered",
                "answer": "Sent the edited email; kept the file.",
                "citations": [],
                "interrupts": [],
                "nodes": [],
            },
        )
        fulfill_sse(route, s.events)

    page.route("**/graphs/team/chat/resume", resume)
    open_page(page)
    page.wait_for_selector("[data-node='research']")
    page.click("#suggestions [data-suggest='Research something']")
    wait_outcome(page, "paused")

    # the subgraph's inner nodes, inside research (nested by their path), each with its state
    assert subnodes(page, "research") == [["agent", "ok"], ["tools", "ok"], ["fetch", "error"]]
    assert page.get_attribute("[data-node='research'] [data-subnode]", "data-instances") == "2"
    assert subnodes(page, "write") == [["review", "paused"]]
    s = states(page)
    assert s["research"] == "ok" and s["write"] == "paused"
    assert "agent" not in s and "fetch" not in s, "inner nodes are not top-level nodes"
    assert s["audit"] == "ok"
    assert "node-discovered" in page.get_attribute("[data-node='audit']", "class")
    # an inner node is focusable and has its own details
    fetch = page.locator("[data-subnode*='fetch']")
    assert "research › tools › fetch: failed" in fetch.get_attribute("aria-label")
    fetch.click()
    assert "research › tools › fetch" in page.inner_text("#node-details")
    page.click("[data-node='research']", position={"x": 30, "y": 20})
    assert "inside: research › agent" in page.inner_text("#node-details")
    # the timeline indents inner nodes under their parent
    assert page.locator(".tl-row.tl-node.depth-2[data-tl-node='fetch']").count() == 1

    # the review: each action with exactly its allowed decisions
    card = page.locator(".approval-card")
    assert card.get_attribute("data-kind") == "hitl"
    email = card.locator("fieldset.hitl-action[data-action='send_email']")
    delete = card.locator("fieldset.hitl-action[data-action='delete_file']")
    decisions = "els => els.map(e => e.dataset.decision)"
    assert email.locator("input[data-decision]").evaluate_all(decisions) == [
        "approve",
        "edit",
        "reject",
    ]
    assert delete.locator("input[data-decision]").evaluate_all(decisions) == ["approve", "reject"]
    assert "Sending email needs a review" in email.inner_text()
    assert "send_email, delete_file need review" in page.text_content("#outcome-detail")
    # not sent until each action has a decision
    page.click(".approval-card [data-action='submit']")
    assert "delete_file" in card.locator(".interrupt-error").inner_text()
    assert resumed == []
    email.locator("input[data-decision='edit']").check()
    args = email.locator("textarea.json-input")
    assert json.loads(args.input_value()) == REVIEW["action_requests"][0]["args"]
    args.fill('{"to": "b@example.com", "subject": "Hello"}')
    delete.locator("input[data-decision='reject']").check()
    delete.locator("textarea:visible").fill("Keep it")
    shot(page, "28-subgraph-and-review")
    page.click(".approval-card [data-action='submit']")
    wait_outcome(page, "answered")
    assert resumed == [
        {
            "thread_id": "th-team",
            "turn_id": "t-team",
            "resume": {
                "decisions": [
                    {
                        "type": "edit",
                        "edited_action": {
                            "name": "send_email",
                            "args": {"to": "b@example.com", "subject": "Hello"},
                        },
                    },
                    {"type": "reject", "message": "Keep it"},
                ]
            },
        }
    ]
    assert card.get_attribute("data-decision") == "answered"
    assert "send_email: edited" in card.inner_text()
    assert subnodes(page, "write") == [["review", "ok"]]
    assert page.get_attribute("[data-node='write'] [data-subnode]", "data-instances") == "2"
    assert page.locator(".msg-agent .msg-who").last.inner_text() == "Research team"
    shot(page, "29-subgraph-answered")


def test_several_interrupts_and_a_free_value(page, shot):
    serve_graphs(page, TEAM)
    s = Script(turn="t-multi", thread="th-multi")
    s.ev("graph_topology", run_kind="chat", **TEAM["topology"])
    s.start("research", "r").end("research", "r", status="paused")
    s.ev(
        "paused",
        interrupts=[
            {"id": "i-ok", "value": {"type": "approval", "tool": "publish", "args": {"draft": 3}}},
            {"id": "i-q", "value": {"question": "How many sources?", "default": 3}},
        ],
        resume={"method": "POST", "path": "/graphs/team/chat/resume", "body": {}},
    )
    page.route("**/graphs/team/chat", lambda route: fulfill_sse(route, s.events))
    resumed = []

    def resume(route):
        resumed.append(json.loads(route.request.post_data))
        r = Script(turn="t-multi", thread="th-multi", trace="e" * 32, seq=s.seq, ts=s.ts)
        r.ev("graph_topology", run_kind="resume", **TEAM["topology"])
        r.ev(
            "turn_completed",
            response={
                "thread_id": "th-multi",
                "turn_id": "t-multi",
                "trace_id": "e" * 32,
                "status": "answered",
                "answer": "Done.",
                "citations": [],
                "interrupts": [],
                "nodes": [],
            },
        )
        fulfill_sse(route, r.events)

    page.route("**/graphs/team/chat/resume", resume)
    open_page(page)
    send(page, "go")
    wait_outcome(page, "paused")
    card = page.locator(".approval-card")
    assert card.get_attribute("data-kind") == "several"
    assert card.locator("h3").inner_text() == "Input needed"
    assert "How many sources?" in card.inner_text()
    assert "Paused: waiting for an answer" in page.text_content("#outcome")
    card.locator("input[data-decision='approve']").check()
    card.locator("section[data-kind='value'] textarea").fill('{"sources": 5}')
    shot(page, "30-several-interrupts")
    page.click(".approval-card [data-action='submit']")
    wait_outcome(page, "answered")
    assert resumed[0]["resume"] == {"i-ok": {"approved": True}, "i-q": {"sources": 5}}
    assert resumed[0]["turn_id"] == "t-multi"
