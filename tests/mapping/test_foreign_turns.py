"""Foreign runs, piece by piece: LangGraph's interrupts read from an exception message,
the discovered topology, a resume linked to its paused turn, the user's message read from
a run's input (relay/mapping/interrupts.py, discovery.py, links.py, answers.py)."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from relay.mapping import MappingState
from relay.mapping.answers import message_of
from relay.mapping.discovery import Discovery
from relay.mapping.feed import ordered_phases, replay_events
from relay.mapping.interrupts import interrupts_in, parse
from relay.mapping.links import is_resume_input, top_task
from relay.spans import SpanRecord

# -- interrupts ----------------------------------------------------------------------------

REPR = (
    "(Interrupt(value={'type': 'approval', 'question': 'Publish?'}, "
    "id='d8f0003c921cfe0771437d739cb60530', response_schema=None),)"
)


def test_an_interrupt_repr_is_read_not_run() -> None:
    assert parse(REPR, "span1") == [
        {
            "id": "d8f0003c921cfe0771437d739cb60530",
            "value": {"type": "approval", "question": "Publish?"},
        }
    ]


def test_several_interrupts_positional_fields_and_a_status_message() -> None:
    text = "GraphInterrupt((Interrupt('a', 'i1'), Interrupt(value=[1, 2], id='i2')))"
    assert parse(text, "s") == [{"id": "i1", "value": "a"}, {"id": "i2", "value": [1, 2]}]


def test_a_value_that_is_no_literal_is_kept_as_its_text() -> None:
    text = "(Interrupt(value=Decision(kind='x'), id='i9'),)"
    assert parse(text, "s") == [{"id": "i9", "value": "Decision(kind='x')"}]


def test_nothing_to_run_in_a_hostile_message() -> None:
    text = "(Interrupt(value=__import__('os').system('false'), id='i1'),)"
    assert parse(text, "s") == [{"id": "i1", "value": "__import__('os').system('false')"}]


@pytest.mark.parametrize("text", ["()", "", "   "])
def test_an_interrupt_that_names_none(text: str) -> None:
    assert parse(text, "s") == []


def test_a_spurious_systemerror_of_the_parser_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CPython 3.11's parser may refuse a message with a SystemError when another thread
    parses at the same moment (python/cpython#106905): the interrupts are read all the
    same, and a message too deep to parse is kept as its text."""
    real = ast.parse
    refusals = iter([SystemError("AST constructor recursion depth mismatch")] * 2)

    def flaky(*args: Any, **kwargs: Any) -> Any:
        refusal = next(refusals, None)
        if refusal is not None:
            raise refusal
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", flaky)
    assert parse(REPR, "span1")[0]["id"] == "d8f0003c921cfe0771437d739cb60530"
    monkeypatch.setattr(ast, "parse", real)
    deep = "(" * 100_000 + ")" * 100_000
    assert parse(deep, "s") == [{"id": "s", "value": deep}]


def test_a_plain_node_interrupt_message() -> None:
    assert parse("Please approve the refund", "s7") == [
        {"id": "s7", "value": "Please approve the refund"}
    ]


def span(
    name: str,
    span_id: str,
    parent: str | None,
    start: int,
    end: int,
    trace: str = "t" * 32,
    status: str = "ok",
    events: list[Any] | None = None,
    status_message: str = "",
    **attrs: Any,
) -> SpanRecord:
    return SpanRecord(
        trace,
        span_id,
        parent,
        name,
        start,
        end,
        attrs,
        status=status,
        status_message=status_message,
        events=events or [],
    )


def test_interrupts_from_an_exception_event_or_an_error_status() -> None:
    event = {
        "name": "exception",
        "time_ns": 5,
        "attributes": {
            "exception.type": "langgraph.errors.GraphInterrupt",
            "exception.message": REPR,
        },
    }
    on_ok = span("approve", "a" * 16, None, 1, 9, events=[event])
    on_error = span(
        "approve",
        "b" * 16,
        None,
        1,
        9,
        status="error",
        status_message="GraphInterrupt(" + REPR + ")",
    )
    assert interrupts_in(on_ok) == interrupts_in(on_error) == parse(REPR, "x")


# -- discovery -----------------------------------------------------------------------------


def edges(d: Discovery) -> list[tuple[str, str]]:
    return [(e["source"], e["target"]) for e in d.topology()["edges"]]


