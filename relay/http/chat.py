"""``POST /chat`` and ``POST /chat/resume`` for any :class:`relay.GraphAgent` (DESIGN.md §5).

A run starts as the turn's own task (:meth:`relay.turns.runs.RunManager.start`); the
answer is negotiated: the ChatResponse JSON by default, SSE for ``Accept:
text/event-stream``, NDJSON for ``application/x-ndjson``, ``202`` + ``Location`` for
``Prefer: respond-async``. A stream only reads the turn's log on the bus.

Idempotent: a chat with a known ``turn_id`` and the same body attaches to that turn (a
different body is ``409 turn_conflict``); the same resume again attaches to its run. One
check-and-start at a time per turn and per thread (``starting``, a
:class:`relay.turns.starting.StartLocks` shared with ``/agui``): concurrent duplicates
start one run, and starts that share neither do not wait for each other. One running
turn per thread (``409 thread_busy``); a thread waiting on an interrupt takes a resume,
not a new message (``409 thread_paused``).
"""

from __future__ import annotations

import secrets
import time
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
from relay.http.identity import may_see, may_use, user_of
from relay.http.langgraph_auth import authorize_chat, authorize_run
from relay.http.openapi import CHAT_OPENAPI, RESUME_OPENAPI
from relay.http.parts import RelayParts
from relay.http.requests import read_json_object
from relay.langgraph.agent import GraphAgent
from relay.turns.records import PAUSED, TurnRecord, id_key
from relay.turns.recovery import terminal_event
from relay.turns.response import STATUSES, ChatResponse
from relay.turns.runs import ThreadBusy
from relay.turns.starting import StartLocks


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


async def thread_spelling(
    relay: RelayParts, thread_id: str | None, agent: GraphAgent, user: User | None = None
) -> str | None:
    """A thread is one thread in every spelling of its id (a UUID with or without
    hyphens, any case): its turns run under the spelling it began with, which is the key
    of its checkpoints and of its lock. A thread belongs to the graph it began on (the
    checkpoints of one graph are not another's state): elsewhere it is a 409. It belongs
    to the user of its first turn, for good (relay/turns/threads.py; a thread with no turn
    yet is claimed here for the asker): for another user it does not exist (404)."""
    if thread_id is None:
        return None
    owner = await relay.turns.claim_thread(thread_id, user.id if user is not None else "")
    latest = await relay.turns.list(thread_id, 1)
    if not may_use(user, owner):
        raise ApiError(
            404,
            "unknown_thread",
            f"There is no thread {thread_id} of yours; send no thread_id to start a new one.",
        )
    if latest and latest[0].graph and latest[0].graph != agent.name:
        raise ApiError(
            409,
            "thread_conflict",
            f"Thread {latest[0].thread_id} belongs to "
            f"graph {latest[0].graph}; send its turns to /graphs/"
            f"{latest[0].graph}/chat, or start a new thread here.",
        )
    return latest[0].thread_id if latest else thread_id


async def known_turn(
    relay: RelayParts,
    turn_id: str,
    request_hash: str,
    agent: GraphAgent,
    conflict: ApiError,
    user: User | None = None,
) -> TurnRecord | None:
    """The turn a retried request names, when it exists: the same request (same body,
    same graph, same user) attaches to it; another one is ``conflict`` (a 409, whoever's
    the turn is: the answer says nothing of its owner)."""
    existing = await relay.turns.get(turn_id)
    if existing is not None and (
        existing.request_hash != request_hash
        or (existing.graph and existing.graph != agent.name)
        or not may_see(user, existing)
    ):
        raise conflict
    return existing


def check_graph(record: TurnRecord, agent: GraphAgent) -> None:
    """A turn is found only through the graph it ran on."""
    if record.graph and record.graph != agent.name:
        raise ApiError(
            404,
            "unknown_turn",
            f"There is no such turn in graph {agent.name} (it ran on graph {record.graph}).",
        )


async def start_run(
    relay: RelayParts, record: TurnRecord, kind: str, runner: Any, create: bool = False
) -> int:
    """Start the run; another turn running on the thread (here or on another instance)
    is a 409."""
    try:
        await relay.runs.check_thread_settled(record.thread_id)
        return await relay.runs.start(record, kind, runner, create=create)
    except ThreadBusy as exc:
        raise ApiError(
            409,
            "thread_busy",
            f"Thread {record.thread_id} is already running "
            f"turn {exc.turn_id}; wait for it to finish.",
        ) from None


