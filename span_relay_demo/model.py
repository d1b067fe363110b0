"""The model: an offline, deterministic one by default; any OpenAI-compatible endpoint
(vLLM, Ollama, llama.cpp server, a hosted API) by configuration.

:class:`OfflineSupportModel` is a LangChain chat model that needs no network and no
weights. It is not a language model: it composes its answer from the knowledge-base
passages in the prompt (the first sentences of the best ones, with their ids) and
proposes tool calls by fixed rules. It exists so that the demo, the tests and the
benchmarks run anywhere and always give the same answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

OFFLINE_MODEL_NAME = "offline-support-v1"

_CONTEXT_BLOCK = re.compile(
    r"^\[(?P<id>[a-z0-9-]+)\] (?P<title>[^\n]+)\n(?P<text>.+?)(?=^\[|\Z)", re.MULTILINE | re.DOTALL
)
_REFUND = re.compile(
    r"\brefund\b.*?\border\s*#?\s*(?P<order>[A-Za-z0-9-]+).*?\$\s*(?P<amount>\d+(?:\.\d{1,2})?)",
    re.IGNORECASE | re.DOTALL,
)
_LOCAL_TIME = re.compile(
    r"\b(what time is it|what(?:'s| is) the time|local time|what(?:'s| is) "
    r"(?:the )?date|what day is it)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\S+\s*")


def _words(text: str) -> int:
    return len(text.split())


class OfflineSupportModel(BaseChatModel):
    """Deterministic answers composed from the retrieved passages in the prompt."""

    sentences_per_passage: int = 2
    max_passages: int = 2
    #: pause between streamed words, so a person sees the answer being written
    word_delay_s: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "offline-support"

    @property
    def model_name(self) -> str:
        return OFFLINE_MODEL_NAME

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        tool_names = {t["function"]["name"] for t in kwargs.get("tools") or []}
        if isinstance(messages[-1], ToolMessage):  # a tool's answer: say it
            message = _tool_answer(messages[-1])
        else:
            question = str(messages[-1].content).split("\n\nContext:", 1)[0]
            message = self._tool_call(question, tool_names) or self._answer(prompt)
        input_tokens = _words(prompt)
        output_tokens = _words(str(message.content)) + 8 * len(message.tool_calls)
        message.usage_metadata = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
        message.response_metadata = {"model_name": OFFLINE_MODEL_NAME}
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _chunks(self, message: AIMessage) -> list[AIMessageChunk]:
        """The composed message as the chunks a streaming model would send: one per word
        (with its trailing space), then one that carries the usage."""
        if message.tool_calls:
            parts = [
                AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        {
                            "name": t["name"],
                            "args": json.dumps(t["args"]),
                            "id": t["id"],
                            "index": i,
                        }
                        for i, t in enumerate(message.tool_calls)
                    ],
                )
            ]
        else:
            parts = [AIMessageChunk(content=w) for w in _WORD.findall(str(message.content))]
        parts.append(
            AIMessageChunk(
                content="",
                usage_metadata=message.usage_metadata,
                response_metadata=message.response_metadata,
            )
        )
        return parts

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._generate(messages, stop, None, **kwargs).generations[0].message
        assert isinstance(message, AIMessage)
        for i, chunk in enumerate(self._chunks(message)):
            if i and chunk.content and self.word_delay_s:
                time.sleep(self.word_delay_s)
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        message = self._generate(messages, stop, None, **kwargs).generations[0].message
        assert isinstance(message, AIMessage)
        for i, chunk in enumerate(self._chunks(message)):
            if i and chunk.content and self.word_delay_s:
                await asyncio.sleep(self.word_delay_s)
            yield ChatGenerationChunk(message=chunk)

    def _tool_call(self, question: str, tool_names: set[str]) -> AIMessage | None:
        if "local_time" in tool_names and _LOCAL_TIME.search(question):
            return AIMessage(
                content="",
                tool_calls=[
                    {"name": "local_time", "args": {}, "id": "call_local_time", "type": "tool_call"}
                ],
            )
        match = _REFUND.search(question)
        if match is None or "issue_refund" not in tool_names:
            return None
        args = {"order_id": match["order"], "amount": float(match["amount"])}
        call_id = f"call_refund_{match['order']}"
        return AIMessage(
            content="",
            tool_calls=[{"name": "issue_refund", "args": args, "id": call_id, "type": "tool_call"}],
        )

    def _answer(self, prompt: str) -> AIMessage:
        context = prompt.split("Context:", 1)[1] if "Context:" in prompt else ""
        blocks = list(_CONTEXT_BLOCK.finditer(context))[: self.max_passages]
        if not blocks:
            return AIMessage(
                content=(
                    "I could not find anything about that in our help articles. "
                    "Could you rephrase, or contact support@larkspur.example?"
                )
            )
        parts = []
        for block in blocks:
            sentences = _SENTENCE.split(" ".join(block["text"].split()))
            parts.append(" ".join(sentences[: self.sentences_per_passage]) + f" [{block['id']}]")
        return AIMessage(content=" ".join(parts))


def _tool_answer(message: ToolMessage) -> AIMessage:
    """The answer from a tool's result: the browser's ``local_time`` (``{"local",
    "time_zone"}``), or any tool's text as it is."""
    content = str(message.content)
    if content.startswith("Error:"):
        return AIMessage(content="I could not read your local time from your browser.")
    try:
        value = json.loads(content)
    except ValueError:
        value = content
    if isinstance(value, dict) and value.get("local"):
        zone = f" ({value['time_zone']})" if value.get("time_zone") else ""
        return AIMessage(content=f"It is {value['local']} where you are{zone}.")
    return AIMessage(content=f"It is {value} where you are.")


@dataclass(frozen=True, slots=True)
class ModelChoice:
    model: BaseChatModel
    name: str
    provider: str


def build_model(environ: Mapping[str, str] | None = None) -> ModelChoice:
    """The offline model unless RELAY_MODEL_BASE_URL names an OpenAI-compatible endpoint."""
    env = os.environ if environ is None else environ
    base_url = env.get("RELAY_MODEL_BASE_URL")
    if not base_url:
        delay = float(env.get("RELAY_OFFLINE_WORD_DELAY_S", "0.02"))
        return ModelChoice(OfflineSupportModel(word_delay_s=delay), OFFLINE_MODEL_NAME, "offline")
    from langchain_openai import ChatOpenAI

    name = env.get("RELAY_MODEL") or "gpt-4o-mini"
    model = ChatOpenAI(
        model=name,
        base_url=base_url,
        api_key=env.get("RELAY_MODEL_API_KEY") or env.get("OPENAI_API_KEY") or "not-needed",
        timeout=float(env.get("RELAY_MODEL_TIMEOUT_S", "60")),
        max_retries=0,
        stream_usage=True,
    )
    return ModelChoice(model, name, "openai")