def test_edges_in_the_order_nodes_ran_with_a_fan_out_and_a_join() -> None:
    d = Discovery("g")
    assert d.started("plan")
    d.finished("plan", "ok")
    assert d.started("web") and d.started("docs")  # parallel: both follow plan
    d.finished("docs", "ok")
    d.finished("web", "ok")
    assert d.started("join")
    d.finished("join", "ok")
    assert d.ended()
    assert edges(d) == [
        ("__start__", "plan"),
        ("plan", "web"),
        ("plan", "docs"),
        ("docs", "join"),
        ("web", "join"),
        ("join", "__end__"),
    ]
    assert d.topology()["discovered"] is True


def test_a_node_run_again_adds_nothing_and_a_paused_node_leads_nowhere() -> None:
    d = Discovery()
    d.started("agent")
    d.finished("agent", "ok")
    d.started("tools")
    d.finished("tools", "ok")
    assert d.started("agent")  # the loop back is an edge
    d.finished("agent", "ok")
    d.started("tools")
    assert not d.started("tools")  # nothing new
    d.finished("tools", "paused")
    # resumed: the paused node runs again after the same node as before
    assert not d.started("tools")
    assert edges(d) == [("__start__", "agent"), ("agent", "tools"), ("tools", "agent")]


# -- links and messages ------------------------------------------------------------------


def test_resume_commands_as_both_instrumentations_write_them() -> None:
    command = {"graph": None, "update": None, "resume": {"approved": True}, "goto": []}
    assert is_resume_input({"input.value": json.dumps(command)})
    assert is_resume_input({"traceloop.entity.input": json.dumps({"inputs": command})})
    assert not is_resume_input({"input.value": json.dumps({"messages": []})})
    assert not is_resume_input({"input.value": "resume"})
    assert top_task("review:t1|check:t2") == "review:t1" and top_task(None) is None


@pytest.mark.parametrize(
    "value",
    [
        {"messages": [{"role": "user", "content": "Where is my parcel?"}]},
        {
            "messages": [
                {"type": "human", "data": {"content": "Where is my parcel?"}},
                {"type": "ai", "data": {"content": "On its way."}},
            ]
        },
        {
            "inputs": {
                "messages": [
                    {
                        "lc": 1,
                        "type": "constructor",
                        "id": ["langchain", "schema", "messages", "HumanMessage"],
                        "kwargs": {"content": "Where is my parcel?", "type": "human"},
                    }
                ]
            }
        },
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Where is my parcel?"}]}
            ]
        },
    ],
)
def test_the_users_message_in_every_input_format(value: dict[str, Any]) -> None:
    key = "traceloop.entity.input" if "inputs" in value else "input.value"
    assert message_of({key: json.dumps(value)}) == "Where is my parcel?"


def test_no_message_in_a_resume_or_a_non_json_input() -> None:
    assert message_of({"input.value": json.dumps({"resume": 1, "goto": []})}) == ""
    assert message_of({"input.value": "hello"}) == ""


# -- a foreign turn, paused then resumed in a new trace -----------------------------------

T1 = "1" * 32
T2 = "2" * 32
LATER = 2_000_000_000  # the resume: two seconds after the pause


def oi(
    name: str,
    span_id: str,
    parent: str | None,
    start: int,
    end: int,
    trace: str,
    node: str | None = None,
    task: str | None = None,
    **extra: Any,
) -> SpanRecord:
    meta: dict[str, Any] = {"thread_id": "th-1", "ls_integration": "langgraph"}
    if node:
        meta.update(langgraph_node=node, langgraph_step=1, langgraph_checkpoint_ns=task)
    return span(
        name,
        span_id,
        parent,
        start,
        end,
        trace=trace,
        **{"openinference.span.kind": "CHAIN", "metadata": json.dumps(meta)},
        **extra,
    )


