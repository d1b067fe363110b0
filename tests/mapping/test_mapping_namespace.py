"""relay.mapping: node namespaces, nodes recognised late, and what waits for them.

Two sources of spans: the SDK (our own conventions, through ``relay.langgraph.spans``), and a
small builder of the spans another instrumentation makes in-process (OpenInference:
nothing at a span's start, every attribute at its end; the LangGraph metadata on every
span inside a node). The builder records the phases in the order a span processor sees
them, so a test can also read some starts *late* (with the end's attributes, as the live
processor does when its drain runs after the span ended) and check that the events do
not depend on it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from relay import conventions as c
from relay.events import Event
from relay.langgraph.spans import run_span
from relay.mapping import MappingState, map_span, map_span_event
from relay.spans import SpanRecord
from tests.spanrec import Tracing

# -- a trace as OpenInference writes it in-process ----------------------------------------


class Trace:
    """Spans with no attributes at start and all of them at end, phase by phase."""

    def __init__(self, trace_id: str = "ab" * 16) -> None:
        self.trace_id = trace_id
        self.now = 1_000_000_000_000
        self.ids = 0
        self.stack: list[str] = []
        #: (kind, span id, record or span event); the start records have no attributes
        self.phases: list[tuple[str, str, Any]] = []
        self.ended: dict[str, SpanRecord] = {}

    def tick(self) -> int:
        self.now += 1_000_000
        return self.now

    @contextmanager
    def span(
        self,
        name: str,
        kind: str | None = "CHAIN",
        node: str | None = None,
        ns: str | None = None,
        step: int | None = None,
        status: str = "ok",
        exception: str | None = None,
        **attrs: Any,
    ) -> Iterator[str]:
        self.ids += 1
        span_id = f"{self.ids:016x}"
        parent = self.stack[-1] if self.stack else None
        start = self.tick()
        self.phases.append(
            ("start", span_id, SpanRecord(self.trace_id, span_id, parent, name, start, None, {}))
        )
        self.stack.append(span_id)
        yield span_id
        self.stack.pop()
        if kind is not None:
            attrs["openinference.span.kind"] = kind
        if node is not None:
            meta = {"langgraph_node": node, "langgraph_step": step, "thread_id": "th-oi"}
            if ns is not None:
                meta["langgraph_checkpoint_ns"] = ns
            attrs["metadata"] = json.dumps(meta)
        events = []
        if exception is not None:
            events.append(
                {
                    "name": "exception",
                    "time_ns": self.now,
                    "attributes": {"exception.type": exception},
                }
            )
        record = SpanRecord(
            self.trace_id,
            span_id,
            parent,
            name,
            start,
            self.tick(),
            attrs,
            status=status,
            status_message=f"{exception}(...)" if exception and status == "error" else "",
            events=events,
        )
        self.ended[span_id] = record
        self.phases.append(("end", span_id, record))

    def delta(self, text: str) -> None:
        self.phases.append(
            (
                "event",
                self.stack[-1],
                {"name": c.DELTA_EVENT, "time_ns": self.tick(), "attributes": {c.DELTA_TEXT: text}},
            )
        )

    def events(self, late: frozenset[str] = frozenset()) -> list[Event]:
        """The events, the starts of the spans in ``late`` read with their end's
        attributes (what a processor sees when its drain comes after the span ended)."""
        state = MappingState()
        out = []
        for kind, span_id, item in self.phases:
            if kind == "event":
                out += map_span_event(state, self._at_start(span_id), item)
            elif kind == "start":
                record = item
                if span_id in late:
                    record = SpanRecord(
                        item.trace_id,
                        span_id,
                        item.parent_span_id,
                        item.name,
                        item.start_ns,
                        None,
                        self.ended[span_id].attributes,
                    )
                out += map_span(state, record, False)
            else:
                out += map_span(state, item, True)
        assert state.spans == {} and not state.runs and not state.tentative
        return out

    def _at_start(self, span_id: str) -> SpanRecord:
        return next(r for k, s, r in self.phases if k == "start" and s == span_id)


def subgraph_run(t: Trace, *, streamed: bool = True) -> dict[str, str]:
    """A LangGraph run with a named compiled subgraph (``sub``, whose own chain is named
    like its node), a tool without LangGraph metadata, a streaming model, a handoff and an
    interrupt. Returns span ids by role."""
    ids: dict[str, str] = {}
    with t.span("LangGraph") as ids["root"]:
        with t.span("triage", node="triage", ns="triage:t1", step=1) as ids["triage"]:
            with t.span("route", node="triage", ns="triage:t1", step=1):
                pass
        with t.span("research", node="research", ns="research:t2", step=2) as ids["research"]:
            with t.span("lookup", kind="TOOL", **{"tool.name": "lookup"}) as ids["tool"]:
                pass  # no metadata: its node is known only when research ends
            with t.span("FakeChat", kind="LLM", node="research", ns="research:t2", step=2) as ids[
                "llm"
            ]:
                if streamed:
                    t.delta("Hello ")
                    t.delta("world")
        with t.span("sub", node="sub", ns="sub:t3", step=3, exception="ParentCommand") as ids[
            "sub"
        ]:
            with t.span("sub", node="sub", ns="sub:t3", step=3, exception="ParentCommand") as ids[
                "sub_chain"
            ]:
                with t.span("inner", node="inner", ns="sub:t3|inner:t4", step=1) as ids["inner"]:
                    with t.span("FakeChat", kind="LLM", node="inner", ns="sub:t3|inner:t4", step=1):
                        if streamed:
                            t.delta("deep")
                with t.span(
                    "handoff",
                    node="handoff",
                    ns="sub:t3|handoff:t5",
                    step=2,
                    exception="ParentCommand",
                    status="error",
                ) as ids["handoff"]:
                    pass
        with t.span(
            "approve",
            node="approve",
            ns="approve:t6",
            step=4,
            exception="langgraph.errors.GraphInterrupt",
        ) as ids["approve"]:
            pass
    return ids


def by_type(events: list[Event], type_: str) -> list[Event]:
    return [e for e in events if e.type == type_]


def check_nesting(events: list[Event]) -> None:
    """Each node starts once and completes once, in that order; a tool or text event sits
    between its node's start and completion, naming it."""
    open_nodes: dict[str, str] = {}  # span id -> node
    seen: set[str] = set()
    for e in events:
        f = e.fields
        if e.type == "node_started":
            assert f["span_id"] not in seen, f
            seen.add(f["span_id"])
            open_nodes[f["span_id"]] = f["node"]
        elif e.type == "node_completed":
            assert open_nodes.pop(f["span_id"]) == f["node"]
        elif e.type in ("tool_started", "tool_completed", "text_delta"):
            assert f["node"] is not None and f["node"] in open_nodes.values(), (e.type, f)
    assert open_nodes == {}


