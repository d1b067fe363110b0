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

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse, Response

from relay.auth import User
from relay.delivery.negotiation import JSON, NotAcceptable, negotiate
from relay.errors import ApiError
from relay.events import RUN_TERMINAL
from relay.http.chat_input import (
    CHAT_FIELDS,
    RESUME_FIELDS,
    digest,
    id_field,
    known_fields,
    message_or_input,
    turn_id_field,
)
from relay.http.client_tools import ClientTools
from relay.http.identity import user_of
from relay.http.langgraph_auth import authorize_chat, resume_authorizer
from relay.http.openapi import CHAT_OPENAPI, RESUME_OPENAPI
from relay.http.parts import RelayParts
from relay.http.requests import read_json_object
from relay.langgraph.agent import GraphAgent
from relay.turns.admission import Admission, NewTurn, Resume
from relay.turns.records import TurnRecord, id_key
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
    settings = relay.settings
    limited = [Depends(d) for d in dependencies]

    def media_of(request: Request) -> str:
        try:
            return negotiate(request.headers.get("accept"))
        except NotAcceptable as exc:
            raise ApiError(406, "not_acceptable", str(exc)) from None

    async def respond(request: Request, record: TurnRecord, after: int, media: str) -> Response:
        """The run's answer, negotiated. The run may be live, or over (an idempotent retry)."""
        running = relay.runs.running(record.turn_id)
        if request.headers.get("prefer", "").lower().replace(" ", "") == "respond-async":
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

    @router.post(
        "/chat",
        dependencies=limited,
        tags=["chat"],
        openapi_extra=CHAT_OPENAPI,
        summary=f"Start a turn of {agent.name}",
    )
    async def chat(request: Request) -> Response:
        user = user_of(request)
        media = media_of(request)
        body = await read_json_object(request, settings.max_body_bytes)
        known_fields(body, CHAT_FIELDS, "/chat")
        message, graph_input = message_or_input(body)
        refusal = agent.message_refusal() if graph_input is None else None
        if refusal is not None:
            raise ApiError(422, "input_required", refusal)
        thread_id = id_field(body, "thread_id")
        client_turn_id = turn_id_field(body)
        thread_key = id_key(thread_id) if thread_id else None
        request_hash = digest(
            {"message": message, "thread_id": thread_key}
            if graph_input is None
            else {"input": graph_input, "thread_id": thread_key}
        )
        # LangGraph's Auth: threads.create (a new thread), then threads.create_run
        run_kwargs = {"input": graph_input if graph_input is not None else {"message": message}}
        await authorize_chat(relay, request, agent.name, thread_id, client_turn_id, run_kwargs)
        admitted = await admission.chat(
            NewTurn(
                message=message,
                graph_input=graph_input,
                request_hash=request_hash,
                configurable=tools.configure(configurable_of(agent, request, user)),
                user=user,
                turn_id=client_turn_id,
                thread_id=thread_id,
                conflict=Refused(
                    "conflict",
                    "turn_conflict",
                    f"Turn {client_turn_id} exists with a different "
                    "request; send a new turn_id for a new turn.",
                ),
                resume_hint="resume it with POST /chat/resume first",
            )
        )
        return await respond(request, admitted.record, admitted.after, media)

    @router.post(
        "/chat/resume",
        dependencies=limited,
        tags=["chat"],
        openapi_extra=RESUME_OPENAPI,
        summary=f"Resume a paused turn of {agent.name}",
    )
    async def resume(request: Request) -> Response:
        user = user_of(request)
        media = media_of(request)
        body = await read_json_object(request, settings.max_body_bytes)
        known_fields(body, RESUME_FIELDS, "/chat/resume")
        thread_id = id_field(body, "thread_id", required=True)
        turn_id = id_field(body, "turn_id", required=True)
        if "resume" not in body:
            raise ApiError(
                422,
                "invalid_resume",
                "'resume' is required: the answer to the interrupt, or {interrupt_id: answer}.",
            )
        assert thread_id is not None and turn_id is not None
        answer = body["resume"]
        request_hash = digest(
            {"thread_id": id_key(thread_id), "turn_id": id_key(turn_id), "resume": answer}
        )

        admitted = await admission.resume(
            Resume(
                thread_id=thread_id,
                turn_id=turn_id,
                answer=lambda pending: answer,
                request_hash=lambda record: request_hash,
                configurable=configurable_of(agent, request, user),
                user=user,
                authorize=resume_authorizer(
                    relay,
                    request,
                    agent.name,
                    answer,
                    ApiError(404, "unknown_turn", "There is no such turn in that thread."),
                ),
                raw=answer,
            )
        )
        return await respond(request, admitted.record, admitted.after, media)

    return router
