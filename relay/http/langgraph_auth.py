"""LangGraph's ``Auth`` (relay/auth/langgraph_auth.py) on the HTTP surface: the dependency
that asks ``@auth.authenticate`` who is asking, and the ``@auth.on`` checks the routes make.

Each route asks the handler LangGraph would call for what it does (README "langgraph.json's
auth" has the table): a new turn on a new thread is ``threads.create`` then
``threads.create_run``; a turn on an existing thread or a resume ``threads.create_run``;
reading a turn, its events or a thread's turns ``threads.read``; listing turns
``threads.search``; cancelling and rating ``threads.update``; an import ``threads.create``;
the graphs ``assistants.search`` and ``assistants.read``. A filter the handler returns
hides what it does not match, as the relay's ownership rules do: ``404``, as for what does
not exist. A filter the relay cannot check refuses the request (``500
auth_filter_unsupported``): closed, never open. With no LangGraph ``Auth`` every helper
here is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from fastapi import Request

from relay.auth import User
from relay.auth.filters import UnsupportedFilter, matches
from relay.errors import ApiError
from relay.http.identity import user_of
from relay.http.parts import RelayParts
from relay.http.requests import read_body
from relay.json_depth import loads
from relay.turns.records import TurnRecord

if TYPE_CHECKING:  # loaded (with langgraph_sdk) only where an Auth is given
    from relay.auth.langgraph_auth import LangGraphAuth

log = logging.getLogger("relay.auth")

#: what a graph is as a LangGraph assistant (the Agent Server's assistant of a graph)
ASSISTANT_METADATA_KEYS = ("graph_id", "assistant_id", "created_by", "owner")


def langgraph_identity(adapter: LangGraphAuth, max_body_bytes: int) -> Any:
    """The dependency that finds the request's user with ``@auth.authenticate`` (kept in
    ``request.state.user``, as :func:`relay.http.identity.identity_dependency` does)."""
    from relay.auth.langgraph_auth import RequestFacts

    async def identify(request: Request) -> User:
        body = None
        if adapter.wants_body:  # read once: the route reads the same bytes again
            raw = await read_body(
                request,
                max_body_bytes,
                lambda: ApiError(
                    413, "body_too_large", f"The request body is over {max_body_bytes} bytes."
                ),
            )
            # Starlette's own cache of a read body: the route's reader gets these bytes
            request._body = raw
            try:
                body = loads(raw) if raw else None  # (too deep: a ValueError)
            except (UnicodeDecodeError, ValueError):
                body = None
        facts = RequestFacts(
            method=request.method,
            path=request.url.path,
            headers=dict(request.scope["headers"]),
            path_params=dict(request.path_params),
            query_params=dict(request.query_params),
            request=request,
            scope=request.scope,
            body=body,
        )
        user = await adapter.identify(facts)
        request.state.user = user
        return user

    return identify


def thread_metadata(record: TurnRecord) -> dict[str, Any]:
    """The metadata the relay keeps of a turn's thread, as a filter reads it: its owner
    (the user who started it) and its graph."""
    metadata: dict[str, Any] = {}
    if record.user_id:
        metadata["owner"] = record.user_id
    if record.graph:
        metadata["graph_id"] = metadata["assistant_id"] = record.graph
    return metadata


def assistant_metadata(graph: str) -> dict[str, Any]:
    """A served graph as the Agent Server's assistant of a graph: made by the system."""
    return {"graph_id": graph, "assistant_id": graph, "created_by": "system"}


def passes(
    adapter: LangGraphAuth,
    filters: Mapping[str, Any] | None,
    metadata: Mapping[str, Any] | None,
    keys: tuple[str, ...] | None = None,
) -> bool:
    """Whether ``metadata`` (None: nothing known of it) passes ``filters``; a filter the
    relay cannot check is a ``500 auth_filter_unsupported``, never a pass."""
    if not filters:
        return True
    try:
        return metadata is not None and matches(filters, metadata, keys)
    except UnsupportedFilter as exc:
        log.warning("relay: %s handlers returned %s; refused (fail closed)", adapter.source, exc)
        raise ApiError(
            500,
            "auth_filter_unsupported",
            f"The {adapter.source} handlers returned {exc}; the relay cannot apply it, so "
            "it refuses the request.",
        ) from None


async def authorize(
    adapter: LangGraphAuth | None,
    request: Request,
    resource: str,
    action: str,
    value: dict[str, Any],
) -> dict[str, Any] | None:
    """``resource.action``'s handler on ``value``: its filter, None, or its refusal."""
    if adapter is None:
        return None
    return await adapter.authorize(user_of(request), resource, action, value)


