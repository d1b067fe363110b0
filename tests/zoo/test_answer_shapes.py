"""The default answer for every shape a graph's output takes, held against what LangGraph's
own ``ainvoke`` returns for the same input (graphs written for this test, served by
``GraphAgent`` on a real uvicorn): a functional-API ``@entrypoint`` that returns a string,
a message, a list of messages, a pydantic model or a dataclass; a ``StateGraph`` with an
``answer``. And over AG-UI, a conversation that ends with the turn's answer when a node
other than the model wrote it after the model streamed its text.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from relay import GraphAgent, Relay
from tests.conftest import LiveServer, events_of, stream_get, stream_post
from tests.delivery.agui_checks import check_stream, post_agui, read_agui
from tests.zoo.models import scripted, text


class Verdict(BaseModel):
    label: str
    score: float


@dataclasses.dataclass
class Forecast:
    city: str
    days: list[str]


def entry_text(checkpointer: Any = None) -> Any:
    @entrypoint(checkpointer=checkpointer)
    async def shout(inputs: dict[str, Any]) -> str:
        return f"{inputs['q'].upper()}!"

    return shout


def entry_message(checkpointer: Any = None) -> Any:
    @entrypoint(checkpointer=checkpointer)
    async def reply(inputs: dict[str, Any]) -> AIMessage:
        return AIMessage(content=[{"type": "text", "text": f"About {inputs['q']}: "}, "yes."])

    return reply


def entry_messages(checkpointer: Any = None) -> Any:
    @entrypoint(checkpointer=checkpointer)
    async def history(inputs: dict[str, Any]) -> list[Any]:
        return [
            HumanMessage(content=inputs["q"]),
            AIMessage(content="The last word of the model."),
            ToolMessage(content="a tool's output, not an answer", tool_call_id="c1"),
        ]

    return history


def entry_model(checkpointer: Any = None) -> Any:
    @entrypoint(checkpointer=checkpointer)
    async def classify(inputs: dict[str, Any]) -> Verdict:
        return Verdict(label=f"spam:{inputs['q']}", score=0.25)

    return classify


def entry_dataclass(checkpointer: Any = None) -> Any:
    @entrypoint(checkpointer=checkpointer)
    async def forecast(inputs: dict[str, Any]) -> Forecast:
        return Forecast(city=inputs["q"], days=["sun", "rain"])

    return forecast


def entry_asks(checkpointer: Any = None) -> Any:
    """An entrypoint that asks a person first, then answers in a string."""

    @entrypoint(checkpointer=checkpointer)
    async def confirm(inputs: dict[str, Any]) -> str:
        said = interrupt({"type": "confirm", "question": f"Look up {inputs['q']}?"})
        return f"You said {said}: looking up {inputs['q']}."

    return confirm


class Asked(TypedDict, total=False):
    q: str
    answer: str


def state_answer(checkpointer: Any = None) -> Any:
    def answer(state: Asked) -> dict[str, Any]:
        return {"answer": f"Answered {state['q']}."}

    graph = StateGraph(Asked)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=checkpointer)


#: name -> (builder, the answer LangGraph's own output gives, read the obvious way)
SHAPES: dict[str, tuple[Callable[..., Any], Callable[[Any], str]]] = {
    "text": (entry_text, lambda out: out),
    "message": (entry_message, lambda out: "About cats: yes."),
    "messages": (entry_messages, lambda out: out[1].content),
    "model": (entry_model, lambda out: out.model_dump_json()),
    "dataclass": (
        entry_dataclass,
        lambda out: json.dumps(dataclasses.asdict(out), separators=(",", ":")),
    ),
    "state": (state_answer, lambda out: out["answer"]),
}


def review_graph(checkpointer: Any = None) -> Any:
    """A model streams a draft; a node that is no model writes the final answer after it."""
    model = scripted(text("Draft: let me think about cats."), name="drafter")

    async def draft(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def finalize(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="Final: cats sleep 16 hours a day.")]}

    graph = StateGraph(MessagesState)
    graph.add_node("draft", draft)
    graph.add_node("finalize", finalize)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "finalize")
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer, name="review")


def streamed_graph(checkpointer: Any = None) -> Any:
    """The model's streamed text is the answer: no second message for it."""
    model = scripted(text("Cats sleep a lot."), name="speaker")

    async def speak(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("speak", speak)
    graph.add_edge(START, "speak")
    graph.add_edge("speak", END)
    return graph.compile(checkpointer=checkpointer, name="streamed")


@pytest.fixture
def served(app_env: dict[str, str]) -> Iterator[LiveServer]:
    relay = Relay.from_env(app_env)
    app = FastAPI(lifespan=relay.lifespan)
    agents = [GraphAgent(build(), name=name) for name, (build, _) in SHAPES.items()]
    agents += [GraphAgent(entry_asks(), name="asks")]
    agents += [GraphAgent(review_graph(), name="review")]
    agents += [GraphAgent(streamed_graph(), name="streamed")]
    relay.mount(app, *agents)
    server = LiveServer(app).start()
    yield server
    server.stop()


def _reference(build: Callable[..., Any], graph_input: dict[str, Any]) -> Any:
    graph = build(InMemorySaver())
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    return asyncio.run(graph.ainvoke(graph_input, config))


def _ended(client: httpx.Client, url: str, turn_id: str) -> None:
    deadline = time.monotonic() + 10
    while client.get(f"{url}/turns/{turn_id}").json()["status"] == "running":
        assert time.monotonic() < deadline, "the turn never recorded its end"
        time.sleep(0.02)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_answer_of_every_output_shape(served: LiveServer, shape: str) -> None:
    build, read = SHAPES[shape]
    graph_input = {"q": "cats"}
    want = read(_reference(build, graph_input))
    assert want, "LangGraph's own output names an answer"
    with httpx.Client(timeout=30) as client:
        url = f"{served.url}/graphs/{shape}/chat"
        answered = client.post(url, json={"input": graph_input})
        assert answered.status_code == 200, answered.text
        assert answered.json()["status"] == "answered"
        assert answered.json()["answer"] == want

        events = events_of(stream_post(client, url, {"input": graph_input}))
        end = events[-1]
        assert end["type"] == "turn_completed", end
        assert end["response"]["answer"] == want
        _ended(client, served.url, end["turn_id"])
        turn = f"{served.url}/turns/{end['turn_id']}/events"
        live = events_of(stream_get(client, turn))
        assert events_of(stream_get(client, turn, {"source": "spans"})) == live


def _texts(events: list[dict[str, Any]]) -> list[str]:
    """The text messages of an AG-UI stream, in the order they started."""
    order = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    return [
        "".join(
            e["delta"]
            for e in events
            if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] == message
        )
        for message in order
    ]


