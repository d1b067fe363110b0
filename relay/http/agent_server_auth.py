"""langgraph.json's ``auth`` on LangGraph's Agent Server routes (issue 34): the ``@auth.on``
handler the Agent Server calls for each route, and what its answer does there, as the
Agent Server applies it (README "langgraph.json's `auth`" has the table).

The handler is LangGraph's most specific one (relay/auth/langgraph_auth.py: resource and
action, then resource, then action, then the global ``@auth.on``); it gets
``ctx=AuthContext(resource, action, user, permissions)`` and the Agent Server's value dict
for that action, which it may change. ``None``/``True`` allow, ``False`` is a ``403``,
an ``Auth.exceptions.HTTPException`` its own status and detail, a dict a filter:

- on a thread (``threads.read``, ``update``, ``delete``, ``create_run``) it is matched
  against the thread's metadata (:func:`thread_metadata`); a thread it does not match is
  one that does not exist, a ``404``, as the Agent Server answers (a ``POST /threads`` of
  an existing id it does not match: ``409``);
- on a listing (``threads.search``, ``assistants.search``) it hides what it does not match;
- on ``store.search`` it is ANDed with the request's own item filter.

What a create handler writes into ``value["metadata"]`` (the documented ``owner`` stamp)
is the created thread's metadata; a run that creates its thread writes its own
``metadata`` there, after ``threads.create_run``'s handler. A store handler may rewrite
``value["namespace"]``: the route uses the namespace it leaves.

A filter uses LangGraph's operators (relay/auth/filters.py :func:`matches_metadata`);
one the relay cannot check refuses the request (``500 auth_filter_unsupported``), closed,
never open. Without langgraph.json's ``auth`` every method here allows everything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from fastapi import Request

from relay.agent_server.assistants import assistant_id_of
from relay.agent_server.requests import RunRequest
from relay.auth.filters import UnsupportedFilter, matches_metadata
from relay.errors import ApiError
from relay.http.identity import user_of
from relay.turns.threads import ThreadRecord

if TYPE_CHECKING:  # loaded (with langgraph_sdk) only where an Auth is given
    from relay.auth.langgraph_auth import LangGraphAuth

log = logging.getLogger("relay.auth")


def thread_metadata(record: ThreadRecord) -> dict[str, Any]:
    """A thread's metadata as a filter reads it: its own, and, where it has none, its
    ``owner`` (the user who claimed it: a thread started on ``/chat`` has no metadata of
    its own, yet is its user's as one stamped by a create handler is)."""
    found: dict[str, Any] = {"owner": record.owner} if record.owner else {}
    found.update(record.metadata)
    return found


def run_value(thread_id: str, run_id: str, graph: str, run: RunRequest) -> dict[str, Any]:
    """What LangGraph's ``threads.create_run`` handler gets for a run (``RunsCreate``)."""
    command = {"resume": run.resume} if run.has_resume else None
    return {
        "thread_id": thread_id,
        "assistant_id": assistant_id_of(graph),
        "run_id": run_id,
        "status": "pending",
        "metadata": dict(run.metadata),
        "prevent_insert_if_inflight": True,
        "multitask_strategy": "reject",
        "if_not_exists": "create" if run.create_thread else "reject",
        "after_seconds": 0,
        "kwargs": {
            "input": run.graph_input,
            "command": command,
            "config": {"configurable": dict(run.configurable)},
            "stream_mode": list(run.stream_modes),
        },
    }


class AgentServerAuth:
    """LangGraph's ``Auth`` (``adapter``; None: no langgraph.json ``auth``) applied to the
    Agent Server's resources."""

    def __init__(self, adapter: LangGraphAuth | None) -> None:
        self.adapter = adapter

    async def authorize(
        self, request: Request, resource: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any] | None:
        """``resource.action``'s handler on ``value`` (which it may change): its filter,
        None (allowed, unfiltered), or the ApiError it asked for."""
        if self.adapter is None:
            return None
        return await self.adapter.authorize(user_of(request), resource, action, value)

    def passes(self, filters: Mapping[str, Any] | None, metadata: Mapping[str, Any]) -> bool:
        """Whether ``metadata`` passes ``filters``; a filter the relay cannot check is a
        ``500 auth_filter_unsupported``, never a pass."""
        if not filters:
            return True
        try:
            return matches_metadata(filters, metadata)
        except UnsupportedFilter as exc:
            source = self.adapter.source if self.adapter is not None else "auth"
            log.warning("relay: %s handlers returned %s; refused (fail closed)", source, exc)
            raise ApiError(
                500,
                "auth_filter_unsupported",
                f"The {source} handlers returned {exc}; the relay cannot apply it, so it "
                "refuses the request.",
            ) from None

    def thread_passes(self, filters: Mapping[str, Any] | None, record: ThreadRecord) -> bool:
        return self.passes(filters, thread_metadata(record))

    def listing(self, filters: Mapping[str, Any] | None) -> Callable[[ThreadRecord], bool]:
        """The threads a search's filter lets through (one the relay cannot check refuses
        the search itself, even with no thread to list)."""
        if not filters:
            return lambda record: True
        self.passes(filters, {})  # checks the filter whole (matches_metadata)
        return lambda record: self.thread_passes(filters, record)

    def metadata_of(self, value: Mapping[str, Any], action: str) -> dict[str, Any]:
        """``value["metadata"]`` after a handler: the metadata to keep (a handler that put
        something else there is a ``500``)."""
        metadata = value.get("metadata")
        if metadata is None:
            return {}
        if not isinstance(metadata, dict):
            source = self.adapter.source if self.adapter is not None else "auth"
            raise ApiError(
                500,
                "auth_handler_invalid",
                f"The {source} handler of {action} set metadata to a "
                f"{type(metadata).__name__}; it must stay an object.",
            )
        return metadata

    def has_store_handler(self, action: str) -> bool:
        """Whether langgraph.json's ``auth`` decides ``store.<action>`` (a handler for it,
        the store's, an action's or a global one)."""
        return self.adapter is not None and self.adapter.handler_for("store", action) is not None
