"""browser_tool: a tool the person's browser runs (``local_time``), then back to generate.

Calling the client tool pauses the turn (an interrupt of type ``client_tool``, answered by
the SPA with the result and the token); on the resume LangGraph runs this node again and
the tool returns the browser's result, which generate turns into the answer.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig

from span_relay_demo.state import SupportState
from span_relay_demo.tools.local_time import local_time

BROWSER_TOOLS = {local_time.name: local_time}


async def browser_tool(state: SupportState, config: RunnableConfig) -> dict[str, Any]:
    call = state.get("client_call") or {}
    tool = BROWSER_TOOLS[call["name"]]
    reply = await tool.ainvoke(
        {
            "name": call["name"],
            "args": call.get("args") or {},
            "id": call.get("id"),
            "type": "tool_call",
        },
        config,
    )
    content = reply.content if isinstance(reply, ToolMessage) else str(reply)
    return {"client_result": {**call, "content": content}, "client_call": None}
