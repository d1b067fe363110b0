"""The app LangGraph's clients are tested on (tests/http/test_agent_server.py,
tests/replicas/test_agent_server_replicas.py, tests/interop/test_langgraph_js.py): the
graphs of tests/interop/langgraph_js/graphs.py (plain LangGraph, which `langgraph dev`
serves too) on one relay."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI

from relay import GraphAgent, Relay
from tests.interop.langgraph_js.graphs import (
    ANSWER,
    approval_graph,
    broken_graph,
    chat_graph,
    gated_graph,
)

__all__ = ["ANSWER", "agent_server_app", "approval_graph", "broken_graph", "chat_graph"]


def agent_server_app(env: Mapping[str, str]) -> FastAPI:
    """The four graphs (``chat``, ``approval``, ``broken``, ``gated``) on one relay."""
    relay = Relay.from_env(dict(env))
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(
        app,
        GraphAgent(chat_graph(), name="chat", description="A chat"),
        GraphAgent(approval_graph(), name="approval"),
        GraphAgent(broken_graph(), name="broken"),
        GraphAgent(gated_graph(), name="gated"),
    )
    return app
