"""A LangGraph CLI project protected by LangGraph's own ``Auth``, written fresh for the tests
of langgraph.json's ``auth`` (tests/auth/test_langgraph_auth*.py): a small graph that answers
or pauses on a refund (the shape tests/auth/ownership.py's helpers drive), and an ``auth.py``
whose ``@auth.authenticate`` reads the ``Authorization`` header and whose ``@auth.on``
handlers deny by default, stamp the owner, refuse runs to read-only users and filter reads.
"""

from __future__ import annotations

import json
from pathlib import Path

GRAPH = """\
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt


def answer(state: MessagesState, config: RunnableConfig) -> dict:
    text = state["messages"][-1].content
    if text == "Who am I?":  # what the Agent Server tells a graph of its user
        configurable = config["configurable"]
        user = configurable["langgraph_auth_user"]
        return {
            "messages": [
                AIMessage(
                    f"You are {user.identity} ({user['identity']}, "
                    f"{configurable['langgraph_auth_user_id']}, "
                    f"{configurable['langgraph_auth_permissions']}, "
                    f"{configurable['user']['id']})."
                )
            ]
        }
    if "refund order 2001" in text:
        decision = interrupt({"question": "Refund $20.00 on order 2001?"})
        if decision.get("approved"):
            return {"messages": [AIMessage("Done: I refunded $20.00 on order 2001.")]}
        return {"messages": [AIMessage("No refund was made.")]}
    return {"messages": [AIMessage(f"You asked: {text}")]}


def make_graph():
    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile()
"""

AUTH = """\
from langgraph_sdk import Auth

auth = Auth()

USERS = {
    "alice-token": {"identity": "alice", "permissions": ["write"]},
    "bob-token": {"identity": "bob", "permissions": ["write"]},
    "carol-token": {"identity": "carol", "permissions": []},
    "eve-token": {"identity": "eve", "permissions": ["write"], "graph": "other"},
    "mallory-token": {"identity": "mallory", "permissions": ["write"], "tenant": "acme"},
}


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    scheme, _, token = (authorization or "").partition(" ")
    user = USERS.get(token) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="Unknown token: send Authorization: Bearer <your token>."
        )
    return user


@auth.on
async def deny_by_default(ctx: Auth.types.AuthContext, value: dict) -> bool:
    return False


@auth.on.threads.create
async def create_thread(ctx: Auth.types.AuthContext, value: dict) -> None:
    value.setdefault("metadata", {})["owner"] = ctx.user.identity


@auth.on.threads.create_run
async def create_run(ctx: Auth.types.AuthContext, value: dict) -> dict:
    if "write" not in ctx.permissions:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail="Read-only users start no runs."
        )
    return {"owner": ctx.user.identity}


@auth.on(resources="threads", actions=["read", "search"])
async def read_threads(ctx: Auth.types.AuthContext, value: dict) -> dict:
    if "graph" in ctx.user:
        return {"graph_id": ctx.user["graph"]}
    if "tenant" in ctx.user:
        return {"tenant": ctx.user["tenant"]}
    return {"owner": {"$eq": ctx.user.identity}}


@auth.on.threads
async def other_thread_actions(ctx: Auth.types.AuthContext, value: dict) -> dict:
    return {"owner": ctx.user.identity}


@auth.on.assistants.search
async def list_graphs(ctx: Auth.types.AuthContext, value: dict) -> bool:
    return True
"""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def write_project(folder: Path, auth: str = AUTH, entry: object = None) -> Path:
    """The project in ``folder``: ``src/agent/graph.py``, ``src/agent/auth.py`` and
    ``langgraph.json`` (its ``auth`` entry: ``entry``, by default the auth file's); returns
    the config's path."""
    package = folder / "src" / "agent"
    package.mkdir(parents=True, exist_ok=True)
    (package / "graph.py").write_text(GRAPH)
    (package / "auth.py").write_text(auth)
    config = folder / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "dependencies": ["."],
                "graphs": {
                    "support_agent": "./src/agent/graph.py:make_graph",
                    "other": "./src/agent/graph.py:make_graph",
                },
                "auth": {"path": "./src/agent/auth.py:auth"} if entry is None else entry,
            }
        )
    )
    return config
