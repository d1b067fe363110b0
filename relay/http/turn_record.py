"""``GET /turns/{id}``: one turn's record, as its owner (and LangGraph's ``Auth``, its
``threads.read``) may see it. A client that reads it the moment it has the run's
terminal event gets the run's end, not the record a moment before it is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from relay.errors import ApiError
from relay.http.errors import error_responses
from relay.http.identity import check_owner, user_of
from relay.http.langgraph_auth import authorize_thread
from relay.http.parts import RelayParts
from relay.turns.records import RUNNING


class TurnRecordRoute:
    """The route ``GET /turns/{id}`` over ``relay``'s parts."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay

    def add_to(self, router: APIRouter, auth: Sequence[Any]) -> None:
        """Put the route on ``router``, behind the ``auth`` dependencies."""
        router.add_api_route(
            "/turns/{turn_id}",
            self.turn,
            methods=["GET"],
            dependencies=list(auth),
            tags=["turns"],
            responses=error_responses(401, 404),
        )

    # (no docstring: it would become the operation's description in the OpenAPI document)
    async def turn(self, request: Request, turn_id: str) -> JSONResponse:
        relay = self.relay
        user = user_of(request)
        record = await relay.turns.get(turn_id)  # the id in any spelling of a UUID
        # a client reads the record the moment it has the run's terminal event (a pause):
        # the run's end is written a moment later; wait for it, then read it again
        if (
            record is not None
            and record.status == RUNNING
            and await relay.runs.settle(record.turn_id)
        ):
            record = await relay.turns.get(turn_id)
        record = check_owner(user, record)
        await authorize_thread(
            relay.langgraph_auth,
            request,
            "read",
            record,
            {"thread_id": record.thread_id, "run_id": record.turn_id},
            ApiError(404, "unknown_turn", "There is no such turn."),
        )
        return JSONResponse(record.public())
