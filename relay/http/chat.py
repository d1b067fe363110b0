"""``POST /chat`` and ``POST /chat/resume`` for any :class:`relay.GraphAgent` (DESIGN.md §5).

A run starts as the turn's own task (:meth:`relay.turns.runs.RunManager.start`); the
answer is negotiated: the ChatResponse JSON by default, SSE for ``Accept:
text/event-stream``, NDJSON for ``application/x-ndjson``, ``202`` + ``Location`` for
``Prefer: respond-async``. A stream only reads the turn's log on the bus.

What a request may start, and the start, are the admission service's
(:class:`relay.turns.admission.Admission`, shared with ``/agui``): idempotent turn ids
(a known ``turn_id`` with the same body attaches, with another is ``409
turn_conflict``), the same resume again attaching to its run, one running turn per thread
(``409 thread_busy``), a thread waiting on an interrupt taking a resume and not a new
message (``409 thread_paused``). Here: the body, LangGraph's ``Auth``, the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse, Response

from relay.auth import User
from relay.delivery.negotiation import JSON, NotAcceptable, negotiate
from relay.errors import ApiError
from relay.events import RUN_TERMINAL
from relay.http.chat_input import chat_body, resume_body
from relay.http.identity import user_of
from relay.http.langgraph_auth import authorize_chat, resume_authorizer
from relay.http.openapi import CHAT_OPENAPI, RESUME_OPENAPI
from relay.http.parts import RelayParts
from relay.http.requests import read_json_object
from relay.langgraph.agent import GraphAgent
from relay.langgraph.client_tool_limits import ClientTools
from relay.turns.admission import Admission, NewTurn, Resume
from relay.turns.records import TurnRecord
from relay.turns.recovery import terminal_event
from relay.turns.refusals import Refused
from relay.turns.response import STATUSES, ChatResponse


def on_disconnect_of(request: Request) -> str:
    value = request.query_params.get("on_disconnect", "cancel")
    if value not in ("cancel", "continue"):
        raise ApiError(
            422, "invalid_on_disconnect", "on_disconnect must be 'cancel' or 'continue'."
        )
    return value


def configurable_of(
    agent: GraphAgent, request: Request, user: User | None = None
) -> dict[str, Any]:
    """The agent's request-specific ``configurable`` (its ``config_of`` hook), and the user
    the run acts for (``configurable["user"]``: ``{"id", "claims"}``; with LangGraph's
    ``Auth``, ``langgraph_auth_user`` too), when there is one."""
    configurable = agent.request_config(request.headers)
    if user is not None:
        configurable.update(user.configurable())
    return configurable


def media_of(request: Request) -> str:
    """The answer's media type, as the request accepts it (406 when it accepts none)."""
    try:
        return negotiate(request.headers.get("accept"))
    except NotAcceptable as exc:
        raise ApiError(406, "not_acceptable", str(exc)) from None


def prefers_async(request: Request) -> bool:
    """``Prefer: respond-async``: answer ``202`` with the turn's ``Location`` at once."""
    return request.headers.get("prefer", "").lower().replace(" ", "") == "respond-async"


class ChatAnswer:
    """A run's answer, negotiated: ``202`` + ``Location`` for ``Prefer: respond-async``,
    the turn's log on the bus as SSE or NDJSON, or the ChatResponse JSON once the run is
    over. The run may be live, or over (an idempotent retry)."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay

    async def respond(
        self, request: Request, record: TurnRecord, after: int, media: str
    ) -> Response:
        """The run's answer in ``media``, from the event after ``after``."""
        running = self.relay.runs.running(record.turn_id)
        if prefers_async(request):
            return JSONResponse(
                {
                    "turn_id": record.turn_id,
                    "thread_id": record.thread_id,
                    "status": "running" if running else record.status,
                },
                status_code=202,
                headers={"Location": f"/turns/{record.turn_id}"},
            )
        if media != JSON:
            return await self.streamed(request, record, after, media, running)
        return await self.waited(record)

    async def streamed(
        self, request: Request, record: TurnRecord, after: int, media: str, running: bool
    ) -> Response:
        """The run's events: live from the bus, or its outcome when the log is gone."""
        relay = self.relay
        if running or relay.bus.has_turn(record.turn_id):
            return relay.streams.live(
                record.turn_id,
                after,
                media,
                stop_at=RUN_TERMINAL,
                on_disconnect=on_disconnect_of(request),
            )
        latest = await relay.turns.get(record.turn_id) or record
        return relay.streams.outcome(terminal_event(latest, after), after, media)

    async def waited(self, record: TurnRecord) -> Response:
        """The run's ChatResponse JSON, once it is over: its own, or the one its record
        keeps (an idempotent retry of a finished run), or one that says how it ended."""
        relay = self.relay
        response = await relay.runs.wait(record.turn_id)
        if response is None:  # not running (an idempotent retry of a finished run)
            latest = await relay.turns.get(record.turn_id) or record
            if latest.response:
                return Response(latest.response, media_type="application/json")
            status = latest.status if latest.status in STATUSES else "error"
            response = ChatResponse(
                record.thread_id,
                record.turn_id,
                latest.root_trace_id or "",
                status,
                answer="The turn was cancelled."
                if status == "cancelled"
                else "The turn did not finish.",
            )
        return Response(response.to_json(), media_type="application/json")


