"""LangGraph's own Python client, ``langgraph_sdk``, against an Agent Server API, making the
calls agent-chat-ui and ``useStream`` make (as tests/interop/langgraph_js/client.mjs does
with the JavaScript client): the assistants of a graph and its drawing, a thread, a run
streamed in ``values``, ``messages-tuple``, ``updates`` and ``custom`` at once (and one
of a graph with a subgraph, with ``stream_subgraphs``), the
thread's state and history, threads searched by metadata, an interrupt seen in ``values``
and answered with ``Command(resume=...)``, a run waited for, and the store's items.

    python client.py URL

Prints one JSON summary of what the client got, its ids and times replaced by what they
refer to (tests/interop/test_langgraph_py.py runs it against span-relay and against
``langgraph dev`` and asserts the two summaries are the same). The graphs are
tests/interop/langgraph_js/graphs.py's."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from typing import Any

from langgraph_sdk import get_client
from langgraph_sdk.schema import Command

#: the keys whose values differ from server to server and run to run
_VOLATILE = {"created_at", "updated_at", "run_id", "checkpoint_id", "id", "task_id"}
#: the metadata of a thread or checkpoint that is the server's own (not what a client reads)
_SERVER_METADATA = {"graph_id", "assistant_id", "thread_id", "user_id", "created_by"}


class Ids:
    """Each id seen, replaced by its kind and its order of first sight (``thread#1``)."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def name(self, kind: str, value: Any) -> Any:
        if not isinstance(value, str) or not value:
            return value
        if value not in self.seen:
            count = sum(1 for v in self.seen.values() if v.startswith(f"{kind}#")) + 1
            self.seen[value] = f"{kind}#{count}"
        return self.seen[value]


#: the metadata of a ``messages`` tuple that span-relay writes as LangGraph does (the peer
#: adds its deployment's: versions, host, plan, API URL, the task's path and triggers)
_MESSAGE_METADATA = ("langgraph_node", "langgraph_step", "langgraph_checkpoint_ns", "thread_id")


def parts_of(stream: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for event, data in stream:
        if event.split("|")[0] == "messages" and isinstance(data, list) and len(data) == 2:
            # the chunk's ``chunk_position`` ("last" on a model's last chunk) is LangChain's
            # and not in span-relay's text deltas yet: left out of the comparison
            message = {k: v for k, v in data[0].items() if k != "chunk_position"}
            data = [message, {k: v for k, v in data[1].items() if k in _MESSAGE_METADATA}]
        mode, _, ns = event.partition("|")
        if ns:  # a subgraph's: its namespace without the task ids (research:<id> -> research)
            event = f"{mode}|{task_free(ns)}"
        out.append({"event": event, "data": data})
    return out


def task_free(ns: str) -> str:
    """A checkpoint namespace without its task ids."""
    return "|".join(part.split(":")[0] for part in ns.split("|"))


async def collect(stream: Any) -> list[tuple[str, Any]]:
    return [(part.event, part.data) async for part in stream]


async def main(url: str) -> dict[str, Any]:
    client = get_client(url=url)
    ids = Ids()
    out: dict[str, Any] = {}

    # agent-chat-ui: the graph's assistant, found by its graph's name, and its drawing
    found = await client.assistants.search(graph_id="chat")
    assistant = await client.assistants.get(found[0]["assistant_id"])
    graph = await client.assistants.get_graph(assistant["assistant_id"])
    out["assistants"] = [(a["graph_id"], ids.name("assistant", a["assistant_id"])) for a in found]
    out["assistant"] = {
        "graph_id": assistant["graph_id"],
        "assistant_id": ids.name("assistant", assistant["assistant_id"]),
    }
    out["graph_nodes"] = sorted(node["id"] for node in graph["nodes"])
    out["graph_edges"] = sorted((e["source"], e["target"]) for e in graph["edges"])

    # useStream: a thread, one run streamed in the modes it asks for
    thread = await client.threads.create()
    thread_id = thread["thread_id"]
    ids.name("thread", thread_id)
    chat = await collect(
        client.runs.stream(
            thread_id,
            "chat",
            input={"messages": [{"type": "human", "content": "hi"}]},
            stream_mode=["values", "messages-tuple", "updates", "custom"],
        )
    )
    out["chat"] = parts_of(chat)
    state = await client.threads.get_state(thread_id)
    out["state"] = {"values": state["values"], "next": state["next"]}
    out["state_thread"] = ids.name("thread", state["checkpoint"]["thread_id"])
    history = await client.threads.get_history(thread_id, limit=10)
    out["history_steps"] = [h["metadata"].get("step") for h in history]
    out["history_links"] = [
        h["parent_checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]
        for h, older in itertools.pairwise(history)
    ]
    out["history_head_is_state"] = (
        history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    )
    out["history_values"] = [h["values"] for h in history]
    after = await client.threads.get(thread_id)
    out["thread_after"] = {"status": after["status"], "graph_id": after["metadata"]["graph_id"]}

    # a graph with a subgraph, streamed with its subgraphs' events (mode|namespace)
    nested = (await client.threads.create())["thread_id"]
    ids.name("thread", nested)
    out["nested"] = parts_of(
        await collect(
            client.runs.stream(
                nested,
                "nested",
                input={"messages": [{"type": "human", "content": "tides?"}]},
                stream_mode=["values", "messages-tuple", "updates", "custom"],
                stream_subgraphs=True,
            )
        )
    )

    # an interrupt: seen in values as __interrupt__, answered with Command(resume=...)
    asked = (await client.threads.create())["thread_id"]
    ids.name("thread", asked)
    out["asked"] = parts_of(
        await collect(
            client.runs.stream(
                asked, "approval", input={"question": "Ship it?"}, stream_mode="values"
            )
        )
    )
    asked_state = await client.threads.get_state(asked)
    out["asked_state"] = {
        "next": asked_state["next"],
        "interrupts": asked_state["interrupts"],
        "tasks": [(t["name"], t["interrupts"]) for t in asked_state["tasks"]],
    }
    out["answered"] = parts_of(
        await collect(
            client.runs.stream(
                asked, "approval", command=Command(resume="yes"), stream_mode="values"
            )
        )
    )

    # a run waited for
    waited = (await client.threads.create())["thread_id"]
    ids.name("thread", waited)
    out["waited"] = await client.runs.wait(
        waited, "chat", input={"messages": [{"type": "human", "content": "again"}]}
    )

    # agent-chat-ui's thread list: the graph's threads by the metadata their runs wrote,
    # newest first; a thread created with metadata of its own, found by it
    created = await client.threads.create(metadata={"topic": "refunds"})
    ids.name("thread", created["thread_id"])
    out["created_metadata"] = created["metadata"]
    listed = await client.threads.search(
        metadata={"graph_id": "chat"}, limit=10, sort_by="updated_at", sort_order="desc"
    )
    out["listed"] = [ids.name("thread", t["thread_id"]) for t in listed]
    by_topic = await client.threads.search(metadata={"topic": "refunds"})
    out["by_topic"] = [ids.name("thread", t["thread_id"]) for t in by_topic]

    # the store: put, get, search under a prefix, list namespaces
    await client.store.put_item(["prefs", "ada"], "theme", {"color": "green"})
    await client.store.put_item(["prefs", "ada"], "lang", {"code": "en"})
    await client.store.put_item(["prefs", "bob"], "theme", {"color": "blue"})
    item = await client.store.get_item(["prefs", "ada"], "theme")
    out["store_item"] = {k: item[k] for k in ("namespace", "key", "value")}
    searched = await client.store.search_items(["prefs"], filter={"color": "green"})
    out["store_search"] = [(i["namespace"], i["key"], i["value"]) for i in searched["items"]]
    everything = await client.store.search_items(["prefs", "ada"], limit=10)
    out["store_ada"] = sorted(i["key"] for i in everything["items"])
    spaces = await client.store.list_namespaces(prefix=["prefs"])
    out["store_namespaces"] = sorted(spaces["namespaces"])
    await client.store.delete_item(["prefs", "ada"], "lang")
    out["store_after_delete"] = await client.store.get_item(["prefs", "ada"], "lang")
    return normalise(out, ids)


def normalise(value: Any, ids: Ids) -> Any:
    """Ids named by kind and order, times and task ids dropped, server metadata dropped."""
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        for key, item in value.items():
            if key in _VOLATILE:
                continue
            if key == "thread_id":
                kept[key] = ids.name("thread", item)
            elif key == "langgraph_checkpoint_ns" and isinstance(item, str):
                kept[key] = task_free(item)
            elif key in ("checkpoint_ns", "langgraph_path", "langgraph_triggers"):
                kept[key] = item
            elif key.startswith(("checkpoint_", "ls_", "x-")) or key in _SERVER_METADATA:
                continue
            else:
                kept[key] = normalise(item, ids)
        return kept
    if isinstance(value, list | tuple):
        return [normalise(item, ids) for item in value]
    return value


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python client.py URL")
    print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