async def authorize_thread(
    adapter: LangGraphAuth | None,
    request: Request,
    action: str,
    record: TurnRecord | None,
    value: dict[str, Any],
    missing: ApiError,
) -> None:
    """``threads.<action>`` on ``record``'s thread: the handler's refusal, or ``missing``
    (a 404) when its filter excludes the thread (or there is no record to match)."""
    filters = await authorize(adapter, request, "threads", action, value)
    if adapter is not None and filters:
        known = thread_metadata(record) if record is not None else None
        if not passes(adapter, filters, known):
            raise missing


async def thread_filter(
    adapter: LangGraphAuth | None, request: Request, action: str, value: dict[str, Any]
) -> Callable[[TurnRecord], bool]:
    """``threads.<action>`` of a listing: the records its filter lets through."""
    filters = await authorize(adapter, request, "threads", action, value)
    if adapter is None or not filters:
        return lambda record: True
    passes(adapter, filters, {})  # a filter the relay cannot check refuses the listing itself
    return lambda record: passes(adapter, filters, thread_metadata(record))


async def authorize_run(
    adapter: LangGraphAuth | None,
    request: Request,
    graph: str,
    record: TurnRecord | None,
    thread_id: str | None,
    turn_id: str | None,
    kwargs: dict[str, Any],
    missing: ApiError,
) -> None:
    """A run on a thread: ``threads.create`` first when the thread is new (``record``
    None: it has no turn yet), then ``threads.create_run``, whose filter must let an
    existing thread through (else ``missing``, a 404)."""
    if adapter is None:
        return
    user = user_of(request)
    if record is None:
        thread: dict[str, Any] = {"thread_id": thread_id, "metadata": {}, "if_exists": "raise"}
        await adapter.authorize(user, "threads", "create", thread)
        adapter.note_metadata(user, graph, thread.get("metadata"))
    run = {
        "thread_id": thread_id,
        "assistant_id": graph,
        "run_id": turn_id,
        "status": "pending",
        "metadata": {},
        "prevent_insert_if_inflight": True,
        "multitask_strategy": "reject",
        "if_not_exists": "create" if record is None else "reject",
        "after_seconds": 0,
        "kwargs": kwargs,
        "action": None,
    }
    filters = await adapter.authorize(user, "threads", "create_run", run)
    if record is not None and filters and not passes(adapter, filters, thread_metadata(record)):
        raise missing


def resume_authorizer(
    relay: RelayParts, request: Request, graph: str, resume: Any, missing: ApiError
) -> Callable[[TurnRecord], Awaitable[None]]:
    """The check of a resume's turn, once the admission service found it: LangGraph's
    ``Auth`` sees it as ``threads.create_run`` with ``{"command": {"resume": resume}}``;
    a filter that hides the thread is ``missing``."""

    async def authorize(record: TurnRecord) -> None:
        await authorize_run(
            relay.langgraph_auth,
            request,
            graph,
            record,
            record.thread_id,
            record.turn_id,
            {"command": {"resume": resume}},
            missing,
        )

    return authorize


async def authorize_chat(
    relay: RelayParts,
    request: Request,
    graph: str,
    thread_id: str | None,
    turn_id: str | None,
    kwargs: dict[str, Any],
) -> None:
    """A new turn (``POST /chat``, a chat run of ``/agui``): :func:`authorize_run` on the
    thread it names (new when it has no turn yet, or when it names none)."""
    if relay.langgraph_auth is None:
        return
    latest = await relay.turns.list(thread_id, 1) if thread_id else []
    await authorize_run(
        relay.langgraph_auth,
        request,
        graph,
        latest[0] if latest else None,
        thread_id,
        turn_id,
        kwargs,
        ApiError(
            404,
            "unknown_thread",
            f"There is no thread {thread_id} of yours; send no thread_id to start a new one.",
        ),
    )


async def authorize_graph(
    adapter: LangGraphAuth | None, request: Request, graph: str, missing: ApiError
) -> None:
    """``assistants.read`` of a served graph: its refusal, or ``missing`` when its filter
    does not match the graph (an assistant made by the system, owned by nobody)."""
    filters = await authorize(
        adapter, request, "assistants", "read", {"assistant_id": graph, "metadata": {}}
    )
    if adapter is not None and filters:
        if not passes(adapter, filters, assistant_metadata(graph), ASSISTANT_METADATA_KEYS):
            raise missing


async def graph_filter(
    adapter: LangGraphAuth | None, request: Request, limit: int
) -> Callable[[str], bool]:
    """``assistants.search`` of ``GET /graphs``: the graphs its filter lets through."""
    value: dict[str, Any] = {"graph_id": None, "metadata": {}, "limit": limit, "offset": 0}
    filters = await authorize(adapter, request, "assistants", "search", value)
    if adapter is None or not filters:
        return lambda graph: True
    return lambda graph: passes(
        adapter, filters, assistant_metadata(graph), ASSISTANT_METADATA_KEYS
    )
