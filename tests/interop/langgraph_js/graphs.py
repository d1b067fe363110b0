"""The graphs LangGraph's clients are tested on, in plain LangGraph (nothing of span-relay):
span-relay serves them (tests/agent_server_graphs.py) and so does the LangGraph Agent
Server (`langgraph dev`, from this folder's langgraph.json), so that the same client
scripts run against both. A chat on ``MessagesState`` whose fake model streams tokens and
whose first node writes a ``custom`` payload, a graph that asks with ``interrupt()``, one
whose node fails, and one whose second node waits for a file (the client makes it), so a
client can cut its stream while the run runs."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

ANSWER = "Hello there, friend of LangGraph"


class ChatState(MessagesState):
    notes: str


async def prepare(state: ChatState) -> dict[str, Any]:
    get_stream_writer()({"stage": "prepare"})
    return {"notes": "ready"}


async def agent(state: ChatState) -> dict[str, Any]:
    model = GenericFakeChatModel(messages=iter([AIMessage(content=ANSWER)]))
    text = ""
    async for chunk in model.astream(state["messages"]):
        text += str(chunk.content)
    return {"messages": [AIMessage(content=text)]}


def chat_graph() -> Any:
    builder = StateGraph(ChatState)
    builder.add_node("prepare", prepare)
    builder.add_node("agent", agent)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "agent")
    builder.add_edge("agent", END)
    return builder.compile()


class Approval(TypedDict, total=False):
    question: str
    answer: str


def ask(state: Approval) -> dict[str, Any]:
    return {"answer": interrupt({"question": state["question"]})}


def approval_graph() -> Any:
    builder = StateGraph(Approval)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile()


def broken_graph() -> Any:
    def fail(state: Approval) -> dict[str, Any]:
        raise ValueError("the tank is empty")

    builder = StateGraph(Approval)
    builder.add_node("fail", fail)
    builder.add_edge(START, "fail")
    builder.add_edge("fail", END)
    return builder.compile()


class Gated(TypedDict, total=False):
    gate: str
    parts: list[int]


async def before_gate(state: Gated) -> dict[str, Any]:
    write = get_stream_writer()
    for n in range(3):
        write({"part": n})
    return {"parts": [0, 1, 2]}


def wait_for(gate: Path) -> None:
    """Return once ``gate`` exists (in a worker thread: LangGraph's server refuses a
    blocking call on its event loop)."""
    while not gate.exists():
        time.sleep(0.02)


async def after_gate(state: Gated) -> dict[str, Any]:
    # the client writes the file once it has cut its stream
    await asyncio.to_thread(wait_for, Path(state["gate"]))
    write = get_stream_writer()
    for n in range(3, 6):
        write({"part": n})
    return {"parts": [*state.get("parts", []), 3, 4, 5]}


def gated_graph() -> Any:
    builder = StateGraph(Gated)
    builder.add_node("before_gate", before_gate)
    builder.add_node("after_gate", after_gate)
    builder.add_edge(START, "before_gate")
    builder.add_edge("before_gate", "after_gate")
    builder.add_edge("after_gate", END)
    return builder.compile()


#: what `langgraph dev` serves (langgraph.json): compiled without a checkpointer, as the
#: Agent Server wants them (it brings its own)
chat = chat_graph()
approval = approval_graph()
broken = broken_graph()
gated = gated_graph()