def paused_then_resumed() -> list[SpanRecord]:
    interrupt = {
        "name": "exception",
        "time_ns": 40,
        "attributes": {"exception.type": "GraphInterrupt", "exception.message": REPR},
    }
    question = json.dumps({"messages": [{"role": "user", "content": "Publish it?"}]})
    answer = json.dumps({"messages": [{"type": "ai", "data": {"content": "Published."}}]})
    return [
        oi("g", "a" * 16, None, 10, 50, T1, **{"input.value": question}),
        oi("write", "b" * 16, "a" * 16, 11, 20, T1, node="write", task="write:w1"),
        oi(
            "approve",
            "c" * 16,
            "a" * 16,
            21,
            45,
            T1,
            node="approve",
            task="approve:x1",
            events=[interrupt],
        ),
        # the resume: a new trace, the same thread; its input is no command (a plain
        # invoke), but it reruns the interrupted task
        oi("g", "d" * 16, None, LATER + 100, LATER + 150, T2, **{"output.value": answer}),
        oi(
            "approve",
            "e" * 16,
            "d" * 16,
            LATER + 101,
            LATER + 120,
            T2,
            node="approve",
            task="approve:x1",
        ),
        oi("send", "f" * 16, "d" * 16, LATER + 121, LATER + 140, T2, node="send", task="send:s1"),
    ]


def test_the_resume_continues_the_paused_turn_and_the_replay_equals_it() -> None:
    events = replay_events(paused_then_resumed())
    assert {e.turn_id for e in events} == {T1}
    kinds = [
        (e.type, e.fields.get("node") or e.fields.get("run_kind"))
        for e in events
        if e.type not in ("graph_discovered", "node_completed")
    ]
    assert kinds == [
        ("graph_topology", "chat"),
        ("node_started", "write"),
        ("node_started", "approve"),
        ("paused", None),
        ("graph_topology", "resume"),
        ("node_started", "approve"),
        ("node_started", "send"),
        ("turn_completed", None),
    ]
    paused = next(e for e in events if e.type == "paused")
    assert paused.fields["interrupts"] == parse(REPR, "")
    assert paused.fields["resume"]["body"]["turn_id"] == T1
    done = events[-1]
    assert done.fields["response"]["answer"] == "Published."
    assert done.fields["human_wait_ms"] == (((LATER + 100 - 50) + 500) // 1000 / 1000)
    resumed_topology = [e for e in events if e.type == "graph_topology"][1]
    assert [n["id"] for n in resumed_topology.fields["nodes"]] == [
        "__start__",
        "write",
        "approve",
    ]  # the graph discovered before the pause


def test_another_run_on_the_thread_is_a_new_turn() -> None:
    spans = paused_then_resumed()
    spans[4] = oi(
        "other", "e" * 16, "d" * 16, LATER + 101, LATER + 120, T2, node="other", task="other:o1"
    )
    events = replay_events(spans)
    assert [e.turn_id for e in events if e.type == "graph_topology"] == [T1, T2]


def test_fed_in_any_order_of_arrival_the_same_events() -> None:
    spans = paused_then_resumed()
    state = MappingState()
    from relay.mapping.feed import as_live, feed

    out: list[Any] = []
    for trace in (T1, T2):  # each trace arrives whole, children before the root
        mine = [s for s in reversed(spans) if s.trace_id == trace]
        feed(state, ordered_phases(mine), out.append, read=as_live)
    assert [(e.type, e.turn_id, e.fields) for e in out] == [
        (e.type, e.turn_id, e.fields) for e in replay_events(spans)
    ]


# -- what is noted of the runs that begin and end -------------------------------------------


def test_the_relay_in_process_notes_only_foreign_runs() -> None:
    """A receiver keeps the message and user of every run it maps (it writes every
    received turn's record); the relay in-process (``own_runs=False``) only those of
    foreign runs: its own runs write their records, and nothing of them is kept here."""
    from relay import conventions as c
    from relay.mapping.state import Run
    from relay.turns.foreign import NotedRuns

    root = SpanRecord("a" * 32, "b" * 16, None, "run", 1, None, {c.ENDUSER_ID: "ann"})
    own = Run("own-turn", "t1", "a" * 32, "chat", message="How do refunds work?")
    foreign = Run("foreign-turn", "t2", "c" * 32, "chat", foreign=True, message="hi")
    both = (["own-turn", "foreign-turn"], ["a" * 32, "c" * 32])
    for own_runs, (kept, traces) in ((True, both), (False, (["foreign-turn"], ["c" * 32]))):
        noted = NotedRuns(own_runs=own_runs)
        notes = [("start", own, root), ("start", foreign, root)]
        entries = noted.take(notes)
        assert notes == []
        assert [e.turn_id for e in entries] == ["foreign-turn"]  # the index: foreign only
        # messages by turn; users by run (trace): one turn's runs may name different users
        assert list(noted.messages) == kept and list(noted.users) == traces
        assert list(noted.foreign) == ["foreign-turn"]
