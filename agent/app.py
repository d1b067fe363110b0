"""The demo app: FastAPI + the support agent + the relay (DESIGN.md §2, §5).

``create_app()`` builds the app; its lifespan builds the tracer, the checkpointer and the
compiled graph once. ``POST /chat`` and ``POST /chat/resume`` start a run as the turn's
own task and answer by content negotiation: the ChatResponse JSON by default, SSE for
``Accept: text/event-stream``, NDJSON for ``application/x-ndjson``. The stream only reads
the turn's log on the bus.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from starlette.responses import JSONResponse, Response

from agent.agui_app import add_agui_routes
from agent.faults import HEADER as FAULT_HEADER
from agent.faults import Fault, parse_faults
from agent.graph import build_graph, topology
from agent.model import build_model
from agent.nodes import NodeDeps
from agent.openapi import CHAT_OPENAPI, RESUME_OPENAPI
from agent.retrieval import KnowledgeBase
from agent.service import SupportAgent
from agent.tools.refund import RefundLedger
from relay import (
    JSON,
    PAUSED,
    RUN_TERMINAL,
    ApiError,
    ChatResponse,
    NotAcceptable,
    Relay,
    ThreadBusy,
    TurnRecord,
    check_checkpointer,
    id_key,
    negotiate,
    open_checkpointer,
    read_json_object,
)

log = logging.getLogger("agent.app")

_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def create_app(environ: Mapping[str, str] | None = None) -> FastAPI:
    env = dict(os.environ if environ is None else environ)
    relay = Relay.from_env(env)
    settings = relay.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = env.get("OTEL_SERVICE_NAME", "span-relay-demo")
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(relay.span_processor)
        relay.add_span_store(provider)  # finished spans -> the span store, for replay
        relay.add_otlp_export(provider, env)
        tracer = provider.get_tracer("agent")
        ledger = RefundLedger(settings.data_dir / "refunds.db")
        deps = NodeDeps(tracer, KnowledgeBase(), build_model(env), ledger,
                        tool_timeout_s=settings.tool_timeout_s,
                        span_events=relay.span_processor.add_event)
        async with open_checkpointer(settings, env) as saver:  # SQLite, or Postgres (replicas)
            graph = build_graph(deps, saver)
            relay.topology = topology(graph)
            # /readyz covers the checkpointer too: every /chat reads it first
            relay.add_readiness_check("checkpoints", lambda: check_checkpointer(saver))
            app.state.ledger = ledger
            app.state.agent = SupportAgent(graph, tracer, relay.topology, relay.turns,
                                           settings.turn_timeout_s, messages=relay.messages)
            await relay.start()
            try:
                yield
            finally:
                await relay.stop()
                provider.shutdown()
                ledger.close()

    app = FastAPI(title="span-relay demo", version="0.1.0", lifespan=lifespan)
    app.state.relay = relay
    app.include_router(relay.router)
    relay.install(app)
    auth = [Depends(relay.require_token)]
    limited = [*auth, Depends(relay.rate_limit), Depends(relay.require_bus)]
    starting = asyncio.Lock()

    def faults_of(request: Request) -> dict[str, Fault]:
        header = request.headers.get(FAULT_HEADER)
        if not settings.faults or header is None:
            return {}
        try:
            return parse_faults(header)
        except ValueError as exc:
            raise ApiError(400, "invalid_fault", str(exc)) from None

    def media_of(request: Request) -> str:
        try:
            return negotiate(request.headers.get("accept"))
        except NotAcceptable as exc:
            raise ApiError(406, "not_acceptable", str(exc)) from None

    async def respond(request: Request, record: TurnRecord, after: int, media: str) -> Response:
        """The run's answer, negotiated. The run may be live, or over (an idempotent retry)."""
        if request.headers.get("prefer", "").lower().replace(" ", "") == "respond-async":
            return JSONResponse({"turn_id": record.turn_id, "thread_id": record.thread_id,
                                 "status": "running" if relay.runs.running(record.turn_id)
                                 else record.status},
                                status_code=202, headers={"Location": f"/turns/{record.turn_id}"})
        if media != JSON:
            if relay.runs.running(record.turn_id) or relay.bus.has_turn(record.turn_id):
                on_disconnect = request.query_params.get("on_disconnect", "cancel")
                if on_disconnect not in ("cancel", "continue"):
                    raise ApiError(422, "invalid_on_disconnect",
                                   "on_disconnect must be 'cancel' or 'continue'.")
                return relay.stream(record.turn_id, after, media, stop_at=RUN_TERMINAL,
                                    on_disconnect=on_disconnect)
            return relay.outcome_stream(await relay.turns.get(record.turn_id) or record,
                                        after, media)
        response = await relay.runs.wait(record.turn_id)
        if response is None:  # not running (an idempotent retry of a finished run)
            latest = await relay.turns.get(record.turn_id) or record
            if latest.response:
                return Response(latest.response, media_type="application/json")
            response = ChatResponse(record.thread_id, record.turn_id,
                                    latest.root_trace_id or "", _final(latest.status),
                                    answer="The turn was cancelled." if latest.status ==
                                    "cancelled" else "The turn did not finish.")
        return Response(response.to_json(), media_type="application/json")

    @app.post("/chat", dependencies=limited, tags=["chat"], openapi_extra=CHAT_OPENAPI)
    async def chat(request: Request) -> Response:
        media = media_of(request)
        body = await read_json_object(request, settings.max_body_bytes)
        message = body.get("message")
        if not isinstance(message, str) or not message.strip():
            raise ApiError(422, "invalid_message",
                           "'message' must be a non-empty string: the user's message.")
        thread_id = _id_field(body, "thread_id")
        client_turn_id = _turn_id_field(body)
        faults = faults_of(request)
        digest = _digest({"message": message,
                          "thread_id": id_key(thread_id) if thread_id else None})
        agent: SupportAgent = request.app.state.agent
        async with starting:  # one check-and-start at a time: duplicates attach, never rerun
            if client_turn_id is not None:
                existing = await relay.turns.get(client_turn_id)
                if existing is not None:
                    if existing.request_hash != digest:
                        raise ApiError(409, "turn_conflict",
                                       f"Turn {client_turn_id} exists with a different "
                                       "request; send a new turn_id for a new turn.")
                    return await respond(request, existing, 0, media)
            thread_id = await _thread_spelling(relay, thread_id) or secrets.token_hex(16)
            if await agent.pending_interrupts(thread_id):
                raise ApiError(409, "thread_paused",
                               f"Thread {thread_id} has a turn waiting for approval; resume "
                               "it with POST /chat/resume first.")
            record = TurnRecord(turn_id=client_turn_id or secrets.token_hex(16),
                                thread_id=thread_id, status="running", message=message,
                                request_hash=digest, started_at=time.time() * 1000)
            try:
                await relay.runs.check_thread_settled(thread_id)
            except ThreadBusy as exc:
                raise ApiError(409, "thread_busy", f"Thread {thread_id} is already running "
                               f"turn {exc.turn_id}; wait for it to finish.") from None
            try:
                after = await relay.runs.start(record, "chat",
                                               lambda: agent.chat(record, faults), create=True)
            except ThreadBusy as exc:
                raise ApiError(409, "thread_busy", f"Thread {thread_id} is already running "
                               f"turn {exc.turn_id}; wait for it to finish.") from None
        return await respond(request, record, after, media)

    @app.post("/chat/resume", dependencies=limited, tags=["chat"], openapi_extra=RESUME_OPENAPI)
    async def resume(request: Request) -> Response:
        media = media_of(request)
        body = await read_json_object(request, settings.max_body_bytes)
        thread_id = _id_field(body, "thread_id", required=True)
        turn_id = _id_field(body, "turn_id", required=True)
        if "resume" not in body:
            raise ApiError(422, "invalid_resume", "'resume' is required: the answer to the "
                           "interrupt, or {interrupt_id: answer}.")
        faults = faults_of(request)
        digest = _digest({"thread_id": id_key(thread_id), "turn_id": id_key(turn_id),
                          "resume": body["resume"]})
        agent: SupportAgent = request.app.state.agent
        known = await relay.turns.get(turn_id)  # the id in any spelling: the turn's own
        if known is not None:
            await relay.runs.settle(known.turn_id)  # a run that just paused: let it record
        async with starting:
            record = await relay.turns.get(turn_id)
            if record is None or record.thread_key != id_key(thread_id):
                raise ApiError(404, "unknown_turn", "There is no such turn in that thread.")
            turn_id, thread_id = record.turn_id, record.thread_id
            if record.resume_hash == digest and record.status != PAUSED:
                # the same resume again: attach to that run (running or over), never rerun
                return await respond(request, record, record.run_after_seq, media)
            if relay.runs.running(turn_id):
                raise ApiError(409, "turn_running", f"Turn {turn_id} is running, not paused.")
            pending = await agent.pending_interrupts(thread_id)
            if record.status != PAUSED or not pending:
                raise ApiError(409, "not_paused", f"Turn {turn_id} is {record.status}, not "
                               "paused; nothing to resume.")
            answers = _match_interrupts(body["resume"], pending)
            try:
                await relay.runs.check_thread_settled(thread_id)
            except ThreadBusy as exc:
                raise ApiError(409, "thread_busy", f"Thread {thread_id} is already running "
                               f"turn {exc.turn_id}; wait for it to finish.") from None
            record.resume_hash = digest
            await relay.turns.update(turn_id, resume_hash=digest)
            after = await relay.runs.start(record, "resume",
                                           lambda: agent.resume(record, answers, faults))
        return await respond(request, record, after, media)

    # POST /agui: the same runs for AG-UI clients (agent/agui_app.py, relay/agui.py)
    add_agui_routes(app, relay, starting=starting, faults_of=faults_of, dependencies=limited,
                    digest=_digest, match_interrupts=_match_interrupts)
    return app


