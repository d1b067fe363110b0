"""The default ``answer_of`` on the shapes the served graphs of tests/zoo/test_answer_shapes.py
do not reach: dict-form messages (what a graph's JSON state holds), content blocks, and what
names no answer."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from relay.langgraph.hooks import default_answer


@pytest.mark.parametrize(
    ("output", "answer"),
    [
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
            "a",
        ),
        (
            [{"type": "human", "content": "q"}, {"type": "ai", "content": "from a dict"}],
            "from a dict",
        ),
        (
            {"role": "assistant", "content": [{"type": "text", "text": "block"}, "s"]},
            "blocks",
        ),
        ({"answer": "text wins", "messages": [AIMessage(content="not this")]}, "text wins"),
        (
            {"answer": {"not": "text"}, "messages": [AIMessage(content="the message")]},
            "the message",
        ),
        ([HumanMessage(content="only a question")], ""),
        ({"count": 3}, ""),
        (None, ""),
        (42, ""),
    ],
)
def test_default_answer(output: Any, answer: str) -> None:
    assert default_answer(output) == answer
