"""The zoo under LangGraph alone: every case runs, pauses exactly when it should, resumes
to a final AI answer, streams its tokens, and reports the nodes and updates pinned here
(the sequences relay tests compare a relay's events against)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from tests.zoo.graphs import CASES, Case
from tests.zoo.reference import Namespace, drive, topology

NODES: dict[str, list[str]] = {
    "react": ["__start__", "agent", "tools", "__end__"],
    "supervisor": ["__start__", "supervisor", "researcher", "writer", "__end__"],
    "swarm": ["__start__", "alice", "bob"],
    "deep": [
        "__start__",
        "model",
        "tools",
        "_ParentNotifierMiddleware.after_agent",
        "PatchToolCallsMiddleware.before_agent",
        "HumanInTheLoopMiddleware.after_model",
        "__end__",
    ],
    "custom": [
        "__start__",
        "classify",
        "research",
        "search_web",
        "search_docs",
        "split",
        "summarize_item",
        "review",
        "approval",
        "respond",
        "__end__",
    ],
}

TOP: Namespace = ()
UPDATES: dict[str, tuple[list[tuple[Namespace, str]], list[tuple[Namespace, str]]]] = {
    # (first pass, resume): a handoff tool's node never reports an update (its
    # Command(graph=PARENT) bubbles up), so supervisor and swarm show no "tools"
    "react": ([(TOP, "agent"), (TOP, "tools"), (TOP, "agent")], []),
    "supervisor": (
        [
            (("supervisor",), "agent"),
            (TOP, "supervisor"),
            (("researcher",), "agent"),
            (TOP, "researcher"),
            (("supervisor",), "agent"),
            (TOP, "supervisor"),
        ],
        [],
    ),
    "swarm": ([(("alice",), "model"), (TOP, "alice"), (("bob",), "model"), (TOP, "bob")], []),
    "deep": (
        [(TOP, "PatchToolCallsMiddleware.before_agent"), (TOP, "model")],
        [
            (TOP, "HumanInTheLoopMiddleware.after_model"),
            (TOP, "tools"),
            (TOP, "model"),
            (TOP, "HumanInTheLoopMiddleware.after_model"),
            (TOP, "_ParentNotifierMiddleware.after_agent"),
        ],
    ),
    "custom": (
        [
            (TOP, "classify"),
            (TOP, "research"),
            (TOP, "search_docs"),
            (TOP, "search_web"),
            (TOP, "split"),
            (TOP, "summarize_item"),
            (TOP, "summarize_item"),
            (TOP, "summarize_item"),
            (("review",), "check"),
            (("review",), "score"),
            (TOP, "review"),
        ],
        [(TOP, "approval"), (TOP, "respond")],
    ),
}

INTERRUPTS: dict[str, Any] = {
    "deep": {
        "action_requests": [
            {
                "name": "send_email",
                "args": {"to": "ada@example.com", "body": "The report is ready."},
                "description": "Tool execution requires approval\n\nTool: send_email\n"
                "Args: {'to': 'ada@example.com', 'body': 'The report is ready.'}",
            }
        ],
        "review_configs": [
            {
                "action_name": "send_email",
                "allowed_decisions": ["approve", "edit", "reject", "respond"],
            }
        ],
    },
    "custom": {"type": "approval", "question": "Publish? 3 summaries checked"},
}


class Tokens(BaseCallbackHandler):
    """Collects what ``on_llm_new_token`` sees."""

    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str | list[str | dict[str, Any]], **kwargs: Any) -> None:
        self.tokens.append(token if isinstance(token, str) else "")


def test_every_case_is_pinned() -> None:
    names = [case.name for case in CASES]
    assert names == list(NODES) == list(UPDATES)
    assert sorted(c.name for c in CASES if c.expect_interrupt) == sorted(INTERRUPTS)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_case_under_langgraph_alone(case: Case) -> None:
    graph = case.build(InMemorySaver())
    tokens = Tokens()
    config: RunnableConfig = {
        "configurable": {"thread_id": f"zoo-{case.name}"},
        "callbacks": [tokens],
    }

    turn = await drive(graph, case, config)

    assert turn.first.interrupted is case.expect_interrupt
    if case.expect_interrupt:
        assert turn.first.interrupts == [((), INTERRUPTS[case.name])]
        assert turn.resumed is not None and not turn.resumed.interrupted
    else:
        assert turn.resumed is None
    assert not turn.state.next and not turn.state.interrupts
    last = turn.state.values["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert isinstance(last.content, str) and last.content.strip()
    assert last.content in "".join(tokens.tokens)
    assert len([t for t in tokens.tokens if t.strip()]) >= 3

    first, resumed = UPDATES[case.name]
    assert turn.first.nodes == first
    assert (turn.resumed.nodes if turn.resumed else []) == resumed

    shape = topology(graph)
    ids = [n["id"] for n in shape["nodes"]]
    assert ids == NODES[case.name]
    assert {node for ns, node in turn.nodes if ns == ()} <= set(ids)
    assert all(e["source"] in ids and e["target"] in ids for e in shape["edges"])
