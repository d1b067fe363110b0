"""relay.agui: our events -> AG-UI 1.0, checked against the ``ag-ui-protocol`` models and the
rules the real client enforces (tests/delivery/agui_checks.py), with crafted event sequences:
text deltas, repeated and parallel nodes, tools, pauses, errors, late attaches, cut
streams, and an EventStream written through the encoder."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from relay.bus.static import StaticReader
from relay.delivery.agui import AGUIEncoder, interrupt
from relay.delivery.agui_run import clean, step_name
from relay.delivery.streaming import EventStream
from relay.events import Event
from tests.delivery.agui_checks import check_stream, validate_event

TRACE = "ab" * 16
TRACE2 = "cd" * 16


def ev(type_: str, seq: int = 0, trace: str = TRACE, ts: float = 1000.25, **fields: Any) -> Event:
    return Event(type_, "thread-1", "turn-1", trace, ts, fields, seq)


def topology(trace: str = TRACE, kind: str = "chat") -> Event:
    return ev(
        "graph_topology",
        trace=trace,
        graph_id="g",
        run_kind=kind,
        nodes=[{"id": "generate", "label": "generate"}],
        edges=[],
    )


def node(kind: str, name: str, span: str | None, trace: str = TRACE, **fields: Any) -> Event:
    if kind == "started":
        return ev(
            "node_started",
            trace=trace,
            node=name,
            span_id=span,
            parent_span_id=None,
            step=1,
            task_id="task",
            **fields,
        )
    return ev(
        "node_completed",
        trace=trace,
        node=name,
        span_id=span,
        status=fields.pop("status", "ok"),
        duration_ms=1.5,
        summary={},
        **fields,
    )


def delta(
    text: str, message: str = "msg_1", span: str = "chat1", node_name: str | None = "generate"
) -> Event:
    return ev("text_delta", message_id=message, delta=text, node=node_name, span_id=span)


def answered(answer: str, trace: str = TRACE, status: str = "answered") -> Event:
    return ev(
        "turn_completed",
        trace=trace,
        response={
            "thread_id": "thread-1",
            "turn_id": "turn-1",
            "trace_id": trace,
            "status": status,
            "answer": answer,
            "citations": [],
            "interrupts": [],
            "nodes": [],
        },
    )


def translate(events: list[Event], **kwargs: Any) -> list[dict[str, Any]]:
    encoder = AGUIEncoder(**kwargs)
    out: list[dict[str, Any]] = []
    for e in events:
        out += encoder.translate(e)
    return out + encoder.finish()  # what the stream's end releases (EventStream: epilogue)


def frames(raw: bytes) -> list[dict[str, Any]]:
    text = raw.decode()
    assert "\r" not in text
    return [
        json.loads(block[len("data: ") :])
        for block in text.split("\n\n")[:-1]
        if block.startswith("data: ")
    ]


def test_an_answered_run_with_text_deltas() -> None:
    words = ["Refunds ", "take ", "5 ", "days."]
    out = translate(
        [
            topology(),
            node("started", "generate", "n1"),
            *[delta(w) for w in words],
            node("completed", "generate", "n1", children=[{"span_id": "chat1", "name": "chat m"}]),
            answered("".join(words)),
        ],
        thread_id="thread-1",
        run_id="run-9",
    )
    (run,) = check_stream(out)
    assert [e["type"] for e in run] == [
        "RUN_STARTED",
        "CUSTOM",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        *["TEXT_MESSAGE_CONTENT"] * 4,
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "CUSTOM",
        "RUN_FINISHED",
    ]
    assert run[0] == {
        "type": "RUN_STARTED",
        "timestamp": 1000,
        "threadId": "thread-1",
        "runId": "run-9",
        "protocolVersion": "1.0",
    }
    assert run[2]["stepName"] == "generate#n1"
    assert run[3] == {
        "type": "TEXT_MESSAGE_START",
        "timestamp": 1000,
        "messageId": "msg_1",
        "role": "assistant",
    }
    assert "".join(e["delta"] for e in run[4:8]) == "".join(words)
    assert run[-2]["name"] == "node_completed"
    assert run[-2]["value"]["status"] == "ok" and run[-2]["value"]["duration_ms"] == 1.5
    assert run[-1]["outcome"] == {"type": "success"}
    assert run[-1]["result"]["answer"] == "".join(words)
    # streamed: no second copy of the answer at the end
    assert sum(e["type"] == "TEXT_MESSAGE_START" for e in run) == 1


def test_an_answer_without_deltas_becomes_one_message() -> None:
    out = translate([topology(), answered("I can't help with that.", status="refused")])
    check_stream(out)
    texts = [e for e in out if e["type"].startswith("TEXT_MESSAGE")]
    assert [e["type"] for e in texts] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    assert texts[1]["delta"] == "I can't help with that."
    assert out[-1]["result"]["status"] == "refused"


def test_repeated_and_parallel_node_instances_have_their_own_steps() -> None:
    out = translate(
        [
            topology(),
            node("started", "search", "a"),
            node("started", "search", "b"),
            node("completed", "search", "b"),
            node("completed", "search", "a"),
            node("started", "search", None),
            node("started", "search", None),
            answered("done"),
        ]
    )
    check_stream(out)
    started = [e["stepName"] for e in out if e["type"] == "STEP_STARTED"]
    assert started == ["search#a", "search#b", "search:3", "search:4"]
    assert len(set(started)) == 4
    assert step_name("generate", None, 2) == "generate:2"


def test_messages_close_with_their_own_node_instance() -> None:
    """Two generate instances in parallel, each with its model call: a message ends with the
    node whose children hold its model-call span, not with the other one."""
    out = translate(
        [
            topology(),
            node("started", "generate", "n1"),
            node("started", "generate", "n2"),
            delta("one ", "m1", "c1"),
            delta("two ", "m2", "c2"),
            node("completed", "generate", "n2", children=[{"span_id": "c2"}]),
            delta("more", "m1", "c1"),
            node("completed", "generate", "n1", children=[{"span_id": "c1"}]),
            answered("one more"),
        ]
    )
    check_stream(out)
    order = [
        (e["type"], e.get("messageId") or e.get("stepName"))
        for e in out
        if e["type"] in ("TEXT_MESSAGE_END", "STEP_FINISHED")
    ]
    assert order == [
        ("TEXT_MESSAGE_END", "m2"),
        ("STEP_FINISHED", "generate#n2"),
        ("TEXT_MESSAGE_END", "m1"),
        ("STEP_FINISHED", "generate#n1"),
    ]


def test_tool_call_with_arguments_from_the_approval_interrupt() -> None:
    pending = [
        {
            "id": "int-1",
            "value": {
                "type": "approval",
                "tool": "issue_refund",
                "args": {"order_id": "1234", "amount": 20.0},
            },
        }
    ]
    out = translate(
        [
            topology(kind="resume"),
            node("started", "human_approval", "h1"),
            ev(
                "tool_started",
                tool="issue_refund",
                span_id="t1",
                node="human_approval",
                call_id="call-1",
                label="Issuing refund",
            ),
            ev(
                "tool_completed",
                tool="issue_refund",
                span_id="t1",
                node="human_approval",
                call_id="call-1",
                duration_ms=2.0,
                status="ok",
            ),
            node("completed", "human_approval", "h1"),
            answered("Done."),
        ],
        interrupts=pending,
    )
    check_stream(out)
    calls = [e for e in out if e["type"].startswith("TOOL_CALL")]
    assert [e["type"] for e in calls] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert calls[0]["toolCallName"] == "issue_refund"
    assert calls[0]["metadata"] == {
        "label": "Issuing refund",
        "node": "human_approval",
        "span_id": "t1",
    }
    assert json.loads(calls[1]["delta"]) == {"order_id": "1234", "amount": 20.0}
    assert json.loads(calls[3]["content"]) == {
        "tool": "issue_refund",
        "status": "ok",
        "duration_ms": 2.0,
    }
    assert calls[3]["messageId"] == "call-1-result" and calls[3]["role"] == "tool"


def test_tool_arguments_on_the_event_win() -> None:
    out = translate(
        [
            topology(),
            ev(
                "tool_started",
                tool="lookup",
                span_id="t1",
                node=None,
                call_id=None,
                args={"q": "x"},
            ),
            answered("ok"),
        ]
    )
    check_stream(out)
    start, args = (e for e in out if e["type"] in ("TOOL_CALL_START", "TOOL_CALL_ARGS"))
    assert start["toolCallId"] == "t1"  # no call id: the span names the call
    assert json.loads(args["delta"]) == {"q": "x"}
    # the run ended without the tool's result: it gets one, so nothing is left pending
    result = next(e for e in out if e["type"] == "TOOL_CALL_RESULT")
    assert json.loads(result["content"])["status"] == "cancelled"


def test_a_pause_is_an_interrupt_outcome_and_the_resume_is_a_second_run() -> None:
    value = {
        "type": "approval",
        "tool": "issue_refund",
        "args": {"order_id": "1234", "amount": 20.0},
    }
    out = translate(
        [
            topology(),
            node("started", "human_approval", "h1"),
            node("completed", "human_approval", "h1", status="paused"),
            ev(
                "paused",
                interrupts=[{"id": "int-1", "value": value}],
                resume={"method": "POST", "path": "/chat/resume", "body": {}},
            ),
            topology(TRACE2, "resume"),
            ev(
                "tool_started",
                trace=TRACE2,
                tool="issue_refund",
                span_id="t9",
                node="human_approval",
                call_id="call-1",
            ),
            ev(
                "tool_completed",
                trace=TRACE2,
                tool="issue_refund",
                span_id="t9",
                node="human_approval",
                call_id="call-1",
                duration_ms=1.0,
                status="ok",
            ),
            answered("Done.", TRACE2),
        ]
    )
    first, second = check_stream(out)
    assert first[0]["runId"] == TRACE and second[0]["runId"] == TRACE2
    finished = first[-1]
    assert finished["type"] == "RUN_FINISHED"
    (item,) = finished["outcome"]["interrupts"]
    assert item == {
        "id": "int-1",
        "reason": "approval",
        "responseSchema": item["responseSchema"],
        "message": "The agent wants to run issue_refund(order_id=1234, "
        "amount=20.0). Approve or reject it.",
        "metadata": {"value": value},
    }
    assert "result" not in finished
    # the resume's tool call takes its arguments from the pause the stream saw
    args = next(e for e in second if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args["delta"]) == value["args"]


def test_errors_close_what_is_open() -> None:
    out = translate(
        [
            topology(),
            node("started", "generate", "n1"),
            delta("Hal"),
            ev("error", code="node_failed", message="It broke.", node="generate", retryable=True),
        ]
    )
    (run,) = check_stream(out)
    assert [e["type"] for e in run[-4:]] == [
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "CUSTOM",
        "RUN_ERROR",
    ]
    assert run[-2]["value"]["status"] == "error"
    assert run[-1] == {
        "type": "RUN_ERROR",
        "timestamp": 1000,
        "message": "It broke.",
        "code": "node_failed",
        "metadata": {"node": "generate", "retryable": True},
    }


def test_a_cancelled_turn_is_a_cancelled_outcome() -> None:
    out = translate(
        [
            topology(),
            node("started", "generate", "n1"),
            ev(
                "error",
                code="cancelled",
                message="The turn was cancelled.",
                node=None,
                retryable=True,
            ),
        ]
    )
    check_stream(out)
    assert out[-1]["type"] == "RUN_FINISHED"
    assert out[-1]["outcome"] == {"type": "cancelled"}
    assert out[-1]["metadata"] == {"retryable": True}  # node None: left out


def test_a_late_attach_starts_the_run_and_skips_what_it_did_not_see() -> None:
    """A stream from a cursor: no RUN_STARTED, node or message start in the log it reads."""
    out = translate(
        [
            delta("tail "),
            node("completed", "generate", "n1"),
            ev(
                "tool_completed",
                tool="lookup",
                span_id="t1",
                node=None,
                call_id="c1",
                duration_ms=1.0,
                status="ok",
            ),
            answered("head tail "),
        ]
    )
    check_stream(out)
    assert out[0]["type"] == "RUN_STARTED" and out[0]["runId"] == TRACE
    assert not any(e["type"] == "STEP_FINISHED" for e in out)  # it never saw the start
    assert [e["type"] for e in out if e["type"].startswith("TOOL_CALL")] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]


def test_an_outcome_alone_is_a_whole_run() -> None:
    """A turn whose log is gone: just its terminal event, rebuilt from the record."""
    for terminal in (
        answered("Hello."),
        ev(
            "paused",
            interrupts=[{"id": "i", "value": {"type": "approval", "tool": "t", "args": {}}}],
        ),
        ev("error", code="interrupted", message="The server stopped.", node=None, retryable=True),
    ):
        out = translate([terminal], thread_id="thread-1", run_id="r")
        (run,) = check_stream(out)
        assert run[0]["runId"] == "r"


def test_unknown_events_pass_as_custom_and_nothing_is_null() -> None:
    out = translate([topology(), ev("message_saved", message_id=None, note="x"), answered("ok")])
    check_stream(out)
    custom = next(e for e in out if e.get("name") == "message_saved")
    assert custom["value"]["note"] == "x" and "message_id" not in custom["value"]
    assert clean({"a": None, "b": [1, None, {"c": None}]}) == {"b": [1, {}]}


def test_interrupt_without_an_approval() -> None:
    item = interrupt({"id": "x", "value": "What is your order number?"})
    validate_event(
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r",
            "outcome": {"type": "interrupt", "interrupts": [item]},
        }
    )
    assert item == {
        "id": "x",
        "reason": "input",
        "metadata": {"value": "What is your order number?"},
    }


def test_a_pause_without_interrupts_is_an_error() -> None:
    out = translate([topology(), ev("paused", interrupts=[])])
    check_stream(out)
    assert out[-1]["type"] == "RUN_ERROR" and out[-1]["code"] == "invalid_pause"


def test_writer_problems_end_the_run() -> None:
    encoder = AGUIEncoder(thread_id="thread-1", run_id="r")
    assert encoder.preamble() == b""
    assert encoder.heartbeat() == b": hb\n\n"
    raw = encoder.event(topology()) + encoder.event(node("started", "generate", "n1"))
    raw += encoder.problem(
        "reconnect",
        {"reason": "server_shutdown", "last_seq": 2, "message": "Reconnect with Last-Event-ID."},
    )
    out = frames(raw)
    check_stream(out)
    assert out[-1]["type"] == "RUN_ERROR" and out[-1]["code"] == "server_shutdown"
    assert out[-1]["metadata"] == {"last_seq": 2, "reason": "server_shutdown"}
    # between runs (a turn's stream waiting through a pause) it is only a comment
    assert encoder.problem("reconnect", {"last_seq": 2}) == b": reconnect last_seq=2\n\n"


@pytest.mark.parametrize("last", ["node_completed", "text_delta"])
def test_a_replay_that_stops_before_the_outcome_still_ends_its_run(last: str) -> None:
    events = [topology(), node("started", "generate", "n1"), delta("Hal")]
    if last == "node_completed":
        events.append(node("completed", "generate", "n1"))
    numbered = [e.with_seq(i + 1) for i, e in enumerate(events)]

    class Client:
        def __init__(self) -> None:
            self.body = b""

        async def receive(self) -> dict[str, Any]:
            await asyncio.sleep(10)
            return {"type": "http.disconnect"}

        async def send(self, message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                self.body += message["body"]
            else:
                assert (b"content-type", b"text/event-stream; charset=utf-8") in message["headers"]

    client = Client()
    stream = EventStream(StaticReader(numbered), AGUIEncoder(), stop_at=set(), heartbeat_s=5)
    asyncio.run(asyncio.wait_for(stream({}, client.receive, client.send), 5))
    out = frames(client.body)
    check_stream(out)
    assert out[-1]["type"] == "RUN_ERROR" and out[-1]["code"] == "incomplete"


def test_the_saved_answer_comes_inside_its_run() -> None:
    """message_saved follows turn_completed on our streams: in AG-UI it comes before the
    run's RUN_FINISHED (held for it), never after."""
    encoder = AGUIEncoder()
    out = encoder.translate(topology()) + encoder.translate(answered("Hi."))
    assert out[-1]["type"] == "TEXT_MESSAGE_END"  # RUN_FINISHED is held
    out += encoder.translate(ev("message_saved", message_id="saved-1"))
    assert [e["type"] for e in out[-2:]] == ["CUSTOM", "RUN_FINISHED"]
    assert out[-2]["name"] == "message_saved"
    assert out[-2]["value"]["message_id"] == "saved-1"
    assert encoder.finish() == []
    check_stream(out)
    # without a message_saved, the next event or the stream's end releases it
    encoder = AGUIEncoder()
    out = encoder.translate(topology()) + encoder.translate(answered("Hi."))
    assert frames(encoder.epilogue())[-1]["type"] == "RUN_FINISHED"
    # a trailer of a run this stream did not see is left out
    assert AGUIEncoder().translate(ev("message_saved", message_id="x")) == []