class ChatRoutes:
    """``POST /chat`` and ``POST /chat/resume`` of ``agent``: the body read and checked,
    LangGraph's ``Auth`` asked, the run admitted (``admission``), the answer negotiated."""

    def __init__(
        self, relay: RelayParts, agent: GraphAgent, admission: Admission, tools: ClientTools
    ) -> None:
        self.relay = relay
        self.agent = agent
        self.admission = admission
        self.tools = tools
        self.answer = ChatAnswer(relay)

    def add_to(self, router: APIRouter, dependencies: Sequence[Any]) -> None:
        """Put the routes on ``router``, behind ``dependencies`` (each a ``Depends``)."""
        router.add_api_route(
            "/chat",
            self.chat,
            methods=["POST"],
            dependencies=list(dependencies),
            tags=["chat"],
            openapi_extra=CHAT_OPENAPI,
            summary=f"Start a turn of {self.agent.name}",
        )
        router.add_api_route(
            "/chat/resume",
            self.resume,
            methods=["POST"],
            dependencies=list(dependencies),
            tags=["chat"],
            openapi_extra=RESUME_OPENAPI,
            summary=f"Resume a paused turn of {self.agent.name}",
        )

    # (no docstring: it would become the operation's description in the OpenAPI document)
    async def chat(self, request: Request) -> Response:
        agent = self.agent
        user = user_of(request)
        media = media_of(request)
        body = chat_body(await read_json_object(request, self.relay.settings.max_body_bytes), agent)
        # LangGraph's Auth: threads.create (a new thread), then threads.create_run
        await authorize_chat(
            self.relay, request, agent.name, body.thread_id, body.turn_id, body.run_kwargs
        )
        admitted = await self.admission.chat(
            NewTurn(
                message=body.message,
                graph_input=body.graph_input,
                request_hash=body.request_hash,
                configurable=self.tools.configure(configurable_of(agent, request, user)),
                user=user,
                turn_id=body.turn_id,
                thread_id=body.thread_id,
                conflict=Refused(
                    "conflict",
                    "turn_conflict",
                    f"Turn {body.turn_id} exists with a different "
                    "request; send a new turn_id for a new turn.",
                ),
                resume_hint="resume it with POST /chat/resume first",
            )
        )
        return await self.answer.respond(request, admitted.record, admitted.after, media)

    # (no docstring: it would become the operation's description in the OpenAPI document)
    async def resume(self, request: Request) -> Response:
        agent = self.agent
        user = user_of(request)
        media = media_of(request)
        body = resume_body(await read_json_object(request, self.relay.settings.max_body_bytes))
        answer = body.answer
        request_hash = body.request_hash
        admitted = await self.admission.resume(
            Resume(
                thread_id=body.thread_id,
                turn_id=body.turn_id,
                answer=lambda pending: answer,
                request_hash=lambda record: request_hash,
                configurable=configurable_of(agent, request, user),
                user=user,
                authorize=resume_authorizer(
                    self.relay,
                    request,
                    agent.name,
                    answer,
                    ApiError(404, "unknown_turn", "There is no such turn in that thread."),
                ),
                raw=answer,
            )
        )
        return await self.answer.respond(request, admitted.record, admitted.after, media)


def chat_router(
    relay: RelayParts,
    agent: GraphAgent,
    admission: Admission,
    dependencies: list[Any],
    tools: ClientTools,
) -> APIRouter:
    """The agent's ``/chat`` and ``/chat/resume`` (include it with a prefix): the body
    read and checked, the run admitted (``admission``, shared with its ``/agui``), the
    answer negotiated. ``tools``: the graph's client-executed tools (a run's limits)."""
    router = APIRouter()
    ChatRoutes(relay, agent, admission, tools).add_to(router, [Depends(d) for d in dependencies])
    return router
