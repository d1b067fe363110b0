"""Scripted fake chat models for the zoo: deterministic, tool-capable and streaming.

:class:`ScriptedChatModel` answers each call with the next turn of its script (text, or
tool calls with fixed ids) and always streams, even under ``invoke``: text goes out as
several chunks split on whitespace (as ``GenericFakeChatModel`` does), so a callback
handler's ``on_llm_new_token`` sees the tokens, and tool calls go out as
``tool_call_chunks`` (which ``GenericFakeChatModel`` would drop). ``bind_tools`` returns
the model itself. A script is consumed as the model runs: build a new model per run with
:func:`scripted` (the graph builders of :mod:`tests.zoo.graphs` do).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCall
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult


class ScriptExhaustedError(AssertionError):
    """The graph called a scripted model more often than its script allows."""


def text(content: str) -> AIMessage:
    """A script turn that answers in text."""
    return AIMessage(content=content)


def call(name: str, args: dict[str, Any], call_id: str, content: str = "") -> AIMessage:
    """A script turn that calls one tool, with a fixed tool-call id."""
    return AIMessage(
        content=content, tool_calls=[ToolCall(name=name, args=args, id=call_id, type="tool_call")]
    )


class ScriptedChatModel(GenericFakeChatModel):
    """A fake chat model that plays its script, one AIMessage per call, always streaming."""

    model_name: str = "zoo-fake"
    """Reported as the model's name (``ls_model_name``, spans' model attributes)."""
    streaming: bool = True
    """Set explicitly by :func:`scripted` so ``invoke`` takes the streaming path too."""
    calls: int = 0
    """How many turns of the script have been played."""

    @property
    def _llm_type(self) -> str:
        return "zoo-scripted-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """The script already knows which tools it calls: binding changes nothing."""
        return self

    def _next_turn(self) -> AIMessage:
        turn = next(self.messages, None)
        if turn is None:
            raise ScriptExhaustedError(
                f"{self.model_name}: called {self.calls + 1} times, script has {self.calls}"
            )
        self.calls += 1
        message = AIMessage(content=turn) if isinstance(turn, str) else turn
        # a copy: middleware edits the AIMessage in the state (HITL rewrites tool_calls)
        return message.model_copy(deep=True)

    def _chunks(self) -> Iterator[ChatGenerationChunk]:
        message = self._next_turn()
        if not isinstance(message.content, str):
            raise TypeError(f"{self.model_name}: a script turn's content must be a str")
        tokens = [t for t in re.split(r"(\s)", message.content) if t]
        chunks = [AIMessageChunk(content=token, id=message.id) for token in tokens]
        if message.tool_calls:
            chunks.append(
                AIMessageChunk(
                    content="",
                    id=message.id,
                    tool_call_chunks=[
                        tool_call_chunk(
                            name=tc["name"], args=json.dumps(tc["args"]), id=tc["id"], index=i
                        )
                        for i, tc in enumerate(message.tool_calls)
                    ],
                )
            )
        if not chunks:
            chunks.append(AIMessageChunk(content="", id=message.id))
        chunks[-1].chunk_position = "last"
        chunks[-1].response_metadata = {
            "model_name": self.model_name,
            "finish_reason": ("tool_calls" if message.tool_calls else "stop"),
        }
        for chunk in chunks:
            yield ChatGenerationChunk(message=chunk)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Without streaming (``disable_streaming``): the turn whole, no tokens."""
        message = self._next_turn()
        message.response_metadata = {"model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._chunks():
            if run_manager:
                run_manager.on_llm_new_token(_token(chunk), chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks():
            if run_manager:
                await run_manager.on_llm_new_token(_token(chunk), chunk=chunk)
            yield chunk


def _token(chunk: ChatGenerationChunk) -> str:
    content = chunk.message.content
    return content if isinstance(content, str) else ""


def scripted(*turns: AIMessage | str, name: str = "zoo-fake") -> ScriptedChatModel:
    """A new model that plays ``turns`` in order, one per call (a str is a text turn)."""
    return ScriptedChatModel(messages=iter(turns), streaming=True, model_name=name)


ModelFactory = Callable[[], ScriptedChatModel]
"""Makes a fresh scripted model: a script is consumed, so each run needs its own."""
