"""Client-executed tools: a tool the server does not run (issue 19, item 4).

A graph declares one with :func:`client_tool` (a LangChain tool that a prebuilt agent's
``ToolNode`` or a node of its own binds and calls like any other), or takes the tools an
AG-UI client sent in ``RunAgentInput.tools`` with :func:`client_tools_of`. Called, such a
tool runs nothing here: it pauses the run with LangGraph's ``interrupt`` and a value

    {"type": "client_tool", "name", "arguments", "call_id", "token", "round"}

(``call_id``: the model's tool-call id; ``token``: 128 random bits, single use; ``round``:
the how-manieth client-tool pause of the turn). The client runs the tool and resumes the
turn with ``{"result": ..., "token": ...}`` (or ``{"error": "...", "token": ...}``); the
relay checks the token against the *pending* interrupt in the thread's checkpoint (shared
by every replica), strips it, and the tool returns the result (JSON text when it is not
a string) as its output.

The relay's limits reach the tool through the run's ``configurable``. A call past
``RELAY_CLIENT_TOOL_MAX_ROUNDS`` pauses marked ``over_limit`` (no token), and a call nobody
answered within ``RELAY_CLIENT_TOOL_TIMEOUT_S`` is past its time: either way the relay
resumes it with a stop (:func:`stop_answers`), the tool returns an error text (so a
prebuilt agent's message history stays valid: every tool call has its tool message), the
graph stops right after that node (:func:`run_graph`), and the turn ends with one
``error`` event whose code names the limit (``client_tool_rounds``,
``client_tool_timeout``). The thread is then free for its next message.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.types import interrupt
from pydantic import Field

from relay.conventions import CLIENT_TOOL

#: ``configurable`` keys the relay sets on a run (GraphAgent's routes)
TOOLS_KEY = "client_tools"  # AG-UI RunAgentInput.tools: [{name, description, parameters}]
ROUND_KEY = "relay_client_tool_round"  # client-tool rounds the turn has had so far
ANSWERED_KEY = "relay_client_tool_answered"  # call ids this run's resume answers
MAX_ROUNDS_KEY = "relay_client_tool_max_rounds"
#: the limits, by the code of the ``error`` event that ends a turn past one
LIMITS = {
    "client_tool_rounds": "RELAY_CLIENT_TOOL_MAX_ROUNDS",
    "client_tool_timeout": "RELAY_CLIENT_TOOL_TIMEOUT_S",
}


STOP_KEY = "relay_stop"  # the relay's answer to a call past a limit: {STOP_KEY: code}


def limit_message(code: str) -> str:
    """The ``error`` event's message for a limit (it names the setting)."""
    if code == "client_tool_rounds":
        return (
            "This turn asked the client to run tools more often than "
            "RELAY_CLIENT_TOOL_MAX_ROUNDS allows, and was stopped."
        )
    return (
        "The client did not answer the tool call within RELAY_CLIENT_TOOL_TIMEOUT_S, "
        "and the turn was stopped."
    )


