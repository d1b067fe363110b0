"""``POST /turns/{id}/cancel``: cancel a running turn, here or on the instance that runs
it (a replica, a worker: the cancel channel of a shared Redis bus). ``202`` while it is
cancelling; ``200`` with its status when there was nothing to cancel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from relay.bus.base import BusUnavailable
from relay.errors import ApiError
from relay.http.errors import error_responses
from relay.http.identity import check_owner, user_of
from relay.http.langgraph_auth import authorize_thread
from relay.http.parts import RelayParts
from relay.turns.records import RUNNING, TurnRecord


class TurnCancel:
    """The route ``POST /turns/{id}/cancel`` over ``relay``'s parts."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay

    def add_to(self, router: APIRouter, auth: Sequence[Any]) -> None:
        """Put the route on ``router``, behind the ``auth`` dependencies."""
        router.add_api_route(
            "/turns/{turn_id}/cancel",
            self.cancel,
            methods=["POST"],
            dependencies=list(auth),
            tags=["turns"],
            responses={202: {"description": "Cancelling"}, **error_responses(401, 404)},
        )

    # (no docstring: it would become the operation's description in the OpenAPI document)
    async def cancel(self, request: Request, turn_id: str) -> JSONResponse:
        relay = self.relay
        record = check_owner(user_of(request), await relay.turns.get(turn_id))
        await authorize_thread(
            relay.langgraph_auth,
            request,
            "update",
            record,
            {"thread_id": record.thread_id, "action": "interrupt"},
            ApiError(404, "unknown_turn", "There is no such turn."),
        )
        cancelled = await self.cancelled(record)
        status = "cancelling" if cancelled else record.status
        return JSONResponse(
            {"turn_id": record.turn_id, "cancelled": cancelled, "status": status},
            status_code=202 if cancelled else 200,
        )

    async def cancelled(self, record: TurnRecord) -> bool:
        """Whether the turn's run was told to stop: here, or by its owner (another
        instance, when this one runs no such turn and the turn is running)."""
        relay = self.relay
        cancelled = relay.runs.cancel(record.turn_id)
        if not cancelled and record.status == RUNNING and relay.cancels is not None:
            try:  # another instance runs it (a replica, a worker): its owner cancels it
                own = 1 if relay.cancels.listening.is_set() else 0  # hears itself too
                cancelled = await relay.cancels.request(record.turn_id) > own
            except BusUnavailable as exc:
                raise ApiError(
                    503, "bus_unavailable", str(exc), headers={"Retry-After": "2"}
                ) from None
        return cancelled
