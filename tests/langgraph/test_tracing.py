"""relay.langgraph.spans: run_span, traced_node and child_span on a real SDK tracer."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest
from langgraph.errors import GraphInterrupt
from opentelemetry.trace import StatusCode

from relay import conventions as c
from relay.langgraph.spans import NodeLog, child_span, run_span, traced_node
from tests.spanrec import Tracing

TOPOLOGY = {"nodes": [{"id": "a", "label": "a"}], "edges": []}
CONFIG = {"metadata": {"langgraph_step": 2, "langgraph_checkpoint_ns": "generate:task-42"}}


def _us_ms(ns: int) -> float:
    """A duration as events carry it: milliseconds to the microsecond, half up."""
    return (ns + 500) // 1000 / 1000


def root(t: Tracing, **kw: Any):
    args = {
        "agent": "support_agent",
        "thread_id": "th-1",
        "turn_id": "turn-1",
        "run_kind": "chat",
        "graph_id": "support_agent",
        "topology": TOPOLOGY,
    }
    args.update(kw)
    return run_span(t.tracer, **args)


def start_attrs(t: Tracing, name: str) -> dict[str, Any]:
    [attrs] = [a for n, a in t.recorder.started if n == name]
    return attrs


# -- run_span ---------------------------------------------------------------------------------


def test_run_span_identifying_attributes_at_start(tracing: Tracing) -> None:
    with root(tracing, message="How do refunds work?") as run:
        run.finish("answered", **{c.TURN_RESPONSE: {"status": "answered"}})
    attrs = start_attrs(tracing, "invoke_agent support_agent")
    assert attrs == {
        c.OPERATION: "invoke_agent",
        c.AGENT_NAME: "support_agent",
        c.CONVERSATION_ID: "th-1",
        c.TURN_ID: "turn-1",
        c.RUN_KIND: "chat",
        c.GRAPH_ID: "support_agent",
        c.GRAPH_TOPOLOGY: json.dumps(TOPOLOGY, separators=(",", ":")),
        c.TURN_MESSAGE: "How do refunds work?",
    }
    assert c.TURN_OUTCOME not in attrs  # an end attribute


def test_run_span_sets_outcome_and_end_attributes(tracing: Tracing) -> None:
    with root(tracing) as run:
        run.finish(
            "paused",
            **{
                c.TURN_INTERRUPTS: [{"id": "i", "value": {"a": 1}}],
                c.ERROR_NODE: None,
                c.TURN_HUMAN_WAIT_MS: 12.5,
            },
        )
        trace_id = run.trace_id
        span_id = run.span_id
    span = tracing.recorder.span("invoke_agent support_agent")
    assert span.attributes[c.TURN_OUTCOME] == "paused"
    assert json.loads(span.attributes[c.TURN_INTERRUPTS]) == [{"id": "i", "value": {"a": 1}}]
    assert span.attributes[c.TURN_HUMAN_WAIT_MS] == 12.5
    assert c.ERROR_NODE not in span.attributes  # None values are skipped
    assert span.status.status_code == StatusCode.UNSET
    assert trace_id == format(span.context.trace_id, "032x") and len(trace_id) == 32
    assert span_id == format(span.context.span_id, "016x") and len(span_id) == 16


def test_run_span_without_finish_is_error(tracing: Tracing) -> None:
    with root(tracing):
        pass
    assert tracing.recorder.span("invoke_agent support_agent").attributes[c.TURN_OUTCOME] == "error"


def test_run_span_exception_is_error_with_status(tracing: Tracing) -> None:
    with pytest.raises(ValueError), root(tracing) as run:
        run.finish("answered")
        raise ValueError("boom")
    span = tracing.recorder.span("invoke_agent support_agent")
    assert span.attributes[c.TURN_OUTCOME] == "error"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "ValueError"
    assert [e.name for e in span.events] == ["exception"]


def test_run_span_cancelled(tracing: Tracing) -> None:
    with pytest.raises(asyncio.CancelledError), root(tracing):
        raise asyncio.CancelledError()
    span = tracing.recorder.span("invoke_agent support_agent")
    assert span.attributes[c.TURN_OUTCOME] == "cancelled"
    assert span.status.status_code == StatusCode.UNSET


def test_run_span_links_to_the_paused_run(tracing: Tracing) -> None:
    link = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    with root(tracing, run_kind="resume", link_to=link):
        pass
    span = tracing.recorder.span("invoke_agent support_agent")
    [lk] = span.links
    assert (format(lk.context.trace_id, "032x"), format(lk.context.span_id, "016x")) == link
    assert start_attrs(tracing, "invoke_agent support_agent")[c.RUN_KIND] == "resume"


def test_run_span_is_current_inside(tracing: Tracing) -> None:
    with root(tracing):
        with child_span(tracing.tracer, "chat m", c.OP_CHAT):
            pass
    rootspan = tracing.recorder.span("invoke_agent support_agent")
    assert tracing.recorder.span("chat m").parent.span_id == rootspan.context.span_id


# -- traced_node --------------------------------------------------------------------------------


def test_node_ok_attributes_at_start(tracing: Tracing) -> None:
    def generate(state: dict, config: dict) -> dict:
        return {"x": state["y"]}

    wrapped = traced_node(tracing.tracer, "generate", generate)
    assert wrapped.__name__ == "generate" and not inspect.iscoroutinefunction(wrapped)
    assert wrapped({"y": 1}, CONFIG) == {"x": 1}
    assert start_attrs(tracing, "node generate") == {
        c.NODE_NAME: "generate",
        c.NODE_STEP: 2,
        c.NODE_TASK_ID: "task-42",
    }
    span = tracing.recorder.span("node generate")
    assert span.attributes[c.NODE_OUTCOME] == "ok"
    assert span.status.status_code == StatusCode.UNSET


@pytest.mark.parametrize(
    "config", [None, {}, {"metadata": {}}, {"metadata": {"langgraph_checkpoint_ns": "no-colon"}}]
)
def test_node_without_langgraph_metadata(tracing: Tracing, config: Any) -> None:
    traced_node(tracing.tracer, "n", lambda s, cfg: None)({}, config)
    assert start_attrs(tracing, "node n") == {c.NODE_NAME: "n"}


def test_node_interrupt_is_paused_not_error(tracing: Tracing) -> None:
    def approval(state: dict, config: dict) -> dict:
        raise GraphInterrupt(())

    with pytest.raises(GraphInterrupt):
        traced_node(tracing.tracer, "human_approval", approval)({}, CONFIG)
    span = tracing.recorder.span("node human_approval")
    assert span.attributes[c.NODE_OUTCOME] == "paused"
    assert span.status.status_code == StatusCode.UNSET
    assert span.events == ()


def test_node_exception_is_error(tracing: Tracing) -> None:
    def generate(state: dict, config: dict) -> dict:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        traced_node(tracing.tracer, "generate", generate)({}, CONFIG)
    span = tracing.recorder.span("node generate")
    assert span.attributes[c.NODE_OUTCOME] == "error"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "KeyError"
    assert [e.name for e in span.events] == ["exception"]


async def test_async_node_outcomes(tracing: Tracing) -> None:
    async def ok(state: dict, config: dict) -> str:
        await asyncio.sleep(0)
        return "done"

    async def interrupted(state: dict, config: dict) -> None:
        raise GraphInterrupt(())

    async def failing(state: dict, config: dict) -> None:
        raise RuntimeError("x")

    async def slow(state: dict, config: dict) -> None:
        await asyncio.sleep(30)

    wrapped = traced_node(tracing.tracer, "ok", ok)
    assert inspect.iscoroutinefunction(wrapped)
    assert await wrapped({}, CONFIG) == "done"
    with pytest.raises(GraphInterrupt):
        await traced_node(tracing.tracer, "interrupted", interrupted)({}, CONFIG)
    with pytest.raises(RuntimeError):
        await traced_node(tracing.tracer, "failing", failing)({}, CONFIG)
    task = asyncio.ensure_future(traced_node(tracing.tracer, "slow", slow)({}, CONFIG))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    outcomes = {
        s.name: (s.attributes[c.NODE_OUTCOME], s.status.status_code) for s in tracing.recorder.ended
    }
    assert outcomes == {
        "node ok": ("ok", StatusCode.UNSET),
        "node interrupted": ("paused", StatusCode.UNSET),
        "node failing": ("error", StatusCode.ERROR),
        "node slow": ("cancelled", StatusCode.UNSET),
    }
    assert start_attrs(tracing, "node slow")[c.NODE_NAME] == "slow"


def test_node_log_records_each_node(tracing: Tracing) -> None:
    def fail(state: dict, config: dict) -> None:
        raise RuntimeError("x")

    with root(tracing) as run:
        traced_node(tracing.tracer, "a", lambda s, cfg: None)({}, CONFIG)
        with pytest.raises(RuntimeError):
            traced_node(tracing.tracer, "b", fail)({}, CONFIG)
        snapshot = run.node_log.snapshot()
    assert [(n["name"], n["status"]) for n in snapshot] == [("a", "ok"), ("b", "error")]
    a = tracing.recorder.span("node a")
    assert snapshot[0]["duration_ms"] == _us_ms(a.end_time - a.start_time)
    snapshot[0]["status"] = "changed"
    assert run.node_log.snapshot()[0]["status"] == "ok"  # a copy
    rootspan = tracing.recorder.span("invoke_agent support_agent")
    assert a.parent.span_id == rootspan.context.span_id


def test_node_outside_a_run_still_traces(tracing: Tracing) -> None:
    assert traced_node(tracing.tracer, "n", lambda s, cfg: 5)({}, None) == 5
    assert tracing.recorder.span("node n").attributes[c.NODE_OUTCOME] == "ok"


def test_node_log_started() -> None:
    log = NodeLog()
    entry = log.started("x")
    assert entry == {"name": "x", "status": "running", "duration_ms": 0.0}
    assert log.snapshot() == [entry]


# -- child_span ----------------------------------------------------------------------------------


def test_child_span_attributes_at_start_and_parent(tracing: Tracing) -> None:
    def body(state: dict, config: dict) -> None:
        with child_span(
            tracing.tracer,
            "execute_tool issue_refund",
            c.OP_TOOL,
            {c.TOOL_NAME: "issue_refund", c.TOOL_CALL_ID: "c1"},
        ) as span:
            span.set_attribute("late", 1)

    traced_node(tracing.tracer, "human_approval", body)({}, CONFIG)
    assert start_attrs(tracing, "execute_tool issue_refund") == {
        c.OPERATION: c.OP_TOOL,
        c.TOOL_NAME: "issue_refund",
        c.TOOL_CALL_ID: "c1",
    }
    child = tracing.recorder.span("execute_tool issue_refund")
    node = tracing.recorder.span("node human_approval")
    assert child.parent.span_id == node.context.span_id
    assert child.attributes["late"] == 1
    assert child.status.status_code == StatusCode.UNSET


def test_child_span_error_is_marked_and_raised(tracing: Tracing) -> None:
    with pytest.raises(TimeoutError), child_span(tracing.tracer, "chat m", c.OP_CHAT):
        raise TimeoutError()
    span = tracing.recorder.span("chat m")
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "TimeoutError"
    assert [e.name for e in span.events] == ["exception"]


def test_child_span_interrupt_is_not_an_error(tracing: Tracing) -> None:
    with pytest.raises(GraphInterrupt), child_span(tracing.tracer, "x", "other"):
        raise GraphInterrupt(())
    span = tracing.recorder.span("x")
    assert span.status.status_code == StatusCode.UNSET and span.events == ()


def test_child_span_cancel_is_not_an_error(tracing: Tracing) -> None:
    with pytest.raises(asyncio.CancelledError), child_span(tracing.tracer, "x", "other"):
        raise asyncio.CancelledError()
    span = tracing.recorder.span("x")
    assert span.status.status_code == StatusCode.UNSET


def test_traced_node_takes_a_node_of_state_alone(tracing: Tracing) -> None:
    """``def node(state)``, sync or async, as LangGraph allows: no TypeError."""

    async def later(state: dict) -> dict:
        return {"n": state["n"] + 2}

    assert traced_node(tracing.tracer, "one", lambda state: {"n": state["n"] + 1})(
        {"n": 1}, CONFIG
    ) == {"n": 2}
    assert asyncio.run(traced_node(tracing.tracer, "two", later)({"n": 1}, CONFIG)) == {"n": 3}
    names = [s.name for s in tracing.recorder.ended]
    assert names == ["node one", "node two"]