def test_every_translation_validates_against_the_python_models() -> None:
    """The models reject what the real client would (bad types, unknown fields are caught
    by check_stream's extra-field check); timestamps are integers."""
    out = translate(
        [
            topology(),
            node("started", "generate", "n1"),
            delta("a"),
            node("completed", "generate", "n1"),
            answered("a"),
        ]
    )
    for event in out:
        model = validate_event(event)
        assert isinstance(event["timestamp"], int)
        assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == event


def test_a_recovered_turn_ends_its_cut_run_and_starts_the_recovered_one() -> None:
    """The cut run (its node open, its message half written) ends with RUN_ERROR
    ``run_recovered``, every step and message it opened closed; the recovered run is a
    run of its own, from turn_recovered to the answer."""
    out = translate(
        [
            topology(),
            node("started", "generate", "n1"),
            delta("Refunds "),
            ev("turn_recovered", trace=TRACE2, attempt=1, reason="owner_lost", resumed_from="c1"),
            topology(trace=TRACE2, kind="recover"),
            node("started", "generate", "n2", trace=TRACE2),
            delta("Refunds take 5 days.", message="msg_2", span="chat2"),
            node("completed", "generate", "n2", trace=TRACE2),
            answered("Refunds take 5 days.", trace=TRACE2),
        ]
    )
    cut, recovered = check_stream(out)
    assert cut[-1]["type"] == "RUN_ERROR" and cut[-1]["code"] == "run_recovered"
    assert "goes on" in cut[-1]["message"]
    assert recovered[0]["type"] == "RUN_STARTED" and recovered[0]["runId"] == TRACE2
    assert recovered[1]["type"] == "CUSTOM" and recovered[1]["name"] == "turn_recovered"
    assert recovered[1]["value"]["attempt"] == 1
    assert recovered[-1]["type"] == "RUN_FINISHED"