def _digest(value: Any) -> str:
    """The idempotency fingerprint of a request body."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _final(status: str) -> str:
    return status if status in ("answered", "refused", "paused", "error", "cancelled",
                                "interrupted") else "error"


def _id_field(body: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise ApiError(422, f"invalid_{name}", f"'{name}' is required.")
        return None
    if not isinstance(value, str) or not _ID.match(value):
        raise ApiError(422, f"invalid_{name}", f"'{name}' must be 1-128 characters of "
                       "letters, digits, '_', '-', '.', ':'.")
    return value


def _turn_id_field(body: dict[str, Any]) -> str | None:
    value = body.get("turn_id")
    if value is None:
        return None
    try:
        if not isinstance(value, str) or not _ID.match(value):
            return _bad_turn_id()
        uuid.UUID(value)  # hyphens or not, any case
    except ValueError:
        return _bad_turn_id()
    return value  # as the client spelled it: the id it reads back and reconnects with


async def _thread_spelling(relay: Relay, thread_id: str | None) -> str | None:
    """A thread is one thread in every spelling of its id (a UUID with or without
    hyphens, any case): its turns run under the spelling it began with, which is the key
    of its checkpoints and of its lock."""
    if thread_id is None:
        return None
    latest = await relay.turns.list(thread_id, 1)
    return latest[0].thread_id if latest else thread_id


def _bad_turn_id() -> str:
    raise ApiError(422, "invalid_turn_id", "'turn_id' must be a UUID (it is the turn's "
                   "idempotency key); leave it out to get a random one.")


def _match_interrupts(resume: Any, pending: list[Any]) -> dict[str, Any]:
    """The resume payload as {interrupt_id: answer}, checked against what is pending."""
    ids = {p.id for p in pending}
    if isinstance(resume, dict) and resume and set(resume) <= ids:
        answers = dict(resume)
    elif len(pending) == 1:
        answers = {pending[0].id: resume}
    else:
        raise ApiError(422, "invalid_resume", "This turn waits on several interrupts; send "
                       "'resume' as {interrupt_id: answer} for each of: "
                       f"{', '.join(sorted(ids))}.")
    missing = ids - set(answers)
    if missing:
        raise ApiError(422, "invalid_resume",
                       f"'resume' has no answer for interrupt(s) {', '.join(sorted(missing))}.")
    for item in pending:
        value = item.value
        if isinstance(value, dict) and value.get("type") == "approval":
            answer = answers[item.id]
            if not isinstance(answer, dict) or not isinstance(answer.get("approved"), bool):
                raise ApiError(422, "invalid_resume", "An approval is answered with "
                               '{"approved": true} or {"approved": false, "comment": "..."}.')
            if "comment" in answer and not isinstance(answer["comment"], str):
                raise ApiError(422, "invalid_resume", "'comment' must be a string.")
    return answers
