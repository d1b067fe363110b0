"""``GET /turns``: the turns the asker may see, newest first, a page at a time; with
``Accept: text/event-stream`` the same list and then every change of a turn's status,
live (relay/http/turn_feed.py). LangGraph's ``Auth`` filters both: a thread's turns are
its ``threads.read``, every turn its ``threads.search``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse, Response

from relay.auth import User
from relay.delivery.negotiation import SSE
from relay.http.errors import error_responses
from relay.http.identity import user_key, user_of
from relay.http.langgraph_auth import thread_filter
from relay.http.parts import RelayParts
from relay.http.turn_feed import feed_response
from relay.turns.access import may_see
from relay.turns.records import TurnRecord, id_key

#: the route's answers, as the OpenAPI document lists them
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The turns (JSON); with Accept: "
        "text/event-stream, the list and then each change, live",
        "content": {SSE: {"schema": {"type": "string"}}},
    },
    **error_responses(401, 422),
}


class TurnList:
    """The route ``GET /turns`` over ``relay``'s parts."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay

    def add_to(self, router: APIRouter, auth: Sequence[Any]) -> None:
        """Put the route on ``router``, behind the ``auth`` dependencies."""
        router.add_api_route(
            "/turns",
            self.turns,
            methods=["GET"],
            dependencies=list(auth),
            tags=["turns"],
            responses=RESPONSES,
        )

    async def turns(
        self,
        request: Request,
        thread_id: str | None = None,
        limit: int = Query(default=20, ge=1, le=200),
        before: float | None = None,
        graph: str | None = None,
        status: str | None = Query(
            default=None, pattern="^(running|paused|answered|refused|error|cancelled|interrupted)$"
        ),
    ) -> Response:
        """The turns the asker may see, newest first; with ``Accept: text/event-stream``,
        the same list and then every change of a turn's status, live
        (relay/http/turn_feed.py)."""
        relay = self.relay
        user = user_of(request)
        # LangGraph's Auth: a thread's turns are threads.read, every turn threads.search
        allowed = await thread_filter(
            relay.langgraph_auth,
            request,
            "read" if thread_id else "search",
            {"thread_id": thread_id, "run_id": None}
            if thread_id
            else {"metadata": {}, "status": None, "limit": limit, "offset": 0, "thread_id": None},
        )

        async def page() -> list[TurnRecord]:
            return await relay.turns.list(
                thread_id, limit, before, graph=graph or None, status=status, user_id=user_key(user)
            )

        if SSE in (request.headers.get("accept") or ""):
            return self.feed(page, allowed, user, thread_id, graph, status)
        records = await page()
        return JSONResponse(
            {
                # a filter of LangGraph's Auth may leave a page short: the next one is
                # where the unfiltered page ended
                "turns": [r.public() for r in records if allowed(r)],
                # the next page: ?before=next_before (None on the last page)
                "next_before": records[-1].started_at if len(records) == limit else None,
            }
        )

    def feed(
        self,
        page: Callable[[], Awaitable[list[TurnRecord]]],
        allowed: Callable[[TurnRecord], bool],
        user: User | None,
        thread_id: str | None,
        graph: str | None,
        status: str | None,
    ) -> Response:
        """The list as a stream: the page the asker may see, then each change of a turn
        the same filters let through."""
        relay = self.relay

        async def listed() -> list[TurnRecord]:
            return [record for record in await page() if allowed(record)]

        def accepts(record: TurnRecord) -> bool:
            return (
                may_see(user, record)
                and allowed(record)
                and (thread_id is None or record.thread_key == id_key(thread_id))
                and (not graph or record.graph == graph)
                and (status is None or record.status == status)
            )

        return feed_response(
            relay.feed,
            listed,
            accepts,
            heartbeat_s=relay.settings.heartbeat_s,
            retry_ms=relay.settings.retry_ms,
            closing=relay.closing,
        )