class ClientToolLimit(Exception):
    """A client-tool limit ended the turn: ``code`` names it (the ``error`` event's)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ClientTool(BaseTool):
    """A tool the client runs: calling it pauses the run (see the module docstring)."""

    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self.args_schema = self.parameters
        self.metadata = {**(self.metadata or {}), "relay_client_tool": True}

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        arguments = tool_input if isinstance(tool_input, dict) else {"input": tool_input}
        return (), {"arguments": dict(arguments), "call_id": tool_call_id}

    def _run(self, arguments: dict[str, Any], call_id: str | None = None, **_: Any) -> str:
        return ask_client(self.name, arguments, call_id)

    async def _arun(self, arguments: dict[str, Any], call_id: str | None = None, **_: Any) -> str:
        return ask_client(self.name, arguments, call_id)


def client_tool(
    name: str, description: str, parameters: Mapping[str, Any] | None = None
) -> ClientTool:
    """A tool named ``name`` that the client runs; ``parameters``: its arguments' JSON
    Schema (an object schema; none: no arguments)."""
    schema = dict(parameters) if parameters else {"type": "object", "properties": {}}
    if schema.get("type") != "object":
        raise ValueError(f"client_tool {name!r}: parameters must be an object JSON Schema")
    return ClientTool(name=name, description=description or name, parameters=schema)


def client_tools_of(config: Mapping[str, Any] | None = None) -> list[ClientTool]:
    """The tools an AG-UI client sent with this run (``RunAgentInput.tools``), as client
    tools a model node binds (``model.bind_tools([*mine, *client_tools_of(config)])``)
    and calls. ``config``: the node's ``RunnableConfig`` (default: the current one)."""
    if config is None:
        config = get_config()
    sent = (config.get("configurable") or {}).get(TOOLS_KEY) or []
    tools = []
    for item in sent if isinstance(sent, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            parameters = item.get("parameters")
            tools.append(
                client_tool(
                    item["name"],
                    str(item.get("description") or ""),
                    parameters
                    if isinstance(parameters, Mapping) and parameters.get("type") == "object"
                    else None,
                )
            )
    return tools


def is_client_tool_call(value: Any) -> bool:
    """Whether an interrupt's value asks the client to run a tool."""
    return isinstance(value, Mapping) and value.get("type") == CLIENT_TOOL


def ask_client(name: str, arguments: dict[str, Any], call_id: str | None) -> str:
    """Pause for the client to run ``name``; its result (as text) once it answered."""
    configurable = get_config().get("configurable") or {}
    round_ = int(configurable.get(ROUND_KEY) or 0) + 1
    call_id = call_id or f"call_{name}_{round_}"
    answered = configurable.get(ANSWERED_KEY) or ()
    limit = configurable.get(MAX_ROUNDS_KEY)
    value: dict[str, Any] = {
        "type": CLIENT_TOOL,
        "name": name,
        "arguments": arguments,
        "call_id": call_id,
        "round": round_,
    }
    if call_id not in answered and isinstance(limit, int) and round_ > limit:
        value["over_limit"] = "client_tool_rounds"  # the relay stops the run (run_graph)
    else:
        value["token"] = secrets.token_urlsafe(16)
    answer = interrupt(value)
    if isinstance(answer, Mapping) and answer.get(STOP_KEY):
        return f"Error: {name} was not run: {limit_message(str(answer[STOP_KEY]))}"
    if isinstance(answer, Mapping) and "error" in answer:
        return f"Error: the client could not run {name}: {answer['error']}"
    result = answer.get("result") if isinstance(answer, Mapping) else answer
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def stop_answers(ids: Iterable[str], code: str) -> dict[str, Any]:
    """The resume that ends the calls ``ids`` for the limit ``code``."""
    return {i: {STOP_KEY: code} for i in ids}


async def run_graph(
    graph: Any,
    graph_input: Any,
    config: dict[str, Any],
    control: Any = None,
    durability: str | None = None,
) -> tuple[Any, ClientToolLimit | None]:
    """``graph.ainvoke`` with the client-tool limits enforced (GraphAgent's runs).

    A resume that answers calls with :func:`stop_answers` (the relay's, for a turn past a
    limit) lets those tools return an error to the graph, so its history stays whole, and
    stops the graph after the nodes that ran them (``interrupt_after``). A run that pauses
    on a call past ``RELAY_CLIENT_TOOL_MAX_ROUNDS`` is resumed so at once, in the same
    run. Either way the second value names the limit: the run ends with its ``error``.
    ``control``: LangGraph's ``RunControl`` of the run (a drain stops it at a step
    boundary with ``GraphDrained``: relay/turns/draining.py); ``durability``: LangGraph's
    (None: its default)."""
    extra: dict[str, Any] = {}
    if control is not None:
        extra["control"] = control
    if durability is not None:
        extra["durability"] = durability
    code = _stop_code(graph_input)
    if code is not None:
        nodes = await _nodes_of(graph, config, set(graph_input.resume))
        return await graph.ainvoke(
            graph_input, config, interrupt_after=nodes, **extra
        ), ClientToolLimit(code, limit_message(code))
    values = await graph.ainvoke(graph_input, config, **extra)
    pending = values.get("__interrupt__", []) if isinstance(values, Mapping) else []
    over = [i.id for i in pending if is_client_tool_call(i.value) and i.value.get("over_limit")]
    if not over:
        return values, None
    from langgraph.types import Command

    code = "client_tool_rounds"
    nodes = await _nodes_of(graph, config, set(over))
    values = await graph.ainvoke(
        Command(resume=stop_answers(over, code)), config, interrupt_after=nodes, **extra
    )
    return values, ClientToolLimit(code, limit_message(code))


def _stop_code(graph_input: Any) -> str | None:
    resume = getattr(graph_input, "resume", None)
    if not isinstance(resume, Mapping):
        return None
    codes = [a[STOP_KEY] for a in resume.values() if isinstance(a, Mapping) and STOP_KEY in a]
    return str(codes[0]) if codes else None


async def _nodes_of(graph: Any, config: Mapping[str, Any], ids: set[str]) -> list[str]:
    """The names of the thread's pending tasks that wait on the interrupts ``ids``."""
    snapshot = await graph.aget_state(
        {"configurable": {"thread_id": (config.get("configurable") or {}).get("thread_id")}}
    )
    names = [t.name for t in snapshot.tasks if any(i.id in ids for i in t.interrupts)]
    return names or [t.name for t in snapshot.tasks]
