"""The graphs both servers serve (``langgraph.json`` names them).

- ``trivial``: four trivial async nodes in a line (the last one writes the answer);
- ``tokens``: five nodes in a line, whose ``model`` node calls a fake chat model that
  streams a 70-word answer word by word (LangGraph's ``messages`` stream mode and
  span-relay's ``text_delta`` both see each word); ``token_delay_s`` in the input slows
  the words down (the reconnect figure cuts a run in the middle);
- ``hold``: one node that waits ``hold_s`` seconds (at most 300): a run that is running
  but silent, for the idle-stream figure.

Both servers import this file under their own Python with their own LangGraph (the same
pinned versions: requirements-peer.txt); nothing here depends on either server.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langgraph.graph import END, START, MessagesState, StateGraph

WORDS = 70
ANSWER = " ".join(f"word{i}" for i in range(1, WORDS + 1))


class TokenState(MessagesState, total=False):
    token_delay_s: float
    hold_s: float


class WordModel(GenericFakeChatModel):
    """GenericFakeChatModel, streamed natively async one word (with its space) a chunk,
    and ``delay_s`` between words; its sync ``_stream`` would hop to a thread per chunk."""

    delay_s: float = 0.0

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        message = next(self.messages)
        text = message.content if isinstance(message, AIMessage) else str(message)
        assert isinstance(text, str)
        words = text.split(" ")
        for i, word in enumerate(words):
            if self.delay_s and i:
                await asyncio.sleep(self.delay_s)
            token = word if i == len(words) - 1 else word + " "
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager:
                await run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk


async def _noop(state: TokenState) -> dict[str, Any]:
    return {}


async def _answer(state: TokenState) -> dict[str, Any]:
    return {"messages": [AIMessage(content="done")]}


async def _model(state: TokenState) -> dict[str, Any]:
    delay = min(float(state.get("token_delay_s") or 0.0), 1.0)
    model = WordModel(messages=iter([AIMessage(content=ANSWER)]), delay_s=delay)
    reply = await model.ainvoke(state["messages"])
    return {"messages": [reply]}


async def _hold(state: TokenState) -> dict[str, Any]:
    await asyncio.sleep(min(float(state.get("hold_s") or 0.0), 300.0))
    return {"messages": [AIMessage(content="held")]}


def _line(name: str, nodes: list[tuple[str, Any]]) -> Any:
    builder = StateGraph(TokenState)
    for node, fn in nodes:
        builder.add_node(node, fn)
    names = [START, *(n for n, _ in nodes), END]
    for a, b in itertools.pairwise(names):
        builder.add_edge(a, b)
    return builder.compile(name=name)


trivial = _line("trivial", [("a", _noop), ("b", _noop), ("c", _noop), ("d", _answer)])
tokens = _line(
    "tokens",
    [
        ("prepare", _noop),
        ("retrieve", _noop),
        ("model", _model),
        ("check", _noop),
        ("finish", _noop),
    ],
)
hold = _line("hold", [("hold", _hold)])
