"""The zoo's graphs, one builder each, and :data:`CASES`: one turn to drive on each.

Every ``build_<name>(checkpointer=None)`` returns a compiled graph whose models are
fresh :func:`tests.zoo.models.scripted` models, so each build runs the same way once.

- ``react``: ``create_react_agent`` with one tool; the model calls it, then answers.
- ``supervisor``: ``create_supervisor`` over two react agents; it hands off to the
  researcher, who answers, and answers itself when control comes back.
- ``swarm``: ``create_swarm`` over two ``create_agent`` agents; alice hands off to bob.
- ``deep``: ``create_deep_agent`` whose one tool needs approval (LangChain's
  ``HumanInTheLoopMiddleware``): the run pauses on the call and resumes approved.
- ``custom``: a hand-written ``StateGraph`` with a conditional edge, a parallel fan-out
  and join, a ``Send`` map over 3 items, a compiled subgraph as a node and an
  ``interrupt()``. Its parallel nodes (search_web, search_docs, summarize_item) are
  ``async def``, so their updates come in one order every run: drive it with the async
  API (``ainvoke``/``astream``), as the relay does; the rest run either way.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import create_react_agent
from langgraph.types import Send, interrupt
from langgraph.warnings import LangGraphDeprecatedSinceV10
from langgraph_supervisor import create_supervisor
from langgraph_swarm import create_handoff_tool, create_swarm

from tests.zoo.models import call, scripted, text

Graph = CompiledStateGraph[Any, Any, Any, Any]
Builder = Callable[..., Graph]


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"It is sunny in {city}."


@tool
def send_email(to: str, body: str) -> str:
    """Send an email (deep's human-in-the-loop tool: it needs approval)."""
    return f"Sent to {to}."


@contextmanager
def _prebuilt_deprecation_ignored() -> Iterator[None]:
    """``create_react_agent`` is deprecated in LangGraph 1.x (for ``langchain.agents.
    create_agent``) but still works, and langgraph-supervisor builds on it: keep it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        yield


def _react_agent(*args: Any, **kwargs: Any) -> Graph:
    with _prebuilt_deprecation_ignored():
        return create_react_agent(*args, **kwargs)


def build_react(checkpointer: BaseCheckpointSaver | None = None) -> Graph:
    model = scripted(
        call("get_weather", {"city": "Paris"}, "call_react_1"),
        text("It is sunny in Paris today."),
        name="react-model",
    )
    return _react_agent(model, [get_weather], checkpointer=checkpointer, name="react")


def build_supervisor(checkpointer: BaseCheckpointSaver | None = None) -> Graph:
    researcher = _react_agent(
        scripted(text("LangGraph was first released in January 2024."), name="researcher-model"),
        [],
        name="researcher",
        prompt="You research facts.",
    )
    writer = _react_agent(
        scripted(name="writer-model"), [], name="writer", prompt="You write prose."
    )
    supervisor = scripted(
        call("transfer_to_researcher", {}, "call_sup_1"),
        text("The researcher says LangGraph was first released in 2024."),
        name="supervisor-model",
    )
    with _prebuilt_deprecation_ignored():
        builder = create_supervisor(
            [researcher, writer],
            model=supervisor,
            prompt="You route questions to researcher or writer.",
        )
    return builder.compile(checkpointer=checkpointer, name="supervisor_graph")


def build_swarm(checkpointer: BaseCheckpointSaver | None = None) -> Graph:
    alice = create_agent(
        scripted(call("transfer_to_bob", {}, "call_swarm_1"), name="alice-model"),
        tools=[create_handoff_tool(agent_name="bob", description="Transfer to Bob")],
        system_prompt="You are Alice.",
        name="alice",
    )
    bob = create_agent(
        scripted(text("Ahoy, Bob here: the answer is 12."), name="bob-model"),
        tools=[create_handoff_tool(agent_name="alice", description="Transfer to Alice")],
        system_prompt="You are Bob.",
        name="bob",
    )
    builder = create_swarm([alice, bob], default_active_agent="alice")
    return builder.compile(checkpointer=checkpointer, name="swarm")


def build_deep(checkpointer: BaseCheckpointSaver | None = None) -> Graph:
    model = scripted(
        call(
            "send_email", {"to": "ada@example.com", "body": "The report is ready."}, "call_deep_1"
        ),
        text("I emailed Ada that the report is ready."),
        name="deep-model",
    )
    return create_deep_agent(
        model=model,
        tools=[send_email],
        system_prompt="You send email.",
        interrupt_on={"send_email": True},
        checkpointer=checkpointer,
        name="deep",
    )


# --- custom: a hand-written StateGraph -------------------------------------------------


class CustomState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    route: str
    sources: Annotated[list[str], operator.add]
    items: list[str]
    summaries: Annotated[list[str], operator.add]
    verdict: str
    approved: bool


class ItemState(TypedDict):
    item: str


class ReviewState(TypedDict, total=False):
    summaries: list[str]
    checked: int
    verdict: str


class ReviewOutput(TypedDict):
    verdict: str


def classify(state: CustomState) -> CustomState:
    """Plain ``def node(state)``; its route feeds the conditional edge."""
    question = str(state["messages"][-1].content)
    return {"route": "research" if question.endswith("?") else "respond"}


def route_after_classify(state: CustomState) -> str:
    return state["route"]


def research(state: CustomState) -> CustomState:
    """The fan-out point: search_web and search_docs both follow it."""
    return {"sources": []}


async def search_web(state: CustomState) -> CustomState:
    return {"sources": ["web"]}


async def search_docs(state: CustomState) -> CustomState:
    return {"sources": ["docs"]}


def split(state: CustomState) -> CustomState:
    return {"items": ["alpha", "beta", "gamma"]}


def fan_items(state: CustomState) -> list[Send]:
    return [Send("summarize_item", {"item": item}) for item in state["items"]]


async def summarize_item(state: ItemState) -> CustomState:
    """Runs once per ``Send``, with the item as its whole input."""
    return {"summaries": [f"{state['item']}: ok"]}


def check(state: ReviewState) -> ReviewState:
    return {"checked": len(state.get("summaries", []))}


def score(state: ReviewState) -> ReviewState:
    return {"verdict": f"{state['checked']} summaries checked"}


def build_review() -> Graph:
    """The subgraph: check -> score; only its verdict goes back to the parent."""
    builder = StateGraph(ReviewState, output_schema=ReviewOutput)
    builder.add_node("check", check)
    builder.add_node("score", score)
    builder.add_edge(START, "check")
    builder.add_edge("check", "score")
    builder.add_edge("score", END)
    return builder.compile(name="review")


def approval(state: CustomState) -> CustomState:
    answer = interrupt({"type": "approval", "question": f"Publish? {state['verdict']}"})
    return {"approved": bool(answer.get("approved"))}


def build_custom(checkpointer: BaseCheckpointSaver | None = None) -> Graph:
    model = scripted(text("Approved: alpha, beta and gamma are all ok."), name="custom-model")

    def respond(state: CustomState, config: RunnableConfig) -> CustomState:
        """``def node(state, config)``: calls the model with the run's callbacks."""
        status = "approved" if state.get("approved") else "not approved"
        prompt = [
            *state["messages"],
            HumanMessage(f"Summaries: {state.get('summaries')}, {status}."),
        ]
        return {"messages": [model.invoke(prompt, config)]}

    builder = StateGraph(CustomState)
    builder.add_node("classify", classify)
    builder.add_node("research", research)
    builder.add_node("search_web", search_web)
    builder.add_node("search_docs", search_docs)
    builder.add_node("split", split)
    builder.add_node("summarize_item", summarize_item)
    builder.add_node("review", build_review())
    builder.add_node("approval", approval)
    builder.add_node("respond", respond)
    builder.add_edge(START, "classify")
    builder.add_conditional_edges(
        "classify", route_after_classify, {"research": "research", "respond": "respond"}
    )
    builder.add_edge("research", "search_web")
    builder.add_edge("research", "search_docs")
    builder.add_edge(["search_web", "search_docs"], "split")
    builder.add_conditional_edges("split", fan_items, ["summarize_item"])
    builder.add_edge("summarize_item", "review")
    builder.add_edge("review", "approval")
    builder.add_edge("approval", "respond")
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=checkpointer, name="custom")


# --- the cases ------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One turn to drive: the user's message, whether it pauses, and how to resume it."""

    name: str
    build: Builder
    message: str
    resume: Any = None
    expect_interrupt: bool = False
    graph_input: dict[str, Any] | None = None

    def input(self) -> dict[str, Any]:
        """What the turn sends: ``graph_input``, or the message on MessagesState."""
        if self.graph_input is not None:
            return self.graph_input
        return {"messages": [{"role": "user", "content": self.message}]}


CASES: list[Case] = [
    Case("react", build_react, "What is the weather in Paris?"),
    Case("supervisor", build_supervisor, "When was LangGraph first released?"),
    Case("swarm", build_swarm, "I'd like to speak to Bob: what is 5 + 7?"),
    Case(
        "deep",
        build_deep,
        "Email Ada that the report is ready.",
        resume={"decisions": [{"type": "approve"}]},
        expect_interrupt=True,
    ),
    Case(
        "custom",
        build_custom,
        "Summarize alpha, beta and gamma?",
        resume={"approved": True},
        expect_interrupt=True,
    ),
]