# -- Task 1: namespace --------------------------------------------------------------------


def _relay_node(t: Tracing, name: str, parent: Any, **attrs: Any) -> Any:
    return t.tracer.start_span(
        f"node {name}", context=set_span_in_context(parent), attributes={c.NODE_NAME: name, **attrs}
    )


def test_namespace_from_the_relay_attribute(tracing: Tracing) -> None:
    with run_span(
        tracing.tracer,
        agent="a",
        thread_id="th",
        turn_id="t",
        run_kind="chat",
        graph_id="g",
        topology={"nodes": [], "edges": []},
    ) as run:
        outer = _relay_node(tracing, "outer", run.span, **{c.NODE_NAMESPACE: ()})
        inner = _relay_node(tracing, "inner", outer, **{c.NODE_NAMESPACE: ("outer",)})
        deep = _relay_node(
            tracing, "deep", inner, **{c.NODE_NAMESPACE: json.dumps(["outer", "inner"])}
        )
        for span in (deep, inner, outer):
            span.end()
        run.finish("error")
    events = tracing.events()
    started = {e.fields["node"]: e.fields["namespace"] for e in by_type(events, "node_started")}
    assert started == {"outer": [], "inner": ["outer"], "deep": ["outer", "inner"]}
    done = {e.fields["node"]: e.fields["namespace"] for e in by_type(events, "node_completed")}
    assert done == started


