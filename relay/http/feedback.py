"""``POST /messages/{id}/feedback``: thumbs up or down on a saved answer (the id of its
``message_saved`` event), with an optional comment, by the user whose turn it answered
(and, with LangGraph's ``Auth``, as its ``threads.update`` allows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from relay.auth import User
from relay.errors import ApiError
from relay.http.errors import error_responses
from relay.http.identity import check_owner, user_of
from relay.http.langgraph_auth import authorize_thread
from relay.http.parts import RelayParts
from relay.http.requests import read_json_object
from relay.turns.messages import RATINGS

#: the longest comment, in characters
MAX_COMMENT = 2000

#: the route's body, as the OpenAPI document describes it
OPENAPI_EXTRA: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["rating"],
                    "properties": {
                        "rating": {"enum": ["up", "down"]},
                        "comment": {"type": "string", "maxLength": MAX_COMMENT},
                    },
                }
            }
        },
    }
}


class Feedback:
    """The route ``POST /messages/{id}/feedback`` over ``relay``'s parts."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay

    def add_to(self, router: APIRouter, auth: Sequence[Any]) -> None:
        """Put the route on ``router``, behind the ``auth`` dependencies."""
        router.add_api_route(
            "/messages/{message_id}/feedback",
            self.feedback,
            methods=["POST"],
            dependencies=list(auth),
            tags=["turns"],
            openapi_extra=OPENAPI_EXTRA,
            responses=error_responses(400, 401, 404, 413, 415, 422),
        )

    async def feedback(self, request: Request, message_id: str) -> JSONResponse:
        """Thumbs up or down on a saved answer (the id of its ``message_saved`` event), by
        the user whose turn it answered."""
        relay = self.relay
        user = user_of(request)
        body = await read_json_object(request, relay.settings.max_body_bytes)
        rating = body.get("rating")
        comment = body.get("comment")
        if rating not in RATINGS:
            raise ApiError(422, "invalid_rating", '\'rating\' must be "up" or "down".')
        if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT):
            raise ApiError(
                422, "invalid_comment", "'comment' must be a string of at most 2000 characters."
            )
        if user is not None:  # whose answer it is: its turn's user
            await self.check_rater(request, user, message_id)
        if not await relay.messages.rate(message_id, rating, comment):
            raise ApiError(404, "unknown_message", "There is no such message.")
        return JSONResponse({"message_id": message_id, "rating": rating})

    async def check_rater(self, request: Request, user: User, message_id: str) -> None:
        """The message answers a turn of ``user`` (404 otherwise), whose thread
        LangGraph's ``Auth`` lets them update."""
        relay = self.relay
        message = await relay.messages.get(message_id)
        record = await relay.turns.get(message.turn_id) if message is not None else None
        record = check_owner(user, record, "There is no such message.", "unknown_message")
        await authorize_thread(
            relay.langgraph_auth,
            request,
            "update",
            record,
            {"thread_id": record.thread_id, "metadata": {}, "action": None},
            ApiError(404, "unknown_message", "There is no such message."),
        )