def _agui_body(message: str) -> dict[str, Any]:
    return {
        "threadId": uuid.uuid4().hex,
        "runId": "run-1",
        "messages": [{"id": "m1", "role": "user", "content": message}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def test_agui_ends_with_the_answer_a_later_node_wrote(served: LiveServer) -> None:
    truth = asyncio.run(
        review_graph(InMemorySaver()).ainvoke(
            {"messages": [{"role": "user", "content": "Tell me about cats."}]},
            {"configurable": {"thread_id": "reference"}},
        )
    )
    final = truth["messages"][-1].content
    with httpx.Client(timeout=30) as client:
        events = post_agui(client, f"{served.url}/graphs/review", _agui_body("Tell me about cats."))
        check_stream(events)
        assert events[-1]["type"] == "RUN_FINISHED"
        assert events[-1]["result"]["answer"] == final
        # the model's draft streamed first; the conversation ends with the answer
        assert _texts(events) == ["Draft: let me think about cats.", final]
        ends = [i for i, e in enumerate(events) if e["type"] == "TEXT_MESSAGE_END"]
        assert ends[-1] < len(events) - 1

        # the turn's stream in AG-UI, live and replayed from the spans, says the same
        turn = events[-1]["result"]["turn_id"]
        _ended(client, served.url, turn)
        for params in ({"format": "agui"}, {"format": "agui", "source": "spans"}):
            with client.stream("GET", f"{served.url}/turns/{turn}/events", params=params) as r:
                again = read_agui(r)
            assert _texts(again) == ["Draft: let me think about cats.", final]


def test_agui_sends_a_streamed_answer_once(served: LiveServer) -> None:
    with httpx.Client(timeout=30) as client:
        events = post_agui(client, f"{served.url}/graphs/streamed", _agui_body("Cats?"))
        check_stream(events)
        assert events[-1]["result"]["answer"] == "Cats sleep a lot."
        assert _texts(events) == ["Cats sleep a lot."]


def test_an_entrypoint_that_pauses_answers_its_string_on_resume(served: LiveServer) -> None:
    graph = entry_asks(InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    paused = asyncio.run(graph.ainvoke({"q": "cats"}, config))
    want = asyncio.run(graph.ainvoke(Command(resume="yes"), config))
    with httpx.Client(timeout=30) as client:
        first = events_of(
            stream_post(client, f"{served.url}/graphs/asks/chat", {"input": {"q": "cats"}})
        )
        assert first[-1]["type"] == "paused", first[-1]
        [asked] = first[-1]["interrupts"]
        assert asked["value"] == paused["__interrupt__"][0].value
        body = {
            "thread_id": first[-1]["thread_id"],
            "turn_id": first[-1]["turn_id"],
            "resume": "yes",
        }
        resumed = events_of(stream_post(client, f"{served.url}/graphs/asks/chat/resume", body))
        assert resumed[-1]["type"] == "turn_completed", resumed[-1]
        assert resumed[-1]["response"]["answer"] == want == "You said yes: looking up cats."