def test_namespace_from_the_parent_chain_without_the_attribute(tracing: Tracing) -> None:
    with run_span(
        tracing.tracer,
        agent="a",
        thread_id="th",
        turn_id="t",
        run_kind="chat",
        graph_id="g",
        topology={"nodes": [], "edges": []},
    ) as run:
        outer = _relay_node(tracing, "outer", run.span)
        other = tracing.tracer.start_span(
            "wrapper", context=set_span_in_context(outer), attributes={c.OPERATION: "other_op"}
        )
        inner = _relay_node(tracing, "inner", other)
        for span in (inner, other, outer):
            span.end()
        run.finish("error")
    started = {
        e.fields["node"]: e.fields["namespace"] for e in by_type(tracing.events(), "node_started")
    }
    assert started == {"outer": [], "inner": ["outer"]}


def test_namespace_from_langgraphs_checkpoint_namespace() -> None:
    t = Trace()
    ids = subgraph_run(t)
    events = t.events()
    namespaces = {
        e.fields["span_id"]: e.fields["namespace"] for e in by_type(events, "node_started")
    }
    assert namespaces == {
        ids["triage"]: [],
        ids["research"]: [],
        ids["sub"]: [],
        ids["inner"]: ["sub"],
        ids["handoff"]: ["sub"],
        ids["approve"]: [],
    }


def test_namespace_of_openllmetry_nodes(tracing: Tracing) -> None:
    assoc = "traceloop.association.properties."
    wf = tracing.tracer.start_span(
        "LangGraph.workflow",
        attributes={"traceloop.span.kind": "workflow", "traceloop.entity.name": "LangGraph"},
    )

    def task(name: str, parent: Any, ns: str) -> Any:
        return tracing.tracer.start_span(
            f"{name}.task",
            context=set_span_in_context(parent),
            attributes={
                "traceloop.span.kind": "task",
                "traceloop.entity.name": name,
                assoc + "langgraph_node": name,
                assoc + "langgraph_checkpoint_ns": ns,
            },
        )

    outer = task("outer", wf, "outer:a")
    inner = task("inner", outer, "outer:a|inner:b")
    inner.end()
    outer.end()
    wf.end()
    started = [
        (e.fields["node"], e.fields["namespace"], e.fields["task_id"])
        for e in by_type(tracing.events(), "node_started")
    ]
    assert started == [("outer", [], "a"), ("inner", ["outer"], "b")]


# -- Task 2: nodes recognised late (OpenInference in-process) ----------------------------


def test_late_nodes_start_before_anything_inside_them() -> None:
    t = Trace()
    subgraph_run(t)
    events = [e for e in t.events() if e.type != "graph_discovered"]
    check_nesting(events)
    assert events[0].type == "graph_topology" and events[-1].type == "paused"
    assert [(e.type, e.fields.get("node")) for e in events[1:-1]] == [
        ("node_started", "triage"),
        ("node_completed", "triage"),
        # the tool says no node: it waits for research, which the model call names
        ("node_started", "research"),
        ("tool_started", "research"),
        ("tool_completed", "research"),
        ("text_delta", "research"),
        ("text_delta", "research"),
        ("node_completed", "research"),
        # the subgraph's own chain (named "sub", the same task) is no second node
        ("node_started", "sub"),
        ("node_started", "inner"),
        ("text_delta", "inner"),
        ("node_completed", "inner"),
        ("node_started", "handoff"),
        ("node_completed", "handoff"),
        ("node_completed", "sub"),
        ("node_started", "approve"),
        ("node_completed", "approve"),
    ]


