"""relay.mapping: real SDK spans (through relay.langgraph.spans's helpers) -> exact events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.errors import GraphInterrupt
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from relay import conventions as c
from relay.langgraph.spans import child_span, run_span, traced_node
from relay.mapping import MappingState, map_span
from relay.mapping import state as mapping
from relay.spans import SpanRecord
from tests.spanrec import Tracing, feed

TOPOLOGY = {
    "nodes": [
        {"id": "__start__", "label": "__start__"},
        {"id": "guardrail_pre", "label": "guardrail_pre"},
        {"id": "retrieve_context", "label": "retrieve_context"},
        {"id": "generate", "label": "generate"},
        {"id": "guardrail_post", "label": "guardrail_post"},
        {"id": "__end__", "label": "__end__"},
    ],
    "edges": [
        {"source": "__start__", "target": "guardrail_pre", "conditional": False},
        {"source": "guardrail_pre", "target": "retrieve_context", "conditional": True},
        {"source": "retrieve_context", "target": "generate", "conditional": False},
        {"source": "generate", "target": "guardrail_post", "conditional": True},
        {"source": "guardrail_post", "target": "__end__", "conditional": False},
    ],
}
RESPONSE = {
    "thread_id": "th-1",
    "turn_id": "turn-1",
    "trace_id": "x",
    "status": "answered",
    "answer": "Refunds are issued within 5 business days. [refund-policy]",
    "citations": [{"doc_id": "refund-policy", "title": "Refund policy"}],
    "interrupts": [],
    "nodes": [],
}
APPROVAL = {
    "type": "approval",
    "tool": "issue_refund",
    "args": {"order_id": "1234", "amount": 20.0},
}


def _us_ms(ns: int) -> float:
    """A duration as events carry it: milliseconds to the microsecond, half up."""
    return (ns + 500) // 1000 / 1000


def cfg(step: int, name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "langgraph_step": step,
            "langgraph_checkpoint_ns": f"{name}:task-{name}-{step}",
        }
    }


def root(t: Tracing, *, turn_id: str = "turn-1", kind: str = "chat", **kwargs: Any):
    return run_span(
        t.tracer,
        agent="support_agent",
        thread_id="th-1",
        turn_id=turn_id,
        run_kind=kind,
        graph_id="support_agent",
        topology=TOPOLOGY,
        **kwargs,
    )


def node(t: Tracing, name: str, step: int, body=None):
    """Run a sync node ``name`` whose body gets the tracer."""

    def fn(state: Any, config: Any) -> dict[str, Any]:
        if body is not None:
            body()
        return {}

    return traced_node(t.tracer, name, fn)({}, cfg(step, name))


def guardrail(t: Tracing, name: str, decision: str, reason: str = "") -> None:
    with child_span(
        t.tracer, f"apply_guardrail {name}", c.OP_GUARDRAIL, {c.GUARDRAIL_NAME: name}
    ) as span:
        span.set_attribute(c.GUARDRAIL_DECISION, decision)
        span.set_attribute(c.GUARDRAIL_REASON, reason)


def retrieval(t: Tracing, documents: int) -> None:
    with child_span(t.tracer, "retrieval knowledge_base", c.OP_RETRIEVAL) as span:
        span.set_attribute(c.RETRIEVAL_DOCUMENTS, documents)


def chat(t: Tracing, tokens_in: int, tokens_out: int, response_model: str | None = None):
    with child_span(
        t.tracer,
        "chat offline-support-v1",
        c.OP_CHAT,
        {
            c.PROVIDER: "offline",
            c.REQUEST_MODEL: "offline-support-v1",
        },
    ) as span:
        span.set_attribute(c.INPUT_TOKENS, tokens_in)
        span.set_attribute(c.OUTPUT_TOKENS, tokens_out)
        if response_model:
            span.set_attribute(c.RESPONSE_MODEL, response_model)


def tool(
    t: Tracing, name: str = "issue_refund", call_id: str = "call-1", fail: bool = False
) -> None:
    with child_span(
        t.tracer,
        f"execute_tool {name}",
        c.OP_TOOL,
        {
            c.TOOL_NAME: name,
            c.TOOL_CALL_ID: call_id,
            c.TOOL_LABEL: "Issuing refund",
        },
    ):
        if fail:
            raise RuntimeError("ledger down")


def normal_run(
    t: Tracing, *, outcome: str = "answered", kind: str = "chat", wait_ms: float | None = None
) -> None:
    with root(t, kind=kind, message="How do refunds work?") as run:
        node(t, "guardrail_pre", 1, lambda: guardrail(t, "input_policy", "allow"))
        node(t, "retrieve_context", 2, lambda: retrieval(t, 3))

        def generate() -> None:
            chat(t, 10, 5)
            chat(t, 7, 3, response_model="offline-support-v1-r2")

        node(t, "generate", 3, generate)
        node(t, "guardrail_post", 4, lambda: guardrail(t, "output_policy", "redact", "pii"))
        if wait_ms is not None:
            run.end_attributes[c.TURN_HUMAN_WAIT_MS] = wait_ms
        run.finish(outcome, **{c.TURN_RESPONSE: RESPONSE})


def sid(span) -> str:
    return format(span.context.span_id, "016x")


def tid(span) -> str:
    return format(span.context.trace_id, "032x")


def ms(ns: int) -> float:
    return (ns + 500) // 1000 / 1000  # epoch ms to the microsecond, half up


def by_type(events, type_):
    return [e for e in events if e.type == type_]


# -- a normal run -------------------------------------------------------------------------


def test_normal_run_exact_sequence(tracing: Tracing) -> None:
    normal_run(tracing)
    events = tracing.events()
    assert [(e.type, e.fields.get("node")) for e in events] == [
        ("graph_topology", None),
        ("node_started", "guardrail_pre"),
        ("node_completed", "guardrail_pre"),
        ("node_started", "retrieve_context"),
        ("node_completed", "retrieve_context"),
        ("node_started", "generate"),
        ("node_completed", "generate"),
        ("node_started", "guardrail_post"),
        ("node_completed", "guardrail_post"),
        ("turn_completed", None),
    ]
    rootspan = tracing.recorder.span("invoke_agent support_agent")
    for e in events:
        assert (e.thread_id, e.turn_id, e.trace_id, e.seq) == ("th-1", "turn-1", tid(rootspan), 0)


def test_graph_topology_payload(tracing: Tracing) -> None:
    normal_run(tracing)
    topo = tracing.events()[0]
    rootspan = tracing.recorder.span("invoke_agent support_agent")
    assert topo.type == "graph_topology"
    assert topo.fields == {
        "graph_id": "support_agent",
        "nodes": TOPOLOGY["nodes"],
        "edges": TOPOLOGY["edges"],
        "run_kind": "chat",
    }
    assert topo.ts == ms(rootspan.start_time)
    d = topo.to_dict()
    assert d["v"] == 1 and d["type"] == "graph_topology" and "truncated" not in d


def test_node_started_payload(tracing: Tracing) -> None:
    normal_run(tracing)
    started = by_type(tracing.events(), "node_started")
    rootspan = tracing.recorder.span("invoke_agent support_agent")
    gen = tracing.recorder.span("node generate")
    ev = started[2]
    assert ev.fields == {
        "node": "generate",
        "span_id": sid(gen),
        "parent_span_id": sid(rootspan),
        "step": 3,
        "task_id": "task-generate-3",
        "namespace": [],
    }
    assert ev.ts == ms(gen.start_time)


def test_node_completed_summary_and_children(tracing: Tracing) -> None:
    normal_run(tracing)
    completed = {e.fields["node"]: e for e in by_type(tracing.events(), "node_completed")}
    gen_span = tracing.recorder.span("node generate")
    gen = completed["generate"]
    assert gen.ts == ms(gen_span.end_time)
    assert gen.fields["span_id"] == sid(gen_span)
    assert gen.fields["status"] == "ok"
    assert gen.fields["duration_ms"] == _us_ms(gen_span.end_time - gen_span.start_time)
    # tokens summed over both model calls; model is the last call's response model
    assert gen.fields["summary"] == {
        "model": "offline-support-v1-r2",
        "input_tokens": 17,
        "output_tokens": 8,
    }
    chats = [s for s in tracing.recorder.ended if s.name.startswith("chat ")]
    assert gen.fields["children"] == [
        {
            "span_id": sid(s),
            "parent_span_id": sid(gen_span),
            "name": s.name,
            "operation": "chat",
            "start_ts": ms(s.start_time),
            "duration_ms": _us_ms(s.end_time - s.start_time),
            "status": "ok",
        }
        for s in chats
    ]
    assert completed["retrieve_context"].fields["summary"] == {"documents": 3}
    assert completed["retrieve_context"].fields["children"][0]["operation"] == "retrieval"
    assert completed["guardrail_pre"].fields["summary"] == {
        "guardrail": {"name": "input_policy", "decision": "allow", "reason": ""}
    }
    assert completed["guardrail_post"].fields["summary"] == {
        "guardrail": {"name": "output_policy", "decision": "redact", "reason": "pii"}
    }


def test_model_falls_back_to_request_model(tracing: Tracing) -> None:
    with root(tracing) as run:
        node(tracing, "generate", 1, lambda: chat(tracing, 1, 2))
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    gen = by_type(tracing.events(), "node_completed")[0]
    assert gen.fields["summary"]["model"] == "offline-support-v1"


def test_last_guardrail_decision_wins(tracing: Tracing) -> None:
    def body() -> None:
        guardrail(tracing, "a", "allow")
        guardrail(tracing, "b", "block", "prompt_injection")

    with root(tracing) as run:
        node(tracing, "guardrail_pre", 1, body)
        run.finish("refused", **{c.TURN_RESPONSE: {**RESPONSE, "status": "refused"}})
    events = tracing.events()
    summary = by_type(events, "node_completed")[0].fields["summary"]
    assert summary == {
        "guardrail": {"name": "b", "decision": "block", "reason": "prompt_injection"}
    }
    assert events[-1].type == "turn_completed"
    assert events[-1].fields["response"]["status"] == "refused"


def test_node_without_children_has_empty_summary(tracing: Tracing) -> None:
    with root(tracing) as run:
        node(tracing, "noop", 1)
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    done = by_type(tracing.events(), "node_completed")[0]
    assert done.fields["summary"] == {} and done.fields["children"] == []


def test_turn_completed_payload(tracing: Tracing) -> None:
    normal_run(tracing)
    last = tracing.events()[-1]
    rootspan = tracing.recorder.span("invoke_agent support_agent")
    assert last.type == "turn_completed"
    assert last.fields == {"response": RESPONSE}
    assert last.ts == ms(rootspan.end_time)
    assert last.is_run_terminal and last.is_turn_terminal


def test_complete_run_leaves_no_state(tracing: Tracing) -> None:
    normal_run(tracing)
    state = MappingState()
    feed(tracing.recorder.records, state)
    assert len(state.runs) == 0 and state.spans == {}


# -- tools -----------------------------------------------------------------------------


def test_tool_span_events_name_the_enclosing_node(tracing: Tracing) -> None:
    with root(tracing, kind="resume") as run:
        node(tracing, "human_approval", 5, lambda: tool(tracing))
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    events = tracing.events()
    assert [e.type for e in events] == [
        "graph_topology",
        "node_started",
        "tool_started",
        "tool_completed",
        "node_completed",
        "turn_completed",
    ]
    span = tracing.recorder.span("execute_tool issue_refund")
    assert events[2].fields == {
        "tool": "issue_refund",
        "span_id": sid(span),
        "node": "human_approval",
        "call_id": "call-1",
        "label": "Issuing refund",
    }
    assert events[2].ts == ms(span.start_time)
    assert events[3].fields == {
        "tool": "issue_refund",
        "span_id": sid(span),
        "node": "human_approval",
        "call_id": "call-1",
        "duration_ms": _us_ms(span.end_time - span.start_time),
        "status": "ok",
    }
    assert events[3].ts == ms(span.end_time)
    summary = events[4].fields["summary"]
    assert summary == {"tools": ["issue_refund"]}
    assert events[4].fields["children"][0]["operation"] == "execute_tool"


def test_tools_listed_in_order_and_failed_tool_is_error(tracing: Tracing) -> None:
    def body() -> None:
        tool(tracing, "lookup_order", "c1")
        try:
            tool(tracing, "issue_refund", "c2", fail=True)
        except RuntimeError:
            pass

    with root(tracing) as run:
        node(tracing, "act", 1, body)
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    events = tracing.events()
    done = by_type(events, "tool_completed")
    assert [(e.fields["tool"], e.fields["status"]) for e in done] == [
        ("lookup_order", "ok"),
        ("issue_refund", "error"),
    ]
    node_done = by_type(events, "node_completed")[0]
    assert node_done.fields["summary"]["tools"] == ["lookup_order", "issue_refund"]
    assert node_done.fields["status"] == "ok"  # the node caught it
    assert [ch["status"] for ch in node_done.fields["children"]] == ["ok", "error"]


def test_tool_name_falls_back_to_span_name(tracing: Tracing) -> None:
    def body() -> None:
        with child_span(tracing.tracer, "execute_tool search_orders", c.OP_TOOL):
            pass

    with root(tracing) as run:
        node(tracing, "act", 1, body)
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    started = by_type(tracing.events(), "tool_started")[0]
    assert started.fields["tool"] == "search_orders"
    assert started.fields["call_id"] is None and "label" not in started.fields


def test_nested_child_spans_still_map_to_the_node(tracing: Tracing) -> None:
    def body() -> None:
        with child_span(tracing.tracer, "agent_step plan", "plan"):
            with child_span(tracing.tracer, "wrapper", "other_op"):
                tool(tracing)
            chat(tracing, 4, 2)

    with root(tracing) as run:
        node(tracing, "act", 1, body)
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    events = tracing.events()
    assert [e.type for e in events] == [
        "graph_topology",
        "node_started",
        "tool_started",
        "tool_completed",
        "node_completed",
        "turn_completed",
    ]
    assert events[2].fields["node"] == "act" and events[3].fields["node"] == "act"
    done = events[4]
    assert done.fields["summary"] == {
        "tools": ["issue_refund"],
        "model": "offline-support-v1",
        "input_tokens": 4,
        "output_tokens": 2,
    }
    ops = sorted(ch["operation"] for ch in done.fields["children"])
    assert ops == ["chat", "execute_tool", "other", "other"]
    node_span = tracing.recorder.span("node act")
    wrapper = tracing.recorder.span("wrapper")
    tool_child = next(ch for ch in done.fields["children"] if ch["operation"] == "execute_tool")
    assert tool_child["parent_span_id"] == sid(wrapper)
    plan_child = next(ch for ch in done.fields["children"] if ch["name"] == "agent_step plan")
    assert plan_child["parent_span_id"] == sid(node_span)


def test_children_are_in_start_order(tracing: Tracing) -> None:
    def body() -> None:
        with child_span(tracing.tracer, "outer", "other_op"):
            with child_span(tracing.tracer, "inner", "other_op"):
                pass

    with root(tracing) as run:
        node(tracing, "act", 1, body)
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    children = by_type(tracing.events(), "node_completed")[0].fields["children"]
    assert [ch["name"] for ch in children] == ["outer", "inner"]
    assert [ch["start_ts"] for ch in children] == sorted(ch["start_ts"] for ch in children)


def test_tool_outside_a_node_completes(tracing: Tracing) -> None:
    with root(tracing) as run:
        tool(tracing)
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    types = tracing.types()
    assert types.count("tool_started") == 1
    assert types.count("tool_completed") == 1


async def test_cancelled_tool_reports_cancelled(tracing: Tracing) -> None:
    async def approval(state: Any, config: Any) -> dict[str, Any]:
        with child_span(
            tracing.tracer, "execute_tool issue_refund", c.OP_TOOL, {c.TOOL_NAME: "issue_refund"}
        ):
            await asyncio.sleep(30)
        return {}

    wrapped = traced_node(tracing.tracer, "human_approval", approval)
    with pytest.raises(asyncio.CancelledError), root(tracing):
        task = asyncio.ensure_future(wrapped({}, cfg(1, "human_approval")))
        await asyncio.sleep(0.01)
        task.cancel()
        await task
    events = tracing.events()
    assert by_type(events, "node_completed")[0].fields["status"] == "cancelled"
    assert by_type(events, "tool_completed")[0].fields["status"] == "cancelled"


# -- terminal outcomes -------------------------------------------------------------------


def test_paused_run(tracing: Tracing) -> None:
    def approval(state: Any, config: Any) -> dict[str, Any]:
        raise GraphInterrupt(())

    interrupts = [{"id": "int-1", "value": APPROVAL}]
    with root(tracing) as run:
        with pytest.raises(GraphInterrupt):
            traced_node(tracing.tracer, "human_approval", approval)({}, cfg(4, "h"))
        run.finish(
            "paused",
            **{c.TURN_RESPONSE: {**RESPONSE, "status": "paused"}, c.TURN_INTERRUPTS: interrupts},
        )
    events = tracing.events()
    assert [e.type for e in events] == [
        "graph_topology",
        "node_started",
        "node_completed",
        "paused",
    ]
    assert events[2].fields["status"] == "paused"
    paused = events[-1]
    assert paused.fields == {
        "interrupts": interrupts,
        "resume": {
            "method": "POST",
            "path": "/chat/resume",
            "body": {
                "thread_id": "th-1",
                "turn_id": "turn-1",
                "resume": "<your answer to the interrupt>",
            },
        },
    }
    assert paused.is_run_terminal and not paused.is_turn_terminal
    assert paused.ts == ms(tracing.recorder.span("invoke_agent support_agent").end_time)


def test_paused_with_several_interrupts_resumes_by_id(tracing: Tracing) -> None:
    interrupts = [{"id": "a", "value": 1}, {"id": "b", "value": 2}]
    with root(tracing) as run:
        run.finish("paused", **{c.TURN_INTERRUPTS: interrupts})
    paused = tracing.events()[-1]
    assert paused.fields["resume"]["body"]["resume"] == {"a": "<your answer>", "b": "<your answer>"}


def test_cancelled_run_is_error_cancelled(tracing: Tracing) -> None:
    with pytest.raises(asyncio.CancelledError), root(tracing):
        node(tracing, "guardrail_pre", 1)
        raise asyncio.CancelledError()
    last = tracing.events()[-1]
    assert last.type == "error"
    assert last.fields == {
        "code": "cancelled",
        "message": "The turn was cancelled.",
        "node": None,
        "retryable": True,
    }


def test_error_outcome_carries_code_message_node(tracing: Tracing) -> None:
    def failing(state: Any, config: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    with root(tracing) as run:
        with pytest.raises(RuntimeError):
            traced_node(tracing.tracer, "generate", failing)({}, cfg(3, "generate"))
        run.finish(
            "error",
            **{
                c.ERROR_CODE: "node_failed",
                c.ERROR_MESSAGE: "Sorry.",
                c.ERROR_NODE: "generate",
                c.ERROR_RETRYABLE: False,
            },
        )
    events = tracing.events()
    assert by_type(events, "node_completed")[0].fields["status"] == "error"
    assert events[-1].type == "error"
    assert events[-1].fields == {
        "code": "node_failed",
        "message": "Sorry.",
        "node": "generate",
        "retryable": False,
    }


@pytest.mark.parametrize(
    ("error", "retryable"), [(KeyError("x"), False), (ConnectionError("reset"), True)]
)
def test_exception_through_root_is_turn_failed(
    tracing: Tracing, error: Exception, retryable: bool
) -> None:
    """Retryable only when sending again may help: a connection error, not a bug."""
    with pytest.raises(type(error)), root(tracing):
        raise error
    last = tracing.events()[-1]
    assert last.type == "error"
    assert last.fields == {
        "code": "turn_failed",
        "message": "The agent could not finish this turn.",
        "node": None,
        "retryable": retryable,
    }


def test_missing_outcome_is_turn_failed(tracing: Tracing) -> None:
    span = tracing.tracer.start_span(
        "invoke_agent raw", attributes={c.TURN_ID: "turn-raw", c.CONVERSATION_ID: "th-raw"}
    )
    span.end()
    events = tracing.events()
    assert [e.type for e in events] == ["graph_topology", "error"]
    # no topology sent: discovered (none yet)
    assert events[0].fields == {
        "graph_id": "",
        "nodes": [],
        "edges": [],
        "run_kind": "chat",
        "discovered": True,
    }
    assert events[1].fields["code"] == "turn_failed"
    assert events[1].turn_id == "turn-raw" and events[1].thread_id == "th-raw"


def test_answered_without_response_is_reported(tracing: Tracing) -> None:
    with root(tracing) as run:
        run.finish("answered")
    last = tracing.events()[-1]
    assert last.type == "error" and last.fields["code"] == "attribute_missing"


# -- resume runs ---------------------------------------------------------------------------


def test_resume_run_carries_kind_and_human_wait(tracing: Tracing) -> None:
    with root(tracing) as run:
        run.finish("paused", **{c.TURN_INTERRUPTS: [{"id": "i", "value": APPROVAL}]})
    paused_root = tracing.recorder.span("invoke_agent support_agent")
    link = (tid(paused_root), sid(paused_root))
    with root(tracing, kind="resume", link_to=link) as run:
        node(tracing, "human_approval", 5, lambda: tool(tracing))
        run.end_attributes[c.TURN_HUMAN_WAIT_MS] = 1234.5
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    events = tracing.events()
    assert [e.type for e in events] == [
        "graph_topology",
        "paused",
        "graph_topology",
        "node_started",
        "tool_started",
        "tool_completed",
        "node_completed",
        "turn_completed",
    ]
    assert events[0].fields["run_kind"] == "chat"
    assert events[2].fields["run_kind"] == "resume"
    assert {e.turn_id for e in events} == {"turn-1"}
    assert events[0].trace_id != events[2].trace_id  # a resume is a new trace
    assert events[-1].fields["human_wait_ms"] == 1234.5
    assert "human_wait_ms" not in events[1].fields
    resume_root = [s for s in tracing.recorder.ended if s.name.startswith("invoke_agent")][1]
    assert resume_root.links[0].context.span_id == paused_root.context.span_id


def test_human_wait_only_on_resume(tracing: Tracing) -> None:
    normal_run(tracing, kind="chat", wait_ms=99.0)
    last = tracing.events()[-1]
    assert last.type == "turn_completed" and "human_wait_ms" not in last.fields


def test_resume_without_wait_has_no_human_wait(tracing: Tracing) -> None:
    normal_run(tracing, kind="resume")
    last = tracing.events()[-1]
    assert last.type == "turn_completed" and "human_wait_ms" not in last.fields


# -- spans the mapping does not know ---------------------------------------------------------


def test_spans_of_unknown_trace_map_to_nothing(tracing: Tracing) -> None:
    normal_run(tracing)
    # the same spans without the root's start: nothing is known about the trace
    records = [
        (r, e) for r, e in tracing.recorder.records if not (not e and c.TURN_ID in r.attributes)
    ]
    assert feed(records) == []


def test_spans_without_run_root_map_to_nothing(tracing: Tracing) -> None:
    outer = tracing.tracer.start_span("request")  # no relay.turn.id
    ctx = set_span_in_context(outer)
    span = tracing.tracer.start_span("node x", context=ctx, attributes={c.NODE_NAME: "x"})
    span.end()
    outer.end()
    assert tracing.events() == []


def test_spans_after_root_end_map_to_nothing(tracing: Tracing) -> None:
    root_span = tracing.tracer.start_span("invoke_agent a", attributes={c.TURN_ID: "t"})
    ctx = set_span_in_context(root_span)
    root_span.end()
    late = tracing.tracer.start_span("node late", context=ctx, attributes={c.NODE_NAME: "late"})
    late.end()
    assert tracing.types() == ["graph_topology", "error"]


def test_oldest_run_is_forgotten_past_max_open_runs(
    tracing: Tracing, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapping, "MAX_OPEN_RUNS", 2)
    roots = [
        tracing.tracer.start_span(f"invoke_agent {i}", attributes={c.TURN_ID: f"t{i}"})
        for i in range(3)
    ]
    nodes = [
        tracing.tracer.start_span(
            "node n", context=set_span_in_context(r), attributes={c.NODE_NAME: "n"}
        )
        for r in roots
    ]
    for s in nodes:
        s.end()
    state = MappingState()
    events = feed(tracing.recorder.records, state)
    assert [e.turn_id for e in by_type(events, "node_started")] == ["t1", "t2"]
    assert next(iter(state.runs.values())).turn_id == "t1" and len(state.runs) == 2


# -- truncated attributes (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT) --------------------------------


def test_truncated_topology_is_flagged(make_tracing) -> None:
    t = make_tracing(SpanLimits(max_attribute_length=50))
    with root(t) as run:
        run.finish("error")
    topo = t.events()[0]
    assert len(json.dumps(TOPOLOGY)) > 50
    assert topo.type == "graph_topology"
    assert topo.fields["truncated"] is True
    assert topo.fields["nodes"] == [] and topo.fields["edges"] == []


def test_truncated_response_is_attribute_truncated_error(make_tracing) -> None:
    t = make_tracing(SpanLimits(max_attribute_length=50))
    with root(t) as run:
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    last = t.events()[-1]
    assert last.type == "error"
    assert last.fields["code"] == "attribute_truncated"
    assert c.TURN_RESPONSE in last.fields["message"]
    assert "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in last.fields["message"]
    assert last.fields["retryable"] is False and last.fields["node"] is None


def test_truncated_interrupts_is_attribute_truncated_error(make_tracing) -> None:
    t = make_tracing(SpanLimits(max_attribute_length=50))
    with root(t) as run:
        run.finish("paused", **{c.TURN_INTERRUPTS: [{"id": "int-1", "value": APPROVAL}]})
    last = t.events()[-1]
    assert last.type == "error" and last.fields["code"] == "attribute_truncated"
    assert c.TURN_INTERRUPTS in last.fields["message"]


def test_generous_limit_truncates_nothing(make_tracing) -> None:
    t = make_tracing(SpanLimits(max_attribute_length=100_000))
    normal_run(t)
    events = t.events()
    assert "truncated" not in events[0].fields
    assert events[-1].type == "turn_completed"


# -- determinism -------------------------------------------------------------------------------


def test_same_records_give_equal_events(tracing: Tracing) -> None:
    normal_run(tracing)
    first = feed(tracing.recorder.records)
    second = feed(tracing.recorder.records)
    assert first == second
    assert [e.to_json() for e in first] == [e.to_json() for e in second]
    assert first is not second and first[0] is not second[0]


def test_map_span_from_plain_records() -> None:
    """The mapping reads SpanRecords, whatever built them (store, receiver)."""
    state = MappingState()
    r = SpanRecord(
        "a" * 32,
        "1" * 16,
        None,
        "invoke_agent x",
        1_000_000_123,
        None,
        {
            c.TURN_ID: "t",
            c.CONVERSATION_ID: "th",
            c.RUN_KIND: "resume",
            c.GRAPH_TOPOLOGY: json.dumps(TOPOLOGY),
        },
    )
    n = SpanRecord(
        "a" * 32,
        "2" * 16,
        "1" * 16,
        "node n",
        2_000_000_000,
        None,
        {c.NODE_NAME: "n", c.NODE_STEP: 1},
    )
    [topo] = map_span(state, r, False)
    assert topo.ts == 1000.0  # 1_000_000_123 ns -> ms, rounded to 3 places
    assert topo.fields["run_kind"] == "resume"
    [started] = map_span(state, n, False)
    assert started.fields["task_id"] is None and started.fields["step"] == 1
    n_end = SpanRecord(
        **{
            **{f: getattr(n, f) for f in n.__slots__},
            "end_ns": 2_500_000_000,
            "attributes": {**n.attributes, c.NODE_OUTCOME: "weird"},
            "status": "error",
        }
    )
    [done] = map_span(state, n_end, True)
    assert done.fields["status"] == "error"  # unknown outcome falls back to span status
    assert done.fields["duration_ms"] == 500.0 and done.ts == 2500.0


# -- property: any tree of spans maps to a well-formed, deterministic stream ----------------

_tree = st.recursive(
    st.sampled_from(["chat", "retrieval", "apply_guardrail", "execute_tool", "other"]).map(
        lambda op: (op, [])
    ),
    lambda kids: st.tuples(
        st.sampled_from(["chat", "retrieval", "apply_guardrail", "execute_tool", "other"]),
        st.lists(kids, max_size=3),
    ),
    max_leaves=8,
)


def _emit(t: Tracing, tree: tuple[str, list]) -> None:
    op, kids = tree
    attrs: dict[str, Any] = {}
    if op == "execute_tool":
        attrs[c.TOOL_NAME] = "tool"
    with child_span(t.tracer, f"{op} x", op, attrs) as span:
        if op == "chat":
            span.set_attribute(c.INPUT_TOKENS, 2)
            span.set_attribute(c.OUTPUT_TOKENS, 1)
        for kid in kids:
            _emit(t, kid)


def _count(tree: tuple[str, list], op: str) -> int:
    return (tree[0] == op) + sum(_count(k, op) for k in tree[1])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.lists(_tree, max_size=3), min_size=1, max_size=4))
def test_any_span_tree_maps_to_well_formed_events(make_tracing, nodes) -> None:
    t = make_tracing()
    with root(t) as run:
        for i, children in enumerate(nodes):
            node(t, f"n{i}", i, lambda children=children: [_emit(t, k) for k in children])
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    events = t.events()
    assert events == t.events()
    assert events[0].type == "graph_topology" and events[-1].type == "turn_completed"
    assert [e.fields["node"] for e in by_type(events, "node_started")] == [
        f"n{i}" for i in range(len(nodes))
    ]
    tools = sum(_count(k, "execute_tool") for kids in nodes for k in kids)
    assert len(by_type(events, "tool_started")) == tools
    assert len(by_type(events, "tool_completed")) == tools
    for i, (done, kids) in enumerate(zip(by_type(events, "node_completed"), nodes, strict=True)):
        assert done.fields["node"] == f"n{i}"
        assert len(done.fields["children"]) == sum(_size(k) for k in kids)
        chats = sum(_count(k, "chat") for k in kids)
        if chats:
            assert done.fields["summary"]["input_tokens"] == 2 * chats
            assert done.fields["summary"]["output_tokens"] == chats
        else:
            assert "input_tokens" not in done.fields["summary"]


def _size(tree: tuple[str, list]) -> int:
    return 1 + sum(_size(k) for k in tree[1])


# -- start markers (relay.start_of) -------------------------------------------------------


def _marker(span: SpanRecord, attributes: dict[str, Any] | str) -> SpanRecord:
    raw = attributes if isinstance(attributes, str) else json.dumps(attributes)
    return SpanRecord(
        span.trace_id,
        "e" * 16,
        span.parent_span_id,
        f"relay.start {span.name}",
        span.start_ns,
        span.start_ns,
        {c.START_OF: span.span_id, c.START_ATTRIBUTES: raw},
    )


def test_start_marker_stands_for_the_start_of_its_span(tracing: Tracing) -> None:
    with root(tracing) as run:
        node(tracing, "generate", 1, lambda: chat(tracing, 1, 1))
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    plain = tracing.events()
    records = tracing.recorder.records
    root_start = records[0][0]
    node_start = records[1][0]
    assert not records[0][1] and not records[1][1]
    # markers first (as an OTLP receiver sees them), then every span, starts included
    marked = [
        (_marker(root_start, dict(root_start.attributes)), False),
        (_marker(root_start, dict(root_start.attributes)), True),
        (_marker(node_start, dict(node_start.attributes)), False),
        *records,
    ]
    events = feed(marked)
    assert [e.type for e in events] == [e.type for e in plain]  # no duplicate starts
    assert events == plain  # same payloads, same ts


def test_cut_start_marker_is_ignored(tracing: Tracing) -> None:
    with root(tracing) as run:
        run.finish("answered", **{c.TURN_RESPONSE: RESPONSE})
    records = tracing.recorder.records
    cut = _marker(records[0][0], '{"relay.turn.id": "tu')
    assert feed([(cut, False)]) == []
    assert [e.type for e in feed([(cut, False), *records])] == ["graph_topology", "turn_completed"]


# -- other instrumentations (foreign runs) ------------------------------------------------


def test_openinference_langgraph_run(tracing: Tracing) -> None:
    """OpenInference sets its attributes at span end: nodes are recognised late."""
    t = tracing.tracer
    meta = json.dumps(
        {
            "langgraph_node": "generate",
            "langgraph_step": 3,
            "langgraph_checkpoint_ns": "generate:abc",
            "thread_id": "th-9",
        }
    )
    graph = t.start_span("LangGraph")
    gen = t.start_span("generate", context=set_span_in_context(graph))
    llm = t.start_span("ChatOpenAI", context=set_span_in_context(gen))
    llm.set_attributes(
        {
            "openinference.span.kind": "LLM",
            "metadata": meta,
            "llm.model_name": "gpt-x",
            "llm.token_count.prompt": 11,
            "llm.token_count.completion": 4,
        }
    )
    llm.end()
    gen.set_attributes({"openinference.span.kind": "CHAIN", "metadata": meta})
    gen.end()
    graph.set_attributes(
        {
            "openinference.span.kind": "CHAIN",
            "output.value": json.dumps({"messages": [{"content": "q"}, {"content": "the answer"}]}),
        }
    )
    graph.end()
    everything = tracing.events()
    trace_id = tid(graph)
    # no topology sent: the graph is discovered as it runs (relay/mapping/discovery.py)
    assert [e.type for e in everything] == [
        "graph_topology",
        "graph_discovered",
        "node_started",
        "node_completed",
        "graph_discovered",
        "turn_completed",
    ]
    assert everything[0].fields["discovered"] is True and everything[0].fields["nodes"] == []
    assert everything[4].fields["edges"] == [
        {"source": "__start__", "target": "generate", "conditional": False},
        {"source": "generate", "target": "__end__", "conditional": False},
    ]
    events = [e for e in everything if e.type != "graph_discovered"]
    assert {e.turn_id for e in events} == {trace_id}  # a foreign turn is keyed by its trace
    assert {e.thread_id for e in events} == {"th-9"}
    started = events[1]
    done = events[2]
    last = events[3]
    assert started.fields == {
        "node": "generate",
        "span_id": sid(gen),
        "parent_span_id": sid(graph),
        "step": 3,
        "task_id": "abc",
        "namespace": [],
    }
    assert started.ts == ms(gen.start_time)  # late, but stamped with the span's own start
    assert done.fields["summary"] == {"model": "gpt-x", "input_tokens": 11, "output_tokens": 4}
    assert [ch["operation"] for ch in done.fields["children"]] == ["chat"]
    response = last.fields["response"]
    assert response["status"] == "answered" and response["answer"] == "the answer"
    assert response["turn_id"] == trace_id and response["trace_id"] == trace_id
    assert [n["name"] for n in response["nodes"]] == ["generate"]


def test_openinference_interrupt_is_paused(tracing: Tracing) -> None:
    t = tracing.tracer
    meta = json.dumps({"langgraph_node": "human_approval", "langgraph_step": 4})
    graph = t.start_span("LangGraph")
    approval = t.start_span("human_approval", context=set_span_in_context(graph))
    approval.set_attributes({"openinference.span.kind": "CHAIN", "metadata": meta})
    approval.record_exception(GraphInterrupt(()))
    approval.set_status(Status(StatusCode.ERROR, "GraphInterrupt"))
    approval.end()
    graph.set_attributes({"openinference.span.kind": "CHAIN"})
    graph.end()
    events = [e for e in tracing.events() if e.type != "graph_discovered"]
    assert events[2].type == "node_completed" and events[2].fields["status"] == "paused"
    assert events[-1].type == "paused"  # the run waits: a paused event, as for our runs
    # GraphInterrupt(()) names no interrupt: the paused node stands for it
    assert events[-1].fields["interrupts"] == [{"id": sid(approval), "value": None}]
    assert events[-1].fields["resume"]["path"] is None  # its agent runs elsewhere


def test_openllmetry_workflow_run(tracing: Tracing) -> None:
    t = tracing.tracer
    assoc = "traceloop.association.properties."
    wf = t.start_span(
        "LangGraph.workflow",
        attributes={
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "LangGraph",
            assoc + "thread_id": "th-7",
        },
    )
    task = t.start_span(
        "generate.task",
        context=set_span_in_context(wf),
        attributes={
            "traceloop.span.kind": "task",
            "traceloop.entity.name": "generate",
            assoc + "langgraph_node": "generate",
            assoc + "langgraph_step": 2,
            assoc + "langgraph_checkpoint_ns": "generate:t-1",
        },
    )
    call = t.start_span(
        "openai.chat",
        context=set_span_in_context(task),
        attributes={c.OPERATION: "chat", c.REQUEST_MODEL: "gpt-y"},
    )
    call.set_attributes({"gen_ai.usage.prompt_tokens": 5, "gen_ai.usage.completion_tokens": 2})
    call.end()
    task.end()
    wf.set_attribute("traceloop.entity.output", json.dumps({"answer": "done"}))
    wf.end()
    events = [e for e in tracing.events() if e.type != "graph_discovered"]
    assert [e.type for e in events] == [
        "graph_topology",
        "node_started",
        "node_completed",
        "turn_completed",
    ]
    assert events[0].fields["graph_id"] == "LangGraph"
    assert events[0].ts == ms(wf.start_time)
    assert events[1].fields["step"] == 2 and events[1].fields["task_id"] == "t-1"
    assert events[2].fields["summary"] == {"model": "gpt-y", "input_tokens": 5, "output_tokens": 2}
    assert events[3].fields["response"]["answer"] == "done"
    assert events[3].thread_id == "th-7"


def test_foreign_failed_run_is_error_naming_the_node(tracing: Tracing) -> None:
    t = tracing.tracer
    assoc = "traceloop.association.properties."
    wf = t.start_span("w", attributes={"traceloop.span.kind": "workflow"})
    task = t.start_span(
        "generate.task",
        context=set_span_in_context(wf),
        attributes={
            "traceloop.span.kind": "task",
            "traceloop.entity.name": "generate",
            assoc + "langgraph_node": "generate",
        },
    )
    task.set_status(Status(StatusCode.ERROR, "boom"))
    task.end()
    wf.set_status(Status(StatusCode.ERROR, "boom"))
    wf.end()
    events = [e for e in tracing.events() if e.type != "graph_discovered"]
    assert events[2].fields["status"] == "error"
    assert events[-1].type == "error"
    assert events[-1].fields["code"] == "node_failed" and events[-1].fields["node"] == "generate"


def test_unrelated_spans_start_no_foreign_run(tracing: Tracing) -> None:
    http = tracing.tracer.start_span("GET /healthz", attributes={"http.method": "GET"})
    http.end()
    chain = tracing.tracer.start_span(
        "RunnableSequence", attributes={"openinference.span.kind": "CHAIN"}
    )
    chain.end()
    assert tracing.events() == []