def chat_router(
    relay: RelayParts,
    agent: GraphAgent,
    starting: StartLocks,
    dependencies: list[Any],
    tools: ClientTools,
) -> APIRouter:
    """The agent's ``/chat`` and ``/chat/resume`` (include it with a prefix); ``tools``:
    the graph's client-executed tools (checks, limits), shared with its ``/agui``."""
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
        configurable = tools.configure(configurable_of(agent, request, user))
        thread_key = id_key(thread_id) if thread_id else None
        request_hash = digest(
            {"message": message, "thread_id": thread_key}
            if graph_input is None
            else {"input": graph_input, "thread_id": thread_key}
        )
        # LangGraph's Auth: threads.create (a new thread), then threads.create_run
        run_kwargs = {"input": graph_input if graph_input is not None else {"message": message}}
        await authorize_chat(relay, request, agent.name, thread_id, client_turn_id, run_kwargs)
        # one check-and-start at a time for this turn and thread: duplicates attach, never
        # rerun; requests that name neither the same turn nor the same thread do not wait
        async with starting.hold(StartLocks.keys(turn=client_turn_id, thread=thread_id)):
            existing = (
                None
                if client_turn_id is None
                else await known_turn(
                    relay,
                    client_turn_id,
                    request_hash,
                    agent,
                    ApiError(
                        409,
                        "turn_conflict",
                        f"Turn {client_turn_id} exists with a different "
                        "request; send a new turn_id for a new turn.",
                    ),
                    user,
                )
            )
            if existing is not None:
                return await respond(request, existing, 0, media)
            spelled = await thread_spelling(relay, thread_id, agent, user)
            # a thread id made here is new: it has no checkpoint, so nothing to look up
            thread_id = spelled or secrets.token_hex(16)
            if spelled is not None and await agent.pending_interrupts(thread_id):
                raise ApiError(
                    409,
                    "thread_paused",
                    f"Thread {thread_id} has a turn waiting for an answer; resume "
                    "it with POST /chat/resume first.",
                )
            record = TurnRecord(
                turn_id=client_turn_id or secrets.token_hex(16),
                thread_id=thread_id,
                status="running",
                message=message,
                request_hash=request_hash,
                started_at=time.time() * 1000,
                graph=agent.name,
                user_id=user.id if user else "",
            )
            run_input = graph_input if graph_input is not None else agent.input_of(message, record)
            after = await start_run(
                relay,
                record,
                "chat",
                lambda: tools.watched(
                    record, agent.chat(record, run_input, configurable), configurable
                ),
                create=True,
            )
        return await respond(request, record, after, media)

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
        configurable = configurable_of(agent, request, user)
        assert thread_id is not None and turn_id is not None
        request_hash = digest(
            {"thread_id": id_key(thread_id), "turn_id": id_key(turn_id), "resume": body["resume"]}
        )
        known = await relay.turns.get(turn_id)  # the id in any spelling: the turn's own
        if known is not None and may_see(user, known):
            await relay.runs.settle(known.turn_id)  # a run that just paused: let it record
        async with starting.hold(StartLocks.keys(turn=turn_id, thread=thread_id)):
            record = await relay.turns.get(turn_id)
            if (
                record is None
                or record.thread_key != id_key(thread_id)
                or not may_see(user, record)
            ):
                raise ApiError(404, "unknown_turn", "There is no such turn in that thread.")
            check_graph(record, agent)
            await authorize_run(  # LangGraph's Auth: a resume is threads.create_run
                relay.langgraph_auth,
                request,
                agent.name,
                record,
                record.thread_id,
                record.turn_id,
                {"command": {"resume": body["resume"]}},
                ApiError(404, "unknown_turn", "There is no such turn in that thread."),
            )
            if record.resume_hash == request_hash and record.status != PAUSED:
                # the same resume again: attach to that run (running or over), never rerun
                return await respond(request, record, record.run_after_seq, media)
            if relay.runs.running(record.turn_id):
                raise ApiError(
                    409, "turn_running", f"Turn {record.turn_id} is running, not paused."
                )
            pending = await agent.pending_interrupts(record.thread_id)
            tools.refuse_spent_token(record, body["resume"], pending)
            if record.status != PAUSED or not pending:
                raise ApiError(
                    409,
                    "not_paused",
                    f"Turn {record.turn_id} is {record.status}, not paused; nothing to resume.",
                )
            answers = await tools.answers(record, body["resume"], pending, configurable)
            configurable = tools.configure(
                configurable, record=record, pending=pending, answers=answers
            )
            try:
                await relay.runs.check_thread_settled(record.thread_id)
            except ThreadBusy as exc:
                raise ApiError(
                    409,
                    "thread_busy",
                    f"Thread {record.thread_id} is already "
                    f"running turn {exc.turn_id}; wait for it to finish.",
                ) from None
            record.resume_hash = request_hash
            await relay.turns.update(record.turn_id, resume_hash=request_hash)
            after = await start_run(
                relay,
                record,
                "resume",
                lambda: tools.watched(
                    record, agent.resume(record, answers, configurable), configurable
                ),
            )
        return await respond(request, record, after, media)

    return router