def test_a_late_node_started_carries_the_spans_own_start() -> None:
    t = Trace()
    ids = subgraph_run(t)
    events = t.events()
    for e in by_type(events, "node_started"):
        assert e.ts == ((t.ended[e.fields["span_id"]].start_ns + 500) // 1000 / 1000)
        assert e.fields["parent_span_id"] == t.ended[e.fields["span_id"]].parent_span_id
    research = next(e for e in by_type(events, "node_started") if e.fields["node"] == "research")
    assert research.fields["step"] == 2 and research.fields["task_id"] == "t2"
    topology = events[0]
    # the root's start
    assert topology.ts == ((t.ended[ids["root"]].start_ns + 500) // 1000 / 1000)
    assert topology.fields["graph_id"] == "LangGraph"
    assert {e.thread_id for e in events} == {"th-oi"}


def test_interrupt_is_paused_and_a_handoff_ok() -> None:
    t = Trace()
    subgraph_run(t)
    events = t.events()
    status = {e.fields["node"]: e.fields["status"] for e in by_type(events, "node_completed")}
    assert status == {
        "triage": "ok",
        "research": "ok",
        "inner": "ok",
        "handoff": "ok",
        "sub": "ok",
        "approve": "paused",
    }
    paused = events[-1]
    assert paused.type == "paused" and len(paused.fields["interrupts"]) == 1


def test_children_facts_reach_a_late_node() -> None:
    t = Trace()
    subgraph_run(t)
    done = {e.fields["node"]: e for e in by_type(t.events(), "node_completed")}
    research = done["research"].fields
    assert research["summary"] == {"tools": ["lookup"]}
    assert [ch["name"] for ch in research["children"]] == ["lookup", "FakeChat"]
    assert [ch["operation"] for ch in research["children"]] == ["execute_tool", "chat"]
    # the subgraph's chain and what ran in it are the sub node's children
    assert "sub" in [ch["name"] for ch in done["sub"].fields["children"]]


def test_text_waits_for_its_node_then_streams_live() -> None:
    """Text from a model call whose node is not known yet waits for it; once the node is
    known (an earlier span inside it named it), text goes out as it comes."""
    t = Trace()
    with t.span("LangGraph"):
        with t.span("write", node="write", ns="write:w1", step=1):
            with t.span("prep", node="write", ns="write:w1", step=1):
                pass  # ends first and names the node
            with t.span("FakeChat", kind="LLM", node="write", ns="write:w1", step=1):
                t.delta("a")
                t.delta("b")
    state = MappingState()
    seen = []
    for kind, span_id, item in t.phases:
        before = len(seen)
        if kind == "event":
            seen += map_span_event(state, t._at_start(span_id), item)
            assert len(seen) == before + 1  # out at once, with its node
            assert seen[-1].fields["node"] == "write"
        else:
            seen += map_span(state, item, kind == "end")
    assert [e.type for e in seen if e.type != "graph_discovered"] == [
        "graph_topology",
        "node_started",
        "text_delta",
        "text_delta",
        "node_completed",
        "turn_completed",
    ]


def test_same_events_whichever_starts_are_read_late() -> None:
    t = Trace()
    ids = subgraph_run(t)
    on_time = t.events()
    every = t.events(frozenset(t.ended))  # all attributes at start: as a replay reads them
    for events in (on_time, every):
        check_nesting(events)
    key = lambda e: (e.type, e.fields.get("span_id"), e.ts)  # noqa: E731
    assert sorted(map(key, on_time)) == sorted(map(key, every))
    by_span = {e.fields["span_id"]: e.fields for e in by_type(every, "node_started")}
    assert by_span[ids["sub"]]["step"] == 3  # known at start
    assert by_span[ids["sub"]]["namespace"] == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_mix_of_late_starts_gives_one_node_each(data: st.DataObject) -> None:
    t = Trace()
    ids = subgraph_run(t)
    late = frozenset(data.draw(st.sets(st.sampled_from(sorted(t.ended)))))
    events = t.events(late)
    check_nesting(events)
    assert Counter(e.fields["node"] for e in by_type(events, "node_started")) == Counter(
        ["triage", "research", "sub", "inner", "handoff", "approve"]
    )
    status = {e.fields["span_id"]: e.fields["status"] for e in by_type(events, "node_completed")}
    assert status[ids["approve"]] == "paused" and status[ids["handoff"]] == "ok"
    deltas = [e.fields for e in by_type(events, "text_delta")]
    assert [(d["node"], d["delta"]) for d in deltas] == [
        ("research", "Hello "),
        ("research", "world"),
        ("inner", "deep"),
    ]
    assert events[-1].type == "paused"  # approve called interrupt()


def test_children_first_still_one_node_per_task() -> None:
    """Over OTLP with one span per export, every span arrives whole as it ends: children
    before parents. The subgraph's chain, taking its node's task first, is not followed
    by a second node of that task."""
    t = Trace()
    ids = subgraph_run(t, streamed=False)
    state = MappingState()
    events = []
    for record in t.ended.values():  # in end order
        start = SpanRecord(
            record.trace_id,
            record.span_id,
            record.parent_span_id,
            record.name,
            record.start_ns,
            None,
            record.attributes,
        )
        events += map_span(state, start, False) + map_span(state, record, True)
    started = Counter(e.fields["node"] for e in by_type(events, "node_started"))
    assert started == Counter(["triage", "research", "sub", "inner", "handoff", "approve"])
    assert ids["sub"] not in {e.fields["span_id"] for e in by_type(events, "node_started")}
    assert events[-1].type == "paused"


def test_a_trace_that_is_no_graph_run_leaves_nothing() -> None:
    t = Trace()
    with t.span("GET /healthz", kind=None, **{"http.method": "GET"}):
        with t.span("RunnableSequence"):
            with t.span("FakeChat", kind="LLM"):
                t.delta("x")
    assert t.events() == []  # and no state left (checked in events())


def test_a_graph_run_under_an_http_span() -> None:
    """The graph's root is the parent of its first top node, not the trace's root: the run
    ends with the graph's root, and the request span around it adds nothing."""
    t = Trace()
    with t.span("POST /chat", kind=None, **{"http.method": "POST"}):
        ids = subgraph_run(t, streamed=False)
    events = t.events()
    check_nesting(events)
    assert events[0].fields["graph_id"] == "LangGraph"
    assert events[-1].type == "paused"
    assert events[-1].ts == ((t.ended[ids["root"]].end_ns + 500) // 1000 / 1000)


def test_our_run_root_over_a_graph_another_instrumentation_traces() -> None:
    """A run root of ours (relay.turn.id) whose graph's spans are OpenInference's: the
    same late nodes, in our turn, ended by our root."""
    t = Trace()
    root_id = "f" * 16
    t.stack.append(root_id)
    subgraph_run(t)
    state = MappingState()
    events = map_span(
        state,
        SpanRecord(
            t.trace_id,
            root_id,
            None,
            "invoke_agent a",
            1,
            None,
            {c.TURN_ID: "turn-9", c.CONVERSATION_ID: "th"},
        ),
        False,
    )
    for kind, span_id, item in t.phases:
        if kind == "event":
            events += map_span_event(state, t._at_start(span_id), item)
        else:
            events += map_span(state, item, kind == "end")
    events += map_span(
        state,
        SpanRecord(
            t.trace_id,
            root_id,
            None,
            "invoke_agent a",
            1,
            t.tick(),
            {c.TURN_ID: "turn-9", c.TURN_OUTCOME: "paused", c.TURN_INTERRUPTS: "[]"},
        ),
        True,
    )
    check_nesting(events)
    assert {e.turn_id for e in events} == {"turn-9"}
    assert [e.type for e in events].count("node_started") == 6
    assert events[-1].type == "paused"
    assert state.spans == {} and not state.runs and not state.tentative


def test_tentative_traces_and_held_events_are_bounded(monkeypatch) -> None:
    from relay.mapping import state as mapping

    monkeypatch.setattr(mapping, "MAX_TENTATIVE", 2)
    state = MappingState()
    for i in range(3):
        map_span(state, SpanRecord(f"{i:032x}", f"{i + 1:016x}", None, "GET /", 1, None, {}), False)
    assert list(state.tentative) == [f"{i:032x}" for i in (1, 2)]
    assert {o.run.trace_id for o in state.spans.values()} == set(state.tentative)

    monkeypatch.setattr(mapping, "MAX_HELD", 3)
    t = Trace()
    with t.span("LangGraph"):
        with t.span("write", node="write", ns="write:w1", step=1):
            with t.span("FakeChat", kind="LLM", node="write", ns="write:w1", step=1):
                for i in range(5):
                    t.delta(str(i))
    deltas = [e.fields["delta"] for e in by_type(t.events(), "text_delta")]
    assert deltas == ["2", "3", "4"]  # the oldest dropped


# -- statuses: LangGraph's control flow ---------------------------------------------------


def _node_status(
    status: str, message: str = "", exception: str | None = None, outcome: str | None = None
) -> str:
    attrs: dict[str, Any] = {c.NODE_NAME: "n"}
    if outcome is not None:
        attrs[c.NODE_OUTCOME] = outcome
    events = (
        []
        if exception is None
        else [{"name": "exception", "time_ns": 3, "attributes": {"exception.type": exception}}]
    )
    state = MappingState()
    root = SpanRecord("c" * 32, "1" * 16, None, "invoke_agent a", 1, None, {c.TURN_ID: "t"})
    start = SpanRecord("c" * 32, "2" * 16, "1" * 16, "node n", 2, None, attrs)
    end = SpanRecord(
        "c" * 32,
        "2" * 16,
        "1" * 16,
        "node n",
        2,
        4,
        attrs,
        status=status,
        status_message=message,
        events=events,
    )
    map_span(state, root, False)
    map_span(state, start, False)
    [done] = map_span(state, end, True)
    return str(done.fields["status"])


def test_node_status_of_langgraphs_control_flow() -> None:
    assert _node_status("ok", exception="langgraph.errors.GraphInterrupt") == "paused"
    assert _node_status("ok", exception="NodeInterrupt") == "paused"
    assert _node_status("error", "GraphInterrupt((Interrupt(value=1),))") == "paused"
    assert _node_status("error", exception="langgraph.errors.GraphInterrupt") == "paused"
    assert _node_status("error", exception="langgraph.errors.ParentCommand") == "ok"
    assert _node_status("error", "ParentCommand(Command(graph='__parent__'))") == "ok"
    assert _node_status("ok", exception="langgraph.errors.ParentCommand") == "ok"
    assert _node_status("error", "boom", exception="RuntimeError") == "error"
    assert _node_status("error", outcome="cancelled") == "cancelled"
    assert _node_status("ok", exception="GraphInterrupt", outcome="error") == "error"


def test_openinference_interrupt_on_an_ok_span_is_paused(tracing: Tracing) -> None:
    from langgraph.errors import GraphInterrupt

    meta = json.dumps(
        {"langgraph_node": "approve", "langgraph_step": 1, "langgraph_checkpoint_ns": "approve:x"}
    )
    graph = tracing.tracer.start_span("LangGraph")
    approve = tracing.tracer.start_span("approve", context=set_span_in_context(graph))
    approve.record_exception(GraphInterrupt(()))
    approve.set_status(Status(StatusCode.OK))
    approve.set_attributes({"openinference.span.kind": "CHAIN", "metadata": meta})
    approve.end()
    graph.set_attributes({"openinference.span.kind": "CHAIN"})
    graph.end()
    events = tracing.events()
    assert [e.fields["status"] for e in by_type(events, "node_completed")] == ["paused"]
    assert events[-1].type == "paused"
