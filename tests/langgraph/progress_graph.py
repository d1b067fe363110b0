"""A graph written for the ``custom`` event tests (not the demo): nodes and a tool that
report progress through LangGraph's stream writer and LangChain's custom callback events,
a subgraph among them, sync and async code, a payload past the size limit.

``prepare`` (async) writes two fractions; ``fetch`` (async) runs the tool ``fetch_rows``,
which dispatches ``rows`` (``adispatch_custom_event``), then writes a message; ``sub`` is
a compiled subgraph whose node ``inner`` (sync) writes a fraction and dispatches
``inner_done`` (``dispatch_custom_event``); ``answer`` writes a plain string and a report
past 8 KiB, and answers. :data:`WRITTEN` is what the stream writer gets, in order;
:data:`DISPATCHED` the custom callback events, as ``(name, data, node)``.
"""

from __future__ import annotations

import asyncio
import operator
import os
from pathlib import Path
from typing import Annotated, Any

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Send

BLOB = "x" * 20_000
REPORT = {"stage": "report", "progress": 0.9, "blob": BLOB, "rows": [1, 2, 3]}
#: every payload the stream writer gets, in order, with the node that sent it
WRITTEN: list[tuple[str, tuple[str, ...], Any]] = [
    ("prepare", (), {"stage": "prepare", "progress": 0.33}),
    ("prepare", (), {"stage": "prepare", "progress": 0.66}),
    ("fetch", (), {"message": "fetched 3 rows"}),
    ("inner", ("sub",), {"stage": "inner", "progress": 1.0}),
    ("answer", (), "writing the answer"),
    ("answer", (), REPORT),
]
DISPATCHED: list[tuple[str, Any, str]] = [
    ("rows", {"fetched": 3, "query": "sales"}, "fetch"),
    ("inner_done", {"ok": True}, "inner"),
]


class State(MessagesState):
    steps: Annotated[list[str], operator.add]


@tool
async def fetch_rows(query: str) -> str:
    """Fetch the rows a query names."""
    await adispatch_custom_event("rows", {"fetched": 3, "query": query})
    return "3 rows"


async def prepare(state: State) -> dict[str, Any]:
    write = get_stream_writer()
    write({"stage": "prepare", "progress": 0.33})
    write({"stage": "prepare", "progress": 0.66})
    return {"steps": ["prepare"]}


async def fetch(state: State, config: RunnableConfig) -> dict[str, Any]:
    await fetch_rows.ainvoke({"query": "sales"}, config)
    get_stream_writer()({"message": "fetched 3 rows"})
    return {"steps": ["fetch"]}


def inner(state: State) -> dict[str, Any]:
    get_stream_writer()({"stage": "inner", "progress": 1.0})
    dispatch_custom_event("inner_done", {"ok": True})
    return {"steps": ["inner"]}


async def answer(state: State) -> dict[str, Any]:
    write = get_stream_writer()
    write("writing the answer")
    write(REPORT)
    return {"steps": ["answer"], "messages": [AIMessage("Done: 3 rows.")]}


def build() -> Any:
    sub = StateGraph(State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)
    builder = StateGraph(State)
    builder.add_node("prepare", prepare)
    builder.add_node("fetch", fetch)
    builder.add_node("sub", sub.compile())
    builder.add_node("answer", answer)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "fetch")
    builder.add_edge("fetch", "sub")
    builder.add_edge("sub", "answer")
    builder.add_edge("answer", END)
    return builder.compile(name="progress")


# -- a graph whose node waits between its reports (the browser test) ----------------------

#: the folder the gated node waits in: it goes on past report k once ``go-k`` exists there
GATE_ENV = "PROGRESS_GATE_DIR"
GATED = [
    {"stage": "prepare", "progress": 0.25},
    {"stage": "prepare", "progress": 0.75},
    {"message": "checking the rows"},
]


async def _wait_for(path: Path) -> None:
    for _ in range(6000):  # at most a minute: a test that never opens the gate fails
        if await asyncio.to_thread(path.exists):
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{path} never appeared")


async def gated(state: State) -> dict[str, Any]:
    write = get_stream_writer()
    gate = Path(os.environ[GATE_ENV])
    for k, payload in enumerate(GATED, 1):
        write(payload)
        await _wait_for(gate / f"go-{k}")
    return {"steps": ["gated"], "messages": [AIMessage("All rows checked.")]}


def build_gated(checkpointer: Any = None) -> Any:
    """``gated`` alone: it reports each of :data:`GATED`, then waits for its gate file."""
    builder = StateGraph(State)
    builder.add_node("gated", gated)
    builder.add_edge(START, "gated")
    builder.add_edge("gated", END)
    return builder.compile(name="gated", checkpointer=checkpointer)


# -- a fan-out: three instances of one node, side by side --------------------------------

ITEMS = [0, 1, 2]


async def work(task: dict[str, Any]) -> dict[str, Any]:
    get_stream_writer()({"item": task["item"], "progress": 1.0})
    return {"steps": [f"work {task['item']}"]}


def fan_out(state: State) -> list[Send]:
    return [Send("work", {"item": i}) for i in ITEMS]


def build_fanout() -> Any:
    """``work`` three times at once (``Send``), each reporting its item."""
    builder = StateGraph(State)
    builder.add_node("work", work)
    builder.add_conditional_edges(START, fan_out, ["work"])
    builder.add_edge("work", END)
    return builder.compile(name="fanout")


# -- a node that reports more often than a span keeps events ----------------------------

CHATTY = 150


async def chatty(state: State) -> dict[str, Any]:
    write = get_stream_writer()
    for k in range(CHATTY):
        write({"step": k, "progress": (k + 1) / CHATTY})
    return {"steps": ["chatty"], "messages": [AIMessage("Counted.")]}


def build_chatty() -> Any:
    builder = StateGraph(State)
    builder.add_node("chatty", chatty)
    builder.add_edge(START, "chatty")
    builder.add_edge("chatty", END)
    return builder.compile(name="chatty")
